#include "engine/train/sync/gradient_buckets.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"

namespace tandem {

namespace {
// The communication thread's polls: short at first (a bucket on a fast link is done
// in microseconds), then longer, so a long sum costs the compute little CPU.
constexpr int kFirstSleepUs = 20, kMaxSleepUs = 1000;
constexpr const char* kWhat = "a gradient bucket's all-reduce";
}  // namespace

GradientBuckets::GradientBuckets(std::unique_ptr<AsyncAllreduce> sums, Device& dev, float* buffer, size_t control,
                                 std::vector<Bucket> buckets, double timeout_s)
    : sums_(std::move(sums)), dev_(dev), buffer_(buffer), control_(control), buckets_(std::move(buckets)),
      timeout_s_(timeout_s), spans_(buckets_.size()) {
  TANDEM_CHECK(sums_ && !buckets_.empty() && buckets_.back().begin == 0,
               "gradient buckets without sums or without a last bucket at 0 (a bug in tandem)");
  thread_ = std::thread([this] { run(); });
}

GradientBuckets::~GradientBuckets() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
  // A step that failed (a deadline passed, a rank died) may leave sums in flight,
  // which MPI can still complete into their buffers while the job aborts: those stay
  // allocated (GradientSync keeps the gradients' buffer too), never freed under them.
  if (completed_ < handed_) static_cast<void>(sums_.release());
}

void GradientBuckets::begin() {
  std::lock_guard<std::mutex> lock(mu_);
  TANDEM_CHECK(completed_ == handed_, "a step began with ", handed_ - completed_,
               " gradient bucket(s) still summing (a bug in tandem)");
  handed_ = started_ = completed_ = 0;
  handed_sq_ = 0.0;
  begun_ = true;
}

size_t GradientBuckets::unhanded() const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t at = handed_ == 0 ? buckets_.front().end : buckets_[handed_ - 1].begin;
  return at > control_ ? at - control_ : 0;
}

void GradientBuckets::hand_from(size_t offset, bool measure) {
  size_t upto;
  {
    std::lock_guard<std::mutex> lock(mu_);
    upto = handed_;
  }
  // Every bucket but the last that lies within the final gradients, each one's norm
  // taken before it leaves this thread.
  while (upto + 1 < buckets_.size() && buckets_[upto].begin >= control_ + offset) {
    const Bucket& b = buckets_[upto];
    if (measure) handed_sq_ += dev_.sum_squares(buffer_ + b.begin, b.end - b.begin);
    ++upto;
  }
  hand(upto);
}

bool GradientBuckets::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ < handed_;
}

void GradientBuckets::hand_rest() {
  // A sum without a backward pass that told (no begin() since the last finish()):
  // every bucket goes now, none is left out as already summed.
  if (!begun_) begin();
  hand(buckets_.size());
}

void GradientBuckets::hand(size_t upto) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (upto <= handed_) return;
    handed_ = upto;
  }
  work_.notify_all();
}

void GradientBuckets::finish(const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  const bool done = done_.wait_until(lock, deadline, [&] {
    return !error_.empty() || (handed_ == buckets_.size() && completed_ == handed_);
  });
  begun_ = false;
  if (!error_.empty()) TANDEM_FAIL(what, ": ", error_);
  if (!done)
    TANDEM_FAIL_HINT("see which rank died or stopped in its log (every rank's last lines), or raise "
                     "collective_timeout_s if the link is that slow",
                     what, ": gradient bucket ", completed_ + 1, " of ", buckets_.size(), " was not summed within ",
                     timeout_s_, " s (collective_timeout_s) after every rank had arrived");
}

std::vector<GradientBuckets::Span> GradientBuckets::spans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spans_;
}

void GradientBuckets::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || started_ < handed_; });
    if (stop_) return;
    try {
      int sleep_us = kFirstSleepUs;
      // Starts what is handed, moves the started sums on, until all of them are done.
      while (!stop_ && completed_ < handed_) {
        const size_t first = started_, last = handed_;
        lock.unlock();
        for (size_t i = first; i < last; ++i) {
          const double t = now_ms();
          // The control (the last bucket's first floats) goes exact whatever the wire.
          const size_t exact = buckets_[i].begin == 0 ? control_ : 0;
          sums_->start(buffer_ + buckets_[i].begin, buckets_[i].end - buckets_[i].begin, exact, kWhat);
          spans_[i].start_ms = t;  // only this thread writes spans_ while the step runs
        }
        const size_t pending = sums_->pending(kWhat);
        const double t = now_ms();
        lock.lock();
        started_ = last;
        const size_t complete = started_ - pending;
        for (size_t i = completed_; i < complete; ++i) spans_[i].end_ms = t;
        if (complete > completed_) {
          completed_ = complete;
          sleep_us = kFirstSleepUs;
          done_.notify_all();
          continue;
        }
        // Nothing new: sleep a little, or until more is handed over.
        work_.wait_for(lock, std::chrono::microseconds(sleep_us), [&] { return stop_ || started_ < handed_; });
        sleep_us = std::min(sleep_us * 2, kMaxSleepUs);
      }
    } catch (const std::exception& e) {
      if (!lock.owns_lock()) lock.lock();
      error_ = e.what();
      done_.notify_all();
      return;
    }
  }
}

}  // namespace tandem
