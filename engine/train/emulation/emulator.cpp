#include "engine/train/emulation/emulator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"

namespace tandem {

namespace {

// Uniform in [0, 1) with 53 bits: the probability of a slowdown may be far below the
// 2^-24 resolution of Rng::uniform() without becoming 0.
double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

bool positive(double x) { return std::isfinite(x) && x > 0.0; }

void validate_profile(const DeviceProfile& p, int rank) {
  const std::string hint =
      "give profile = { batch = {...}, ms = {...} } with one measured step time (ms > 0) per local batch, batches "
      "increasing";
  TANDEM_CHECK_HINT(!p.batch.empty() && p.batch.size() == p.ms.size(), hint, "worker r", rank, "'s profile has ",
                    p.batch.size(), " batches and ", p.ms.size(), " times");
  for (size_t i = 0; i < p.batch.size(); ++i) {
    TANDEM_CHECK_HINT(positive(p.batch[i]), hint, "worker r", rank, "'s profile has batch ", p.batch[i],
                      " at point ", i + 1);
    TANDEM_CHECK_HINT(positive(p.ms[i]), hint, "worker r", rank, "'s profile has ", p.ms[i], " ms at batch ",
                      p.batch[i]);
    if (i > 0)
      TANDEM_CHECK_HINT(p.batch[i] > p.batch[i - 1], hint, "worker r", rank, "'s profile batches are not increasing: ",
                        p.batch[i - 1], " then ", p.batch[i]);
  }
}

void validate_random(const RandomSlowdowns& r) {
  TANDEM_CHECK_HINT(r.probability >= 0.0 && r.probability <= 1.0,
                    "set random.probability in [0, 1]: the chance per worker and iteration that a slowdown starts",
                    "random slowdown probability ", r.probability);
  TANDEM_CHECK_HINT(r.min_duration >= 1 && r.min_duration <= r.max_duration,
                    "set 1 <= random.min_duration <= random.max_duration (iterations)", "random slowdown durations [",
                    r.min_duration, ", ", r.max_duration, "]");
  TANDEM_CHECK_HINT(positive(r.min_speed) && std::isfinite(r.max_speed) && r.min_speed <= r.max_speed,
                    "set 0 < random.min_speed <= random.max_speed (0.5 = half speed)", "random slowdown speeds [",
                    r.min_speed, ", ", r.max_speed, "]");
}

}  // namespace

namespace {

// y at local_batch, read off the polyline through (x, y) (see profile_ms).
double interpolate(const std::vector<double>& x, const std::vector<double>& y, double local_batch) {
  TANDEM_CHECK(!x.empty() && x.size() == y.size(), "profile with ", x.size(), " batches and ", y.size(), " times");
  if (x.size() == 1) return y[0] * local_batch / x[0];
  // The segment whose line gives the answer: the one holding local_batch, or the end
  // segment nearest to it when outside the measured range.
  size_t hi = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), local_batch) - x.begin());
  hi = std::clamp<size_t>(hi, 1, x.size() - 1);
  const size_t lo = hi - 1;
  const double ms = y[lo] + (y[hi] - y[lo]) * (local_batch - x[lo]) / (x[hi] - x[lo]);
  return std::max(ms, 0.0);
}

}  // namespace

double profile_ms(const DeviceProfile& p, double local_batch) { return interpolate(p.batch, p.ms, local_batch); }

double profile_ms(const DeviceProfile& p, int64_t local_batch, int64_t micro) {
  const int64_t parts = std::max<int64_t>(1, std::min(micro, local_batch));
  if (parts == 1) return profile_ms(p, static_cast<double>(local_batch));
  double ms = 0.0;
  for (int64_t k = 0; k < parts; ++k)
    ms += profile_ms(p, static_cast<double>(local_batch * (k + 1) / parts - local_batch * k / parts));
  return ms;
}

double host_profile_ms(const DeviceProfile& machine, double local_batch) {
  return machine.host_ms.empty() ? 0.0 : interpolate(machine.batch, machine.host_ms, local_batch);
}

