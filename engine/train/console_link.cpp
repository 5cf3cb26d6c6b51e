#include "engine/train/console_link.hpp"

#include <algorithm>
#include <limits>

#include "engine/core/log.hpp"

namespace tandem {

ConsoleLink::ConsoleLink(Console* console, Comm& comm, Emulator& emulator, int64_t total, int64_t targets_per_sample)
    : console_(console), comm_(comm), emulator_(emulator), total_(total),
      targets_(std::max<int64_t>(targets_per_sample, 1)),
      reports_(static_cast<size_t>(comm.size())) {}

ConsoleView ConsoleLink::view(int64_t iteration, const Plan& plan, double wall_s, double test_accuracy,
                              bool paused) const {
  ConsoleView v;
  v.iteration = iteration;
  v.total = total_;
  v.global_batch = plan.global_batch();  // the plan in force's: a policy may change B
  v.workers = comm_.size();
  v.wall_s = wall_s;
  v.test_accuracy = test_accuracy > 0 ? test_accuracy : -1.0;
  v.plan = &plan;
  v.reports = &reports_;
  v.history = &history_;
  v.paused = paused;
  return v;
}

void ConsoleLink::serve(int64_t t, const Plan& plan, double wall_s, double test_accuracy) {
  asked_ = ConsoleRequests{};
  if (!console_) return;
  console_->serve(view(t - 1, plan, wall_s, test_accuracy, false), asked_);
  stopped_ = stopped_ || asked_.stop;
}

void ConsoleLink::write(Control& c) {
  c.pause = c.pause || asked_.pause;
  c.stop = c.stop || asked_.stop;
  for (const ConsoleEvent& e : asked_.events) slowdowns_.push_back({e.worker, e.speed, e.iterations});
  asked_.events.clear();
  if (!slowdowns_.empty()) {
    c.slowdown = slowdowns_.front();
    slowdowns_.pop_front();
  }
}

void ConsoleLink::remember(int64_t iteration, const std::vector<WorkerStats>& reports, const std::string& sync,
                           double wall_s) {
  if (!console_) return;
  reports_ = reports;
  HistoryRow h;
  h.iteration = iteration;
  h.wall_s = wall_s;
  h.sync = sync;
  int64_t samples = 0;
  for (const WorkerStats& w : reports) {
    h.step_ms = std::max(h.step_ms, w.step_ms);
    h.loss += w.loss_sum;
    samples += w.local_batch;
    h.local_batch.push_back(w.local_batch);
  }
  h.loss /= static_cast<double>(std::max<int64_t>(samples * targets_, 1));
  history_.push_back(std::move(h));
  if (history_.size() > 1000) history_.pop_front();
}

bool ConsoleLink::apply(Control& c, int64_t done, const Plan& plan, Timeline& timeline, double wall_s,
                        double test_accuracy) {
  const bool lead = comm_.rank() == 0;
  if (c.slowdown) {
    SlowdownEvent e;
    e.worker = c.slowdown->worker;
    e.speed = c.slowdown->speed;
    e.from = done;
    const int64_t n = c.slowdown->iterations;
    e.to = n > 0 ? done + n : std::numeric_limits<int64_t>::max();
    emulator_.add_event(e);
    if (lead)
      log::info("console: worker {} at {:g}x speed from iteration {}{}", e.worker, e.speed, e.from,
                   n > 0 ? fmt::format(" for {} iterations", n) : std::string());
  }
  if (!c.pause) return false;
  // Rank 0 serves the console until resume() or stop(); the others wait for its
  // word with no deadline: a paused run may sit for hours.
  float word[2] = {0.0f, 0.0f};
  if (lead) {
    log::info("console: paused after iteration {} ({} completed)", done - 1, done);
    ConsoleRequests rq;
    console_->serve_paused(view(done - 1, plan, wall_s, test_accuracy, true), rq);
    word[0] = rq.stop ? 1.0f : 0.0f;
    word[1] = rq.checkpoint ? 1.0f : 0.0f;
    log::info("console: {}", rq.stop ? "stopping" : "resumed");
  }
  const double timeout = comm_.timeout_s();
  comm_.set_timeout_s(1e9);
  comm_.broadcast(word, sizeof word, "waiting for the console to resume the run");
  comm_.set_timeout_s(timeout);
  timeline.restart();  // a pause is not training time
  if (word[1] > 0.5f) {
    c.checkpoint = true;
    checkpoint_pending_ = true;  // written at this boundary, or at the end if the run stops here
  }
  if (word[0] > 0.5f) stopped_ = true;
  return word[0] > 0.5f;
}

void ConsoleLink::finished(const std::string& how) {
  if (console_) console_->finished(how);
}

}  // namespace tandem
