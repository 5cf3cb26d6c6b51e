#include "engine/train/emulation/faults.hpp"

#include "engine/core/log.hpp"

#include <chrono>
#include <csignal>
#include <thread>

namespace tandem {

FaultInjector::FaultInjector(const std::vector<FaultConfig>& faults, int rank) : rank_(rank) {
  for (const FaultConfig& f : faults)
    if (f.rank == rank) mine_.push_back(f);
}

void FaultInjector::at(int64_t iteration, const char* during) const {
  for (const FaultConfig& f : mine_) {
    if (f.iteration != iteration || f.during != during || f.kind == "nan") continue;
    log::critical("fault injection: rank {} {} itself during {} at iteration {}", rank_,
                     f.kind == "kill" ? "kills (SIGKILL)" : "stops (SIGSTOP)", during, iteration);
    log::flush();
    // In the all-reduce: the others are already waiting in it.
    if (f.during == std::string("allreduce")) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::raise(f.kind == "kill" ? SIGKILL : SIGSTOP);
  }
}

bool FaultInjector::nan_at(int64_t iteration) const {
  for (const FaultConfig& f : mine_)
    if (f.kind == "nan" && f.iteration == iteration) return true;
  return false;
}

}  // namespace tandem
