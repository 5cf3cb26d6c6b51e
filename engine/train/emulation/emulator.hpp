#pragma once
// The heterogeneity emulator makes a homogeneous machine behave like a cluster whose
// workers run at different, changing speeds: after a step's real compute, a worker
// sleeps until the time its emulated device would have needed.
//
// Every rank builds the same Emulator from the same EmulationConfig, and every answer
// is a pure function of (config, rank, iteration): any rank can compute any worker's
// emulated state, in any order, with no communication. That is why random slowdowns
// come from a counter-based hash of (seed, rank, iteration) instead of a generator
// that advances as the run goes.
//
// A worker's speed multiplies four factors:
//   static  the worker's `speed` (relative to the reference device), or its measured
//           profile, which gives step times in ms and so has no factor;
//   events  every scheduled SlowdownEvent active at the iteration (they stack);
//   random  the slowest random slowdown active at the iteration;
//   trace   the speed trace's multiplier for the worker at the iteration.
// Emulation only ever slows a step down: a target below the real time is clamped to
// the real time and reported, because sleeping cannot make a step faster.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/train/config.hpp"
#include "engine/train/emulation/speed_trace.hpp"

namespace tandem {

// How long one step's compute should take under emulation.
struct Stretch {
  double target_ms = 0.0;  // at least the real time
  bool clamped = false;    // the emulated device would have been faster than the real one
};

// A profile's step time at `local_batch`: linear between measured points, linear from
// the two nearest points beyond the ends, never below 0. A single point scales in
// proportion to the batch (time per sample is constant).
double profile_ms(const DeviceProfile& profile, double local_batch);
// The same for a local batch computed in `micro` micro-batches (sizes differing by
// at most one, as TrainStep splits it): the sum of their times, each paying the
// per-pass fixed cost that one pass of the whole batch pays once.
double profile_ms(const DeviceProfile& profile, int64_t local_batch, int64_t micro);
// The same for a machine calibration's host part (its host_ms, by batch); 0 for a
// calibration without one.
double host_profile_ms(const DeviceProfile& machine, double local_batch);

class Emulator {
public:
  // Validates the config against the world size and loads the speed trace. A config
  // with enabled = false is not validated and emulates nothing: speed 1, no stretch,
  // no communication delay.
  Emulator(const EmulationConfig& cfg, int world_size);

  bool enabled() const { return cfg_.enabled; }
  int world_size() const { return world_size_; }
  const EmulationConfig& config() const { return cfg_; }
  bool has_profile(int rank) const;
  // Schedules one more slowdown (the console's emulate{}); every rank adds the same.
  void add_event(const SlowdownEvent& e);

  // The worker's speed multiplier at `iteration`: static x events x random x trace.
  // For a profile worker the static factor is 1, since its profile already is its speed.
  double speed(int rank, int64_t iteration) const;
  // The part of speed() that changes over time: events x random x trace.
  double dynamic_speed(int rank, int64_t iteration) const;

  // The random slowdown that starts for `rank` at `iteration`, if one does (worker,
  // speed, [from, to)); the trainer can log it, tests check its ranges.
  std::optional<SlowdownEvent> random_slowdown_starting(int rank, int64_t iteration) const;

  // How long this step's compute should take, given that it really took `real_ms`.
  //   profile:    profile_ms(local_batch) / dynamic_speed  (the device's own time:
  //               neither `reference` nor the speed factor applies)
  //   otherwise:  real_ms / (reference x speed)
  // clamped to at least real_ms.
  // micro: the micro-batches the local batch was computed in (a device profile is
  // then read per micro-batch).
  Stretch stretch(int rank, int64_t iteration, int64_t local_batch, double real_ms, int64_t micro = 1) const;

  // Added to every collective the worker joins.
  double comm_delay_ms(int rank) const;

  // Each worker's samples per second at `iteration` when it runs local_batch[r]
  // samples: the times stretch() gives (clamp included) when this machine computes
  // a batch in profile_ms(machine, batch). What a plan proportional to the emulated
  // speeds divides by; a worker with no samples is rated at a batch of one.
  std::vector<double> throughput(const std::vector<int64_t>& local_batch, const DeviceProfile& machine,
                                 int64_t iteration = 0) const;

  // One line per worker, then the random slowdowns and the trace if any, for the log.
  std::string describe() const;

private:
  void check_rank(int rank) const;
  double random_speed(int rank, int64_t iteration) const;

  EmulationConfig cfg_;
  int world_size_;
  std::vector<WorkerEmulation> workers_;             // one per rank, defaults filled in
  std::vector<std::vector<SlowdownEvent>> events_;  // scheduled events, by worker
  SpeedTrace trace_;
};

// Sleeps until now_ms() (engine/core/clock.hpp) reaches `deadline_ms`, without
// spinning: emulated ranks share few cores, and a busy wait would steal them from the
// ranks still computing. Returns at once if the deadline has passed.
void sleep_until_ms(double deadline_ms);

}  // namespace tandem
