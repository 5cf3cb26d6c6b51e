#pragma once
// The training loop's side of checkpoints (checkpoint/file.hpp has the file): when one is
// due, what goes in it from the model and optimizer, the start-up check that the run
// directory can hold them, and loading one back on every rank for --resume.
//
// Rank 0 writes alone: in bsp every rank holds the same weights and momentum after
// the update, and in the relaxed modes every rank holds the server's after a
// meeting, which is where those checkpoint. The others go on to the next iteration
// and wait for rank 0 in its collective (within collective_timeout_s).
#include <cstdint>
#include <functional>
#include <string>

#include "engine/dist/comm.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/train/checkpoint/file.hpp"
#include "engine/train/config.hpp"

namespace tandem {

class Checkpointer {
public:
  Checkpointer(const CheckpointConfig& cfg, const std::string& run_dir, Model& model, Optimizer& optimizer);
  bool enabled() const { return cfg_.enabled(); }
  // Whether a periodic checkpoint is due after `done` iterations, `train_ms` into
  // training (rank 0 decides alone: only it writes).
  bool due(int64_t done, double train_ms) const;
  // Fills in the model's and optimizer's parts of `s` and writes it (rank 0).
  void write(CheckpointState s, const std::function<void()>& midway = {});
  int64_t last_iteration() const { return last_iteration_; }
  // A resumed run: the next periodic checkpoint counts from there.
  void resumed_at(int64_t iteration, double train_ms) {
    last_iteration_ = iteration;
    last_ms_ = train_ms;
  }
  // Start-up, rank 0: the checkpoint directory can be created and written, and the
  // disk has room for keep + 1 checkpoints (the new one is written before the
  // oldest goes) plus a margin for the trace; otherwise fails at once, naming the
  // directory, the free and the needed space.
  void check_disk() const;
  // Bytes of one checkpoint of this model (the header aside).
  size_t bytes() const;

private:
  CheckpointConfig cfg_;
  std::string dir_;
  Model& model_;
  Optimizer& optimizer_;
  int64_t last_iteration_ = -1;
  double last_ms_ = 0.0;
};

// Every rank: the newest checkpoint of run_dir that passes every check, loaded into
// the model and optimizer. Rank 0 picks it (falling back past rejected ones) and
// tells the others which file; fails naming every rejection when none is good.
CheckpointState resume_from(const std::string& run_dir, Model& model, Optimizer& optimizer, Comm& comm);

// The checkpoint's pending stats (rank 0), when a run of `world` workers can record
// them as the uninterrupted run would have; empty otherwise. The reader bounds them by
// the file only: here each record must be a WorkerStats of this build and name the
// rank whose slot it fills, since the recorder indexes by its rank and group.
std::string usable_pending_stats(const CheckpointState& s, int world);

}  // namespace tandem
