#pragma once
// Wall-clock timing for stats and progress: steady_clock, in milliseconds as double,
// because every per-worker number in tandem (compute_ms, comm_ms, idle_ms) is in ms.
#include <chrono>

namespace tandem {

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

class Stopwatch {
public:
  Stopwatch() : start_(now_ms()) {}
  void reset() { start_ = now_ms(); }
  double elapsed_ms() const { return now_ms() - start_; }

private:
  double start_;
};

}  // namespace tandem