Emulator::Emulator(const EmulationConfig& cfg, int world_size) : cfg_(cfg), world_size_(world_size) {
  TANDEM_CHECK(world_size >= 1, "emulator built for ", world_size, " workers");
  workers_.assign(static_cast<size_t>(world_size), WorkerEmulation{});
  events_.assign(static_cast<size_t>(world_size), {});
  if (!cfg.enabled) return;

  TANDEM_CHECK_HINT(cfg.reference >= 1e-3 && cfg.reference <= 1.0,
                    "set emulation.reference in [0.001, 1] (as scripts/tandem/experiment.lua does): the fraction of "
                    "one core the speed-1 device runs at",
                    "emulation reference ", cfg.reference);
  if (!cfg.workers.empty()) {
    if (static_cast<int>(cfg.workers.size()) != world_size)
      TANDEM_FAIL_HINT("give emulation.workers one entry per worker, or leave it out to run every worker at speed 1",
                       "emulation.workers lists ", cfg.workers.size(), " workers but the run has ", world_size,
                       " (workers = ", world_size, ")");
    workers_ = cfg.workers;
  }
  for (int r = 0; r < world_size; ++r) {
    const WorkerEmulation& w = workers_[static_cast<size_t>(r)];
    if (w.profile) {
      TANDEM_CHECK_HINT(w.speed == 1.0, "a profile replaces the speed factor: remove one of speed and profile",
                        "worker r", r, " has both a profile and speed ", w.speed);
      validate_profile(*w.profile, r);
    } else {
      TANDEM_CHECK_HINT(positive(w.speed), "set speed > 0: 1 is the reference device, 0.5 half as fast",
                        "worker r", r, " has speed ", w.speed);
    }
    TANDEM_CHECK_HINT(std::isfinite(w.comm_delay_ms) && w.comm_delay_ms >= 0.0, "set comm_delay_ms >= 0",
                      "worker r", r, " has communication delay ", w.comm_delay_ms, " ms");
  }

  for (size_t i = 0; i < cfg.events.size(); ++i) {
    const SlowdownEvent& e = cfg.events[i];
    TANDEM_CHECK_HINT(e.worker >= 0 && e.worker < world_size,
                      "name a worker from 0 to " + std::to_string(world_size - 1) + " (ranks count from 0)",
                      "emulation event ", i + 1, " is for worker ", e.worker, " but the run has ", world_size,
                      " workers");
    TANDEM_CHECK_HINT(e.from >= 0 && e.from < e.to, "give 0 <= from < to (iterations; to is exclusive)",
                      "emulation event ", i + 1, " (worker r", e.worker, ") covers [", e.from, ", ", e.to, ")");
    TANDEM_CHECK_HINT(positive(e.speed), "set the event's speed > 0 (0.5 = half speed while it lasts)",
                      "emulation event ", i + 1, " (worker r", e.worker, ") has speed ", e.speed);
    events_[static_cast<size_t>(e.worker)].push_back(e);
  }
  validate_random(cfg.random);
  if (!cfg.speed_trace.empty()) trace_ = SpeedTrace::load(cfg.speed_trace, world_size);
}

void Emulator::check_rank(int rank) const {
  TANDEM_CHECK(rank >= 0 && rank < world_size_, "rank ", rank, " is outside the ", world_size_,
               " emulated workers");
}

bool Emulator::has_profile(int rank) const {
  check_rank(rank);
  return cfg_.enabled && workers_[static_cast<size_t>(rank)].profile.has_value();
}

std::optional<SlowdownEvent> Emulator::random_slowdown_starting(int rank, int64_t iteration) const {
  check_rank(rank);
  TANDEM_CHECK(iteration >= 0, "negative iteration ", iteration);
  const RandomSlowdowns& r = cfg_.random;
  if (!cfg_.enabled || r.probability <= 0.0) return std::nullopt;
  // One short stream per (seed, worker, iteration): whether a slowdown starts, then
  // its length, then its speed. Nothing carries over between iterations.
  Rng rng(mix_seed(mix_seed(r.seed, static_cast<uint64_t>(rank)), static_cast<uint64_t>(iteration)));
  if (!(unit(rng.next_u64()) < r.probability)) return std::nullopt;
  const int64_t span = r.max_duration - r.min_duration + 1;
  const int64_t duration = r.min_duration + static_cast<int64_t>(rng.below(static_cast<uint64_t>(span)));
  SlowdownEvent e;
  e.worker = rank;
  e.from = iteration;
  e.to = iteration + duration;
  e.speed = r.min_speed + (r.max_speed - r.min_speed) * unit(rng.next_u64());
  return e;
}

// Overlapping slowdowns do not compound: the worker runs at the slowest one, as a
// machine hit by two contending jobs is limited by the worse of them. Only starts in
// the last max_duration iterations can still be active.
double Emulator::random_speed(int rank, int64_t iteration) const {
  const RandomSlowdowns& r = cfg_.random;
  if (r.probability <= 0.0) return 1.0;
  double slowest = 1.0;
  bool any = false;
  for (int64_t s = std::max<int64_t>(0, iteration - r.max_duration + 1); s <= iteration; ++s) {
    const auto e = random_slowdown_starting(rank, s);
    if (e && iteration < e->to) {
      slowest = any ? std::min(slowest, e->speed) : e->speed;
      any = true;
    }
  }
  return slowest;
}

double Emulator::dynamic_speed(int rank, int64_t iteration) const {
  check_rank(rank);
  TANDEM_CHECK(iteration >= 0, "negative iteration ", iteration);
  if (!cfg_.enabled) return 1.0;
  double s = 1.0;
  for (const SlowdownEvent& e : events_[static_cast<size_t>(rank)])
    if (iteration >= e.from && iteration < e.to) s *= e.speed;
  return s * random_speed(rank, iteration) * trace_.multiplier(rank, iteration);
}

double Emulator::speed(int rank, int64_t iteration) const {
  const double dynamic = dynamic_speed(rank, iteration);
  if (!cfg_.enabled) return 1.0;
  const WorkerEmulation& w = workers_[static_cast<size_t>(rank)];
  return (w.profile ? 1.0 : w.speed) * dynamic;
}

