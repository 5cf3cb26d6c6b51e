#pragma once
// The seam between the training loop and a live console (the REPL, script/repl.hpp),
// as plan_policy.hpp is for policies: train/ sees only this interface.
//
// Rank 0's loop calls serve() at every iteration boundary (every meeting in the
// relaxed sync modes): the console runs the commands that came in since, never
// while the loop's own Lua (the policy) is being asked, and reads the loop's state
// through the view. What a command asks of the run (stop, pause, an emulated
// slowdown) comes back in the requests, which rank 0 sends to every rank with the
// next Control message (control.hpp): all ranks stop, pause and change speed
// together.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "engine/train/plan.hpp"
#include "engine/train/worker_stats.hpp"

namespace tandem {

// One finished iteration, as history(n) shows it.
struct HistoryRow {
  int64_t iteration = 0;
  double step_ms = 0.0, loss = 0.0, wall_s = 0.0;
  std::vector<int64_t> local_batch;
  std::string sync;  // the sync mode, when not bsp
};

struct ConsoleView {
  // The last iteration completed, numbered as history() and the trace number them
  // (from 0; -1 before the first): status(), the greeting and the pause message
  // all say this one.
  int64_t iteration = -1;
  int64_t total = 0, global_batch = 0;
  int workers = 0;
  double wall_s = 0.0, test_accuracy = -1.0;
  const Plan* plan = nullptr;
  const std::vector<WorkerStats>* reports = nullptr;  // the last iteration's, by rank (valid = 0: none yet)
  const std::deque<HistoryRow>* history = nullptr;     // newest last
  std::vector<std::string> devices, hosts;             // by rank
  bool paused = false;
};

// An emulated slowdown scheduled from the console: worker at speed x from the next
// iteration for `iterations` (0: to the end).
struct ConsoleEvent {
  int worker = 0;
  double speed = 1.0;
  int64_t iterations = 0;
};

struct ConsoleRequests {
  bool stop = false, pause = false, resume = false;
  bool checkpoint = false;  // rank 0 writes one at this boundary
  std::vector<ConsoleEvent> events;
};

class Console {
public:
  virtual ~Console() = default;
  // Runs the pending commands (each bounded by a time budget) and returns at once.
  virtual void serve(const ConsoleView& view, ConsoleRequests& requests) = 0;
  // While paused: waits for commands and runs them, until a resume or stop.
  virtual void serve_paused(const ConsoleView& view, ConsoleRequests& requests) = 0;
  // The run is over: attached clients are told, and the socket goes.
  virtual void finished(const std::string& how) = 0;
};

}  // namespace tandem
