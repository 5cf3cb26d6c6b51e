// The heterogeneity emulator: speed factors and the reference stretch, device
// profiles, scheduled events, deterministic random slowdowns, speed traces, the
// clamp at real speed, throughput estimates for a proportional plan, and the
// config checks.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/core/rng.hpp"
#include "engine/train/emulation/emulator.hpp"
#include "engine/train/emulation/speed_trace.hpp"
#include "tests/unit/test_support.hpp"

BOOST_AUTO_TEST_SUITE(test_emulator)  // ctest's unit.test_emulator (tests/CMakeLists.txt)

using namespace tandem;
using namespace tandem::testing;
namespace tt = boost::test_tools;

namespace {

EmulationConfig with_speeds(const std::vector<double>& speeds, double reference = 1.0) {
  EmulationConfig cfg;
  cfg.enabled = true;
  cfg.reference = reference;
  for (double s : speeds) {
    WorkerEmulation w;
    w.speed = s;
    cfg.workers.push_back(w);
  }
  return cfg;
}

DeviceProfile profile(std::vector<double> batch, std::vector<double> ms) {
  DeviceProfile p;
  p.batch = std::move(batch);
  p.ms = std::move(ms);
  return p;
}

SlowdownEvent event(int worker, double speed, int64_t from, int64_t to) {
  SlowdownEvent e;
  e.worker = worker;
  e.speed = speed;
  e.from = from;
  e.to = to;
  return e;
}

EmulationConfig with_random(double p, int64_t min_d, int64_t max_d, double min_s, double max_s, uint64_t seed = 3) {
  EmulationConfig cfg;
  cfg.enabled = true;
  cfg.random.probability = p;
  cfg.random.min_duration = min_d;
  cfg.random.max_duration = max_d;
  cfg.random.min_speed = min_s;
  cfg.random.max_speed = max_s;
  cfg.random.seed = seed;
  return cfg;
}

SpeedTrace parse_trace(const std::string& text, int workers) {
  std::istringstream in(text);
  return SpeedTrace::parse(in, "trace.csv", workers);
}

}  // namespace

BOOST_AUTO_TEST_CASE(speed_factors_and_reference_stretch_compute) {
  Emulator emu(with_speeds({1.0, 0.5, 0.25}, 0.5), 3);
  BOOST_TEST(emu.enabled());
  BOOST_TEST(emu.speed(0, 0) == 1.0);
  BOOST_TEST(emu.speed(1, 17) == 0.5);
  BOOST_TEST(emu.speed(2, 1000) == 0.25);
  // 10 ms of real compute on the reference device (half a core) takes 20 ms; half
  // as fast, 40 ms; a quarter, 80 ms. The local batch does not matter without a profile.
  for (int64_t batch : {1, 32, 500}) {
    BOOST_TEST(emu.stretch(0, 5, batch, 10.0).target_ms == 20.0, tt::tolerance(1e-12));
    BOOST_TEST(emu.stretch(1, 5, batch, 10.0).target_ms == 40.0, tt::tolerance(1e-12));
    BOOST_TEST(emu.stretch(2, 5, batch, 10.0).target_ms == 80.0, tt::tolerance(1e-12));
    BOOST_TEST(!emu.stretch(2, 5, batch, 10.0).clamped);
  }
  BOOST_TEST(emu.comm_delay_ms(1) == 0.0);
}

// With no workers listed every rank runs at speed 1; only the reference stretches.
BOOST_AUTO_TEST_CASE(no_worker_list_means_speed_one_everywhere) {
  EmulationConfig cfg;
  cfg.enabled = true;
  cfg.reference = 0.25;
  Emulator emu(cfg, 4);
  for (int r = 0; r < 4; ++r) {
    BOOST_TEST(emu.speed(r, 3) == 1.0);
    BOOST_TEST(emu.stretch(r, 3, 8, 5.0).target_ms == 20.0, tt::tolerance(1e-12));
    BOOST_TEST(!emu.has_profile(r));
  }
}