Stretch Emulator::stretch(int rank, int64_t iteration, int64_t local_batch, double real_ms, int64_t micro) const {
  check_rank(rank);
  TANDEM_CHECK(local_batch >= 0, "negative local batch ", local_batch, " for worker r", rank);
  TANDEM_CHECK(std::isfinite(real_ms) && real_ms >= 0.0, "real compute time ", real_ms, " ms for worker r", rank);
  if (!cfg_.enabled) return {real_ms, false};
  const WorkerEmulation& w = workers_[static_cast<size_t>(rank)];
  const double target = w.profile
                            ? profile_ms(*w.profile, local_batch, micro) / dynamic_speed(rank, iteration)
                            : real_ms / (cfg_.reference * speed(rank, iteration));
  if (target < real_ms) return {real_ms, true};
  return {target, false};
}

double Emulator::comm_delay_ms(int rank) const {
  check_rank(rank);
  return cfg_.enabled ? workers_[static_cast<size_t>(rank)].comm_delay_ms : 0.0;
}

std::vector<double> Emulator::throughput(const std::vector<int64_t>& local_batch, const DeviceProfile& machine,
                                         int64_t iteration) const {
  TANDEM_CHECK(static_cast<int>(local_batch.size()) == world_size_, "throughput of ", local_batch.size(),
               " local batches for ", world_size_, " workers");
  std::vector<double> out(local_batch.size());
  for (int r = 0; r < world_size_; ++r) {
    const int64_t b = std::max<int64_t>(local_batch[static_cast<size_t>(r)], 1);
    const double target = stretch(r, iteration, b, profile_ms(machine, static_cast<double>(b))).target_ms;
    out[static_cast<size_t>(r)] = static_cast<double>(b) / target * 1000.0;
  }
  return out;
}

std::string Emulator::describe() const {
  std::ostringstream os;
  if (!cfg_.enabled) return "emulation off: every worker runs at the machine's speed";
  os << "emulation: " << world_size_ << " workers, the reference (speed 1) device runs at " << cfg_.reference
     << " of one core";
  for (int r = 0; r < world_size_; ++r) {
    const WorkerEmulation& w = workers_[static_cast<size_t>(r)];
    os << "\n  r" << r << ": ";
    if (w.profile) {
      const DeviceProfile& p = *w.profile;
      os << "profile";
      const size_t shown = std::min<size_t>(p.batch.size(), 4);
      for (size_t i = 0; i < shown; ++i) os << (i ? ", " : " ") << "batch " << p.batch[i] << " in " << p.ms[i] << " ms";
      if (p.batch.size() > shown) os << ", ... (" << p.batch.size() << " points)";
    } else {
      os << "speed " << w.speed << " (compute x" << 1.0 / (cfg_.reference * w.speed) << ")";
    }
    if (w.comm_delay_ms > 0.0) os << ", comm +" << w.comm_delay_ms << " ms";
    const auto& events = events_[static_cast<size_t>(r)];
    for (size_t i = 0; i < events.size(); ++i)
      os << (i ? ", " : "; events: ") << "x" << events[i].speed << " at [" << events[i].from << "," << events[i].to
         << ")";
  }
  const RandomSlowdowns& rs = cfg_.random;
  if (rs.probability > 0.0)
    os << "\n  random slowdowns: p " << rs.probability << " per worker and iteration, " << rs.min_duration << "-"
       << rs.max_duration << " iterations at x" << rs.min_speed << "-" << rs.max_speed << ", seed " << rs.seed;
  if (!trace_.empty())
    os << "\n  speed trace: " << trace_.source() << " (" << trace_.iterations()
       << " iterations; its last line holds after)";
  return os.str();
}

void sleep_until_ms(double deadline_ms) {
  const double now = now_ms();
  // A day-long step is a config mistake (a speed near 0), not an emulated device.
  TANDEM_CHECK_HINT(std::isfinite(deadline_ms) && deadline_ms - now < 86400e3,
                    "check the emulated speeds: one near 0 stretches a step without bound", "asked to sleep ",
                    deadline_ms - now, " ms");
  if (deadline_ms <= now) return;
  using namespace std::chrono;
  // now_ms() counts steady_clock's epoch in ms, so the deadline maps back exactly.
  const auto deadline =
      steady_clock::time_point(duration_cast<steady_clock::duration>(duration<double, std::milli>(deadline_ms)));
  std::this_thread::sleep_until(deadline);
}

}  // namespace tandem

namespace tandem {

void Emulator::add_event(const SlowdownEvent& e) {
  TANDEM_CHECK(e.worker >= 0 && e.worker < world_size_, "emulated event for worker ", e.worker, " of ", world_size_);
  TANDEM_CHECK(e.speed > 0 && std::isfinite(e.speed), "emulated event speed ", e.speed, " must be > 0");
  events_[static_cast<size_t>(e.worker)].push_back(e);
}

}  // namespace tandem
