#pragma once
// The training loop's side of the live console (console.hpp is the interface the
// REPL implements). Rank 0 runs the commands that came in at every boundary, puts
// what they ask of the run into the outgoing Control, and keeps the history the
// console shows; every rank applies what arrived: a slowdown from the next
// iteration, and a pause, during which rank 0 serves the console and the others wait
// for its word. Slowdowns asked together go out one per iteration.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/dist/comm.hpp"
#include "engine/train/console.hpp"
#include "engine/train/control.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/progress.hpp"

namespace tandem {

class ConsoleLink {
public:
  // console: rank 0's console, or null (other ranks, or none asked for).
  // targets_per_sample: predictions per sample (the loss shown is their mean).
  ConsoleLink(Console* console, Comm& comm, Emulator& emulator, int64_t total, int64_t targets_per_sample);
  bool active() const { return console_ != nullptr; }

  // Rank 0, at the boundary before iteration t (t - 1 the last completed): runs the
  // commands since the last.
  void serve(int64_t t, const Plan& plan, double wall_s, double test_accuracy);
  // Rank 0: what the commands asked, into the control it sends.
  void write(Control& c);
  // Rank 0: a checkpoint() was asked at this boundary.
  bool checkpoint_asked() const { return asked_.checkpoint; }
  // Rank 0: one recorded iteration, for workers() and history().
  void remember(int64_t iteration, const std::vector<WorkerStats>& reports, const std::string& sync, double wall_s);
  // Every rank, after `done` iterations: the console's part of c. Returns true to
  // stop. A checkpoint() asked while paused sets c.checkpoint.
  bool apply(Control& c, int64_t done, const Plan& plan, Timeline& timeline, double wall_s, double test_accuracy);
  // The console stopped the run (rank 0's stop(), or a stop while paused).
  bool stopped() const { return stopped_; }
  // A checkpoint asked while paused and not yet written (a run stopping right
  // there gets it at the end).
  bool checkpoint_pending() const { return checkpoint_pending_; }
  void checkpoint_written() { checkpoint_pending_ = false; }
  void finished(const std::string& how);

private:
  ConsoleView view(int64_t iteration, const Plan& plan, double wall_s, double test_accuracy, bool paused) const;

  Console* console_;
  Comm& comm_;
  Emulator& emulator_;
  int64_t total_, targets_;
  ConsoleRequests asked_;
  std::deque<SlowdownRequest> slowdowns_;  // asked, not yet sent
  std::vector<WorkerStats> reports_;       // the last recorded, by rank
  std::deque<HistoryRow> history_;
  bool stopped_ = false, checkpoint_pending_ = false;
};

}  // namespace tandem