// A disabled config is neither checked nor applied: the trainer can always call it.
BOOST_AUTO_TEST_CASE(disabled_emulation_is_the_identity) {
  EmulationConfig cfg = with_speeds({0.1, -3.0}, 0.5);  // invalid, but off
  cfg.enabled = false;
  cfg.speed_trace = "/nonexistent/trace.csv";
  Emulator emu(cfg, 5);
  BOOST_TEST(!emu.enabled());
  for (int r = 0; r < 5; ++r) {
    BOOST_TEST(emu.speed(r, 9) == 1.0);
    BOOST_TEST(emu.comm_delay_ms(r) == 0.0);
    const Stretch s = emu.stretch(r, 9, 16, 7.5);
    BOOST_TEST(s.target_ms == 7.5);
    BOOST_TEST(!s.clamped);
  }
  const DeviceProfile half_ms_per_sample = profile({1}, {0.5});
  const std::vector<double> tp = emu.throughput({20, 20, 20, 20, 20}, half_ms_per_sample);
  BOOST_TEST(tp.size() == 5u);
  for (double x : tp) BOOST_TEST(x == 2000.0, tt::tolerance(1e-12));
  CHECK_CONTAINS(emu.describe(), "emulation off");
}

BOOST_AUTO_TEST_CASE(profile_interpolates_and_extrapolates) {
  const DeviceProfile p = profile({16, 32, 64}, {10, 18, 40});
  BOOST_TEST(profile_ms(p, 16) == 10.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(p, 24) == 14.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(p, 32) == 18.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(p, 48) == 29.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(p, 64) == 40.0, tt::tolerance(1e-12));
  // Beyond the ends: the line through the two nearest points.
  BOOST_TEST(profile_ms(p, 128) == 84.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(p, 8) == 6.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(p, 0) == 2.0, tt::tolerance(1e-12));
  // A steep start would go negative below the first point: clamped at 0.
  const DeviceProfile steep = profile({10, 20}, {1, 21});
  BOOST_TEST(profile_ms(steep, 5) == 0.0);
  BOOST_TEST(profile_ms(steep, 0) == 0.0);
  // One point: constant time per sample.
  const DeviceProfile one = profile({32}, {16});
  BOOST_TEST(profile_ms(one, 32) == 16.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(one, 64) == 32.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(one, 8) == 4.0, tt::tolerance(1e-12));
  BOOST_TEST(profile_ms(one, 0) == 0.0);
}

// A profile is the device's own time: the reference does not stretch it, scheduled
// events do, and it is still clamped at the real time.
BOOST_AUTO_TEST_CASE(profile_workers_ignore_reference_but_not_events) {
  EmulationConfig cfg = with_speeds({1.0, 1.0}, 0.5);
  cfg.workers[1].profile = profile({16, 32, 64}, {10, 18, 40});
  cfg.events.push_back(event(1, 0.5, 100, 200));
  Emulator emu(cfg, 2);
  BOOST_TEST(emu.has_profile(1));
  BOOST_TEST(!emu.has_profile(0));
  BOOST_TEST(emu.stretch(1, 0, 32, 2.0).target_ms == 18.0, tt::tolerance(1e-12));
  BOOST_TEST(emu.stretch(1, 0, 48, 2.0).target_ms == 29.0, tt::tolerance(1e-12));
  BOOST_TEST(emu.stretch(1, 150, 32, 2.0).target_ms == 36.0, tt::tolerance(1e-12));
  BOOST_TEST(emu.speed(1, 150) == 0.5);  // a profile worker's speed is its dynamic part
  const Stretch fast = emu.stretch(1, 0, 32, 25.0);
  BOOST_TEST(fast.target_ms == 25.0);
  BOOST_TEST(fast.clamped);
}

BOOST_AUTO_TEST_CASE(events_start_inclusive_end_exclusive_and_stack) {
  EmulationConfig cfg = with_speeds({1.0, 0.8, 1.0});
  cfg.events = {event(1, 0.5, 10, 20), event(1, 0.5, 15, 30), event(2, 0.25, 0, 1)};
  Emulator emu(cfg, 3);
  BOOST_TEST(emu.speed(1, 9) == 0.8, tt::tolerance(1e-12));
  BOOST_TEST(emu.speed(1, 10) == 0.4, tt::tolerance(1e-12));   // from is inclusive
  BOOST_TEST(emu.speed(1, 14) == 0.4, tt::tolerance(1e-12));
  BOOST_TEST(emu.speed(1, 15) == 0.2, tt::tolerance(1e-12));   // both: they multiply
  BOOST_TEST(emu.speed(1, 19) == 0.2, tt::tolerance(1e-12));
  BOOST_TEST(emu.speed(1, 20) == 0.4, tt::tolerance(1e-12));   // to is exclusive
  BOOST_TEST(emu.speed(1, 29) == 0.4, tt::tolerance(1e-12));
  BOOST_TEST(emu.speed(1, 30) == 0.8, tt::tolerance(1e-12));
  BOOST_TEST(emu.dynamic_speed(1, 17) == 0.25, tt::tolerance(1e-12));
  BOOST_TEST(emu.speed(2, 0) == 0.25);
  BOOST_TEST(emu.speed(2, 1) == 1.0);
  BOOST_TEST(emu.speed(0, 15) == 1.0);  // other workers are untouched
  BOOST_TEST(emu.stretch(1, 17, 8, 10.0).target_ms == 50.0, tt::tolerance(1e-12));
}

// Every answer is a function of (config, rank, iteration): two ranks building the
// emulator separately, asking in different orders, agree.
BOOST_AUTO_TEST_CASE(random_slowdowns_are_deterministic_and_order_free) {
  const EmulationConfig cfg = with_random(0.05, 2, 12, 0.2, 0.7, 42);
  Emulator a(cfg, 4), b(cfg, 4);
  const int64_t n = 2000;
  std::vector<double> forward, backward(static_cast<size_t>(4 * n));
  for (int r = 0; r < 4; ++r)
    for (int64_t t = 0; t < n; ++t) forward.push_back(a.speed(r, t));
  for (int64_t t = n - 1; t >= 0; --t)
    for (int r = 3; r >= 0; --r) backward[static_cast<size_t>(r * n + t)] = b.speed(r, t);
  BOOST_TEST(forward == backward, tt::per_element());
  // Some workers are slowed at some times, and not all at the same times.
  BOOST_TEST(std::count_if(forward.begin(), forward.end(), [](double s) { return s < 1.0; }) > 0);
  bool differ = false;
  for (int64_t t = 0; t < n; ++t) differ |= forward[static_cast<size_t>(t)] != forward[static_cast<size_t>(n + t)];
  BOOST_TEST(differ);
  // Another seed gives another pattern.
  Emulator c(with_random(0.05, 2, 12, 0.2, 0.7, 43), 4);
  bool other = false;
  for (int64_t t = 0; t < n; ++t) other |= c.speed(0, t) != forward[static_cast<size_t>(t)];
  BOOST_TEST(other);
}

BOOST_AUTO_TEST_CASE(random_slowdowns_start_about_as_often_as_asked) {
  Emulator emu(with_random(0.05, 1, 1, 0.5, 0.5), 4);
  const int64_t n = 20000;
  int64_t starts = 0, slow = 0;
  for (int r = 0; r < 4; ++r)
    for (int64_t t = 0; t < n; ++t) {
      starts += emu.random_slowdown_starting(r, t).has_value();
      slow += emu.speed(r, t) < 1.0;
    }
  const double freq = static_cast<double>(starts) / (4 * n);
  BOOST_TEST(freq > 0.04);  // expected 0.05, standard deviation about 0.0008
  BOOST_TEST(freq < 0.06);
  BOOST_TEST(slow == starts);  // one-iteration slowdowns never overlap
  // Probability 0 never slows; probability 1 always does.
  Emulator never(with_random(0.0, 1, 5, 0.5, 0.5), 2);
  Emulator always(with_random(1.0, 1, 5, 0.5, 0.5), 2);
  for (int64_t t = 0; t < 500; ++t) {
    BOOST_TEST_REQUIRE(never.speed(1, t) == 1.0);
    BOOST_TEST_REQUIRE(always.speed(1, t) == 0.5);
  }
}

// Durations and speeds stay in their ranges, and the speed at t is the slowest of the
// slowdowns active at t, computed here by brute force over every start.
BOOST_AUTO_TEST_CASE(random_slowdowns_respect_ranges_and_take_the_slowest) {
  Emulator emu(with_random(0.08, 3, 9, 0.2, 0.6, 11), 3);
  const int64_t n = 3000;
  for (int r = 0; r < 3; ++r) {
    std::vector<SlowdownEvent> all;
    for (int64_t s = 0; s < n; ++s)
      if (auto e = emu.random_slowdown_starting(r, s)) {
        BOOST_TEST_REQUIRE(e->worker == r);
        BOOST_TEST_REQUIRE(e->from == s);
        BOOST_TEST_REQUIRE((e->to - e->from >= 3 && e->to - e->from <= 9));
        BOOST_TEST_REQUIRE((e->speed >= 0.2 && e->speed <= 0.6));
        all.push_back(*e);
      }
    BOOST_TEST(all.size() > 100u);
    const auto shortest = std::min_element(all.begin(), all.end(), [](auto& x, auto& y) {
      return x.to - x.from < y.to - y.from;
    });
    const auto longest = std::max_element(all.begin(), all.end(), [](auto& x, auto& y) {
      return x.to - x.from < y.to - y.from;
    });
    BOOST_TEST(shortest->to - shortest->from == 3);  // both ends of the range occur
    BOOST_TEST(longest->to - longest->from == 9);
    int64_t overlapped = 0;
    for (int64_t t = 0; t < n; ++t) {
      double expected = 1.0;
      int active = 0;
      for (const auto& e : all)
        if (t >= e.from && t < e.to) {
          expected = active ? std::min(expected, e.speed) : e.speed;
          ++active;
        }
      overlapped += active > 1;
      BOOST_TEST_REQUIRE(emu.speed(r, t) == expected);
    }
    BOOST_TEST(overlapped > 0);  // the min rule was exercised
  }
}

BOOST_AUTO_TEST_CASE(speed_trace_parses_commas_whitespace_and_comments) {
  const SpeedTrace t = parse_trace(
      "# recorded on the lab cluster\n"
      "\n"
      "1, 0.5 ,0.25\n"
      "1\t0.5   0.2   # r2 got slower\r\n"
      "   # indented comment\n"
      "0.9 1 1\n",
      3);
  BOOST_TEST(t.iterations() == 3);
  BOOST_TEST(t.workers() == 3);
  BOOST_TEST(t.multiplier(0, 0) == 1.0);
  BOOST_TEST(t.multiplier(1, 0) == 0.5);
  BOOST_TEST(t.multiplier(2, 0) == 0.25);
  BOOST_TEST(t.multiplier(2, 1) == 0.2);
  BOOST_TEST(t.multiplier(0, 2) == 0.9);
  // After the last line the last line holds.
  BOOST_TEST(t.multiplier(0, 3) == 0.9);
  BOOST_TEST(t.multiplier(0, 1000000) == 0.9);
  BOOST_TEST(t.multiplier(2, 99) == 1.0);
  BOOST_TEST(SpeedTrace().multiplier(5, 7) == 1.0);  // no trace
  BOOST_TEST(SpeedTrace().empty());
}

BOOST_AUTO_TEST_CASE(speed_trace_errors_name_the_file_and_line) {
  std::string msg = error_of([] { parse_trace("# header\n1 1 1\n1 0.5\n", 3); });
  CHECK_CONTAINS(msg, "trace.csv:3");
  CHECK_CONTAINS(msg, "expected 3 speeds");
  CHECK_CONTAINS(msg, "found 2");
  CHECK_CONTAINS(msg, "what to do");
  msg = error_of([] { parse_trace("1,1\n1,0\n", 2); });
  CHECK_CONTAINS(msg, "trace.csv:2");
  CHECK_CONTAINS(msg, "worker r1");
  CHECK_CONTAINS(msg, "positive");
  msg = error_of([] { parse_trace("1 -0.5\n", 2); });
  CHECK_CONTAINS(msg, "trace.csv:1");
  msg = error_of([] { parse_trace("r0,r1\n1,1\n", 2); });
  CHECK_CONTAINS(msg, "trace.csv:1");
  CHECK_CONTAINS(msg, "not a number");
  CHECK_CONTAINS(msg, "header");
  msg = error_of([] { parse_trace("1,,1\n", 3); });
  CHECK_CONTAINS(msg, "empty");
  msg = error_of([] { parse_trace("1,1,\n", 3); });
  CHECK_CONTAINS(msg, "trace.csv:1");
  msg = error_of([] { parse_trace("1 nan\n", 2); });
  CHECK_CONTAINS(msg, "positive");
  msg = error_of([] { parse_trace("# nothing\n\n", 2); });
  CHECK_CONTAINS(msg, "holds no speeds");
  msg = error_of([] { SpeedTrace::load("/nonexistent/speeds.csv", 2); });
  CHECK_CONTAINS(msg, "/nonexistent/speeds.csv");
  CHECK_CONTAINS(msg, "cannot open");
}

// Through the emulator: the trace multiplies the static speed, from the file.
BOOST_AUTO_TEST_CASE(speed_trace_replays_through_the_emulator) {
  TempDir dir("emulator-trace");
  EmulationConfig cfg = with_speeds({1.0, 0.5});
  cfg.speed_trace = dir.write("speeds.txt", "1 1\n0.5 1\n1 0.5\n");
  Emulator emu(cfg, 2);
  BOOST_TEST(emu.speed(0, 0) == 1.0);
  BOOST_TEST(emu.speed(1, 0) == 0.5);
  BOOST_TEST(emu.speed(0, 1) == 0.5);
  BOOST_TEST(emu.speed(1, 2) == 0.25);
  BOOST_TEST(emu.speed(1, 50) == 0.25);  // the last line holds
  BOOST_TEST(emu.speed(0, 50) == 1.0);
  CHECK_CONTAINS(emu.describe(), "speeds.txt");
  // The column count must match the world size; the error names the file and line.
  cfg.speed_trace = dir.write("wide.csv", "1,1\n1,1,1\n");
  const std::string msg = error_of([&] { Emulator(cfg, 2); });
  CHECK_CONTAINS(msg, "wide.csv:2");
  cfg.speed_trace = dir.file("missing.csv");
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 2); }), "missing.csv");
}

// Sleeping cannot make a step faster: a target below the real time is the real time,
// and the caller learns it so it can warn.
BOOST_AUTO_TEST_CASE(targets_faster_than_real_are_clamped) {
  Emulator emu(with_speeds({2.0, 1.0}, 1.0), 2);
  const Stretch fast = emu.stretch(0, 0, 32, 10.0);
  BOOST_TEST(fast.target_ms == 10.0);
  BOOST_TEST(fast.clamped);
  const Stretch same = emu.stretch(1, 0, 32, 10.0);
  BOOST_TEST(same.target_ms == 10.0);
  BOOST_TEST(!same.clamped);
  // The same worker slowed down by an event is no longer clamped.
  EmulationConfig cfg = with_speeds({2.0, 1.0}, 1.0);
  cfg.events.push_back(event(0, 0.25, 5, 6));
  const Stretch slowed = Emulator(cfg, 2).stretch(0, 5, 32, 10.0);
  BOOST_TEST(slowed.target_ms == 20.0, tt::tolerance(1e-12));
  BOOST_TEST(!slowed.clamped);
}

BOOST_AUTO_TEST_CASE(comm_delay_is_per_worker) {
  EmulationConfig cfg = with_speeds({1.0, 0.5, 1.0});
  cfg.workers[1].comm_delay_ms = 5.0;
  Emulator emu(cfg, 3);
  BOOST_TEST(emu.comm_delay_ms(0) == 0.0);
  BOOST_TEST(emu.comm_delay_ms(1) == 5.0);
  CHECK_CONTAINS(emu.describe(), "r1: speed 0.5");
  CHECK_CONTAINS(emu.describe(), "comm +5 ms");
}

// Samples per second under the stretch: proportional to reference x speed for speed
// workers (capped at real speed), from the worker's profile at its batch otherwise.
BOOST_AUTO_TEST_CASE(throughput_follows_the_emulated_speeds) {
  EmulationConfig cfg = with_speeds({1.0, 0.5, 4.0, 1.0}, 0.5);
  cfg.workers[3].profile = profile({16, 32}, {40, 80});  // 2.5 ms per sample
  Emulator emu(cfg, 4);
  const DeviceProfile machine = profile({1}, {0.5});  // this machine: 0.5 ms per sample
  const std::vector<int64_t> batches{32, 32, 32, 32};  // 16 ms real each
  const std::vector<double> tp = emu.throughput(batches, machine);
  BOOST_TEST_REQUIRE(tp.size() == 4u);
  BOOST_TEST(tp[0] == 1000.0, tt::tolerance(1e-12));  // 32 samples in 32 ms
  BOOST_TEST(tp[1] == 500.0, tt::tolerance(1e-12));
  BOOST_TEST(tp[2] == 2000.0, tt::tolerance(1e-12));  // x2 would be faster than real: capped
  BOOST_TEST(tp[3] == 400.0, tt::tolerance(1e-12));   // 32 samples in 80 ms
  // At an iteration inside an event the estimate follows it.
  cfg.events.push_back(event(0, 0.5, 10, 20));
  BOOST_TEST(Emulator(cfg, 4).throughput(batches, machine, 12)[0] == 500.0, tt::tolerance(1e-12));
  // A worker with no samples is rated at one sample.
  BOOST_TEST(emu.throughput({0, 32, 32, 32}, machine)[0] == 1000.0, tt::tolerance(1e-12));
  CHECK_CONTAINS(error_of([&] { emu.throughput(batches, DeviceProfile{}); }), "profile with 0 batches");
  CHECK_CONTAINS(error_of([&] { emu.throughput({32, 32}, machine); }), "2 local batches for 4 workers");
}

BOOST_AUTO_TEST_CASE(validation_names_what_is_wrong) {
  std::string msg = error_of([] { Emulator(with_speeds({1.0, 0.5, 0.5}), 4); });
  CHECK_CONTAINS(msg, "lists 3 workers");
  CHECK_CONTAINS(msg, "has 4");
  CHECK_CONTAINS(msg, "what to do");

  EmulationConfig cfg = with_speeds({1.0, 1.0});
  cfg.events.push_back(event(2, 0.5, 0, 10));
  msg = error_of([&] { Emulator(cfg, 2); });
  CHECK_CONTAINS(msg, "worker 2");
  CHECK_CONTAINS(msg, "ranks count from 0");
  cfg.events = {event(-1, 0.5, 0, 10)};
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 2); }), "worker -1");
  cfg.events = {event(1, 0.5, 10, 10)};
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 2); }), "[10, 10)");
  cfg.events = {event(1, 0.0, 0, 10)};
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 2); }), "has speed 0");

  CHECK_CONTAINS(error_of([] { Emulator(with_speeds({1.0, 0.0}), 2); }), "worker r1 has speed 0");
  CHECK_CONTAINS(error_of([] { Emulator(with_speeds({1.0}, 1.5), 1); }), "reference 1.5");
  CHECK_CONTAINS(error_of([] { Emulator(with_speeds({1.0}, 0.0), 1); }), "reference 0");

  cfg = with_speeds({1.0});
  cfg.workers[0].comm_delay_ms = -1;
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 1); }), "communication delay");

  cfg = with_speeds({1.0});
  cfg.workers[0].profile = profile({32, 16}, {10, 5});
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 1); }), "not increasing");
  cfg.workers[0].profile = profile({16, 32}, {10});
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 1); }), "2 batches and 1 times");
  cfg.workers[0].profile = profile({}, {});
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 1); }), "0 batches");
  cfg.workers[0].profile = profile({16}, {0});
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 1); }), "0 ms");
  cfg.workers[0].profile = profile({16}, {10});
  cfg.workers[0].speed = 0.5;
  CHECK_CONTAINS(error_of([&] { Emulator(cfg, 1); }), "both a profile and speed");

  CHECK_CONTAINS(error_of([] { Emulator(with_random(1.5, 1, 1, 0.5, 0.5), 1); }), "probability 1.5");
  CHECK_CONTAINS(error_of([] { Emulator(with_random(0.1, 0, 1, 0.5, 0.5), 1); }), "durations [0, 1]");
  CHECK_CONTAINS(error_of([] { Emulator(with_random(0.1, 5, 2, 0.5, 0.5), 1); }), "durations [5, 2]");
  CHECK_CONTAINS(error_of([] { Emulator(with_random(0.1, 1, 1, 0.0, 0.5), 1); }), "speeds [0, 0.5]");
  CHECK_CONTAINS(error_of([] { Emulator(with_random(0.1, 1, 1, 0.6, 0.5), 1); }), "speeds [0.6, 0.5]");

  Emulator ok(with_speeds({1.0, 1.0}), 2);
  CHECK_CONTAINS(error_of([&] { ok.speed(2, 0); }), "rank 2");
  CHECK_CONTAINS(error_of([&] { ok.speed(0, -1); }), "negative iteration");
  CHECK_CONTAINS(error_of([&] { ok.stretch(0, 0, -1, 1.0); }), "negative local batch");
}

BOOST_AUTO_TEST_CASE(describe_lists_every_worker) {
  EmulationConfig cfg = with_speeds({1.0, 0.5, 1.0}, 0.5);
  cfg.workers[2].profile = profile({16, 32}, {12, 20});
  cfg.events.push_back(event(1, 0.3, 200, 300));
  cfg.random = with_random(0.01, 5, 20, 0.3, 0.6).random;
  const std::string d = Emulator(cfg, 3).describe();
  CHECK_CONTAINS(d, "reference");
  CHECK_CONTAINS(d, "r0: speed 1 (compute x2)");
  CHECK_CONTAINS(d, "r1: speed 0.5 (compute x4); events: x0.3 at [200,300)");
  CHECK_CONTAINS(d, "r2: profile batch 16 in 12 ms, batch 32 in 20 ms");
  CHECK_CONTAINS(d, "random slowdowns: p 0.01");
}

BOOST_AUTO_TEST_CASE(sleep_until_reaches_the_deadline) {
  sleep_until_ms(now_ms() - 1000.0);  // past: returns at once
  const double deadline = now_ms() + 5.0;
  sleep_until_ms(deadline);
  BOOST_TEST(now_ms() >= deadline);
  CHECK_CONTAINS(error_of([] { sleep_until_ms(now_ms() + 1e9); }), "sleep");
}

BOOST_AUTO_TEST_SUITE_END()  // test_emulator
