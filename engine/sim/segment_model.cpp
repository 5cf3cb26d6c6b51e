#include "engine/sim/segment_model.hpp"

#include <algorithm>
#include <utility>

namespace tandem {

namespace {

// One segment's sums: each worker's stats and steps, and the record.
struct Segment {
  Segment(const ComputeModel& compute, const Plan& plan, int64_t t, double start_ms, std::vector<WorkerStats>& stats,
          SyncRecord& rec);
  int workers() const { return static_cast<int>(plan.local_batch.size()); }
  WorkerStats& worker(int r) { return stats[static_cast<size_t>(r)]; }
  // One step of worker r at iteration `it` into its sums; returns its time.
  double step(int r, int64_t it);
  // Turns the sums into means per step and completes the record; returns the
  // iteration the segment ends at.
  int64_t finish(int64_t iterations, double clock_ms);

  const ComputeModel& compute;
  const Plan& plan;
  const int64_t t;
  const double start_ms;
  std::vector<WorkerStats>& stats;
  SyncRecord& rec;
  std::vector<int64_t> steps;
  double staleness_sum = 0.0;  // over the applied updates
};

Segment::Segment(const ComputeModel& compute_model, const Plan& p, int64_t first, double start,
                 std::vector<WorkerStats>& worker_stats, SyncRecord& record)
    : compute(compute_model), plan(p), t(first), start_ms(start), stats(worker_stats), rec(record),
      steps(p.local_batch.size(), 0) {
  for (int r = 0; r < workers(); ++r) {
    WorkerStats& w = worker(r);
    w = WorkerStats{};
    w.rank = r;
    w.valid = 1;
    w.local_batch = plan.local_batch[static_cast<size_t>(r)];
    w.sync_mode = static_cast<int32_t>(plan.sync.mode);
    w.group = plan.sync.mode == SyncMode::grouped ? plan.sync.group[static_cast<size_t>(r)] : 0;
    w.start_ms = start_ms;
  }
  rec.mode = plan.sync.str();
  rec.groups = plan.sync.group;
}

double Segment::step(int r, int64_t it) {
  WorkerStats one;
  compute.step(r, it, plan.local_batch[static_cast<size_t>(r)], one);
  WorkerStats& w = worker(r);
  w.compute_ms += one.compute_ms;
  w.real_compute_ms += one.real_compute_ms;
  w.data_ms += one.data_ms;
  w.speed += one.speed;
  ++steps[static_cast<size_t>(r)];
  return one.data_ms + one.compute_ms;
}

int64_t Segment::finish(int64_t iterations, double clock_ms) {
  rec.iterations = iterations;
  rec.staleness_mean = rec.applied ? staleness_sum / static_cast<double>(rec.applied) : 0.0;
  rec.segment_ms = clock_ms - start_ms;
  for (int r = 0; r < workers(); ++r) {
    WorkerStats& w = worker(r);
    const int64_t n = steps[static_cast<size_t>(r)];
    const double k = static_cast<double>(std::max<int64_t>(n, 1));
    w.steps = n;
    for (double* v : {&w.compute_ms, &w.real_compute_ms, &w.data_ms, &w.speed, &w.idle_ms, &w.comm_ms}) *v /= k;
    w.step_ms = (clock_ms - start_ms) / k;
    w.iteration = t + iterations - 1;
    w.samples_per_s = w.compute_ms > 0 ? static_cast<double>(w.local_batch) / (w.compute_ms / 1000.0) : 0.0;
  }
  return t + iterations;
}

// Local SGD: H steps each at its own pace, then the model average (a ring of
// parameters and momenta: twice the gradient's bytes). Returns the iterations.
int64_t local_segment(Segment& s, const NetworkModel& network, int64_t max_iterations, double& clock_ms) {
  const int n = s.workers();
  const int64_t iterations = std::min<int64_t>(s.plan.sync.local_steps, max_iterations);
  std::vector<double> busy(static_cast<size_t>(n), 0.0);
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < iterations; ++i) busy[static_cast<size_t>(r)] += s.step(r, s.t + i);
  const double slowest = *std::max_element(busy.begin(), busy.end());
  const double average = network.ring_ms(n, 2.0 * network.gradient_bytes());
  for (int r = 0; r < n; ++r) {
    s.worker(r).idle_ms = slowest - busy[static_cast<size_t>(r)];
    s.worker(r).comm_ms = average;
  }
  clock_ms += slowest + average;
  s.rec.updates = 1;
  return iterations;
}

// k-sync rounds until `target` samples are applied: the update lands with the k-th
// arrival and the server's round trip. Returns the samples applied.
int64_t ksync_segment(Segment& s, const NetworkModel& network, int64_t target, double& clock_ms) {
  const int n = s.workers(), k = s.plan.sync.k;
  const double server_ms = network.server_ms();
  int64_t samples = 0;
  std::vector<std::pair<double, int>> arrival(static_cast<size_t>(n));
  while (samples < target) {
    const int64_t it = s.t + s.rec.updates;
    for (int r = 0; r < n; ++r) arrival[static_cast<size_t>(r)] = {s.step(r, it), r};
    std::sort(arrival.begin(), arrival.end());
    const double kth = arrival[static_cast<size_t>(k - 1)].first;
    for (int i = 0; i < n; ++i) {
      WorkerStats& w = s.worker(arrival[static_cast<size_t>(i)].second);
      ++w.pushes;
      if (i < k) {
        w.idle_ms += kth - arrival[static_cast<size_t>(i)].first;
        samples += w.local_batch;
        ++s.rec.applied;
      } else {
        ++s.rec.dropped;
      }
      w.comm_ms += server_ms;
    }
    ++s.rec.updates;
    clock_ms += kth + server_ms;
  }
  return samples;
}

// Grouped: an event loop over the groups' arrivals at the server. A group that
// lands waits (held) while a computing group is more than S versions behind, as
// the server holds its reply.
class GroupedSegment {
public:
  GroupedSegment(Segment& s, const NetworkModel& network);
  // Until `target` samples are applied and the updates then in flight have landed;
  // returns the samples applied.
  int64_t run(int64_t target, double& clock_ms);

private:
  bool computing(int g) const { return held_since_[static_cast<size_t>(g)] < 0.0; }
  // Group g's next update: its slowest member's step, the all-reduce inside, the push.
  void launch(int g, double from);
  int next_arrival() const;  // the computing group whose update lands first; -1: none
  void land(int g);          // the server applies g's update
  bool may_go(int g) const;  // no other computing group too far behind
  void release_held(double now);

  Segment& s_;
  const NetworkModel& network_;
  const int groups_;
  std::vector<std::vector<int>> members_;
  std::vector<int64_t> group_batch_, base_, updates_of_;
  std::vector<double> done_at_, held_since_;
  int64_t version_ = 0, samples_ = 0;
};

GroupedSegment::GroupedSegment(Segment& s, const NetworkModel& network)
    : s_(s), network_(network), groups_(s.plan.sync.groups()) {
  const auto G = static_cast<size_t>(groups_);
  members_.resize(G);
  group_batch_.assign(G, 0);
  base_.assign(G, 0);
  updates_of_.assign(G, 0);
  done_at_.assign(G, 0.0);
  held_since_.assign(G, -1.0);
  for (int r = 0; r < s.workers(); ++r) {
    const auto g = static_cast<size_t>(s.plan.sync.group[static_cast<size_t>(r)]);
    members_[g].push_back(r);
    group_batch_[g] += s.plan.local_batch[static_cast<size_t>(r)];
  }
}

int64_t GroupedSegment::run(int64_t target, double& clock_ms) {
  for (int g = 0; g < groups_; ++g) launch(g, clock_ms);
  double now = clock_ms;
  bool meet = false;
  for (int in_flight = groups_; in_flight > 0;) {
    const int g = next_arrival();
    if (g < 0) break;
    now = done_at_[static_cast<size_t>(g)];
    land(g);
    if (samples_ >= target) meet = true;
    if (meet) {  // this group is told to meet; the others land their updates in flight
      done_at_[static_cast<size_t>(g)] = -1.0;
      --in_flight;
      continue;
    }
    held_since_[static_cast<size_t>(g)] = now;
    release_held(now);
  }
  clock_ms = now;
  return samples_;
}

void GroupedSegment::launch(int g, double from) {
  const std::vector<int>& group = members_[static_cast<size_t>(g)];
  std::vector<double> times;
  for (int r : group) times.push_back(s_.step(r, s_.t + updates_of_[static_cast<size_t>(g)]));
  double slowest = 0.0;
  for (double x : times) slowest = std::max(slowest, x);
  const double comm = network_.ring_ms(static_cast<int>(group.size()), network_.gradient_bytes()) + network_.server_ms();
  for (size_t i = 0; i < group.size(); ++i) {
    s_.worker(group[i]).idle_ms += slowest - times[i];
    s_.worker(group[i]).comm_ms += comm;
  }
  done_at_[static_cast<size_t>(g)] = from + slowest + comm;
}

int GroupedSegment::next_arrival() const {
  int g = -1;
  for (int h = 0; h < groups_; ++h)
    if (computing(h) && done_at_[static_cast<size_t>(h)] >= 0.0 &&
        (g < 0 || done_at_[static_cast<size_t>(h)] < done_at_[static_cast<size_t>(g)]))
      g = h;
  return g;
}

void GroupedSegment::land(int g) {
  const auto i = static_cast<size_t>(g);
  const double stale = static_cast<double>(version_ - base_[i]);
  ++version_;
  ++s_.rec.updates;
  ++s_.rec.applied;
  s_.staleness_sum += stale;
  s_.rec.staleness_max = std::max(s_.rec.staleness_max, stale);
  samples_ += group_batch_[i];
  ++updates_of_[i];
  s_.worker(members_[i].front()).pushes += 1;
}

bool GroupedSegment::may_go(int g) const {
  for (int h = 0; h < groups_; ++h)
    if (h != g && computing(h) && version_ - base_[static_cast<size_t>(h)] > s_.plan.sync.staleness) return false;
  return true;
}

// Every held group that may go starts again (the slowest never waits); releasing
// one can free another, so until none is left to release.
void GroupedSegment::release_held(double now) {
  for (bool again = true; again;) {
    again = false;
    for (int h = 0; h < groups_; ++h) {
      const auto i = static_cast<size_t>(h);
      if (computing(h) || done_at_[i] < 0.0 || !may_go(h)) continue;
      for (int r : members_[i]) s_.worker(r).idle_ms += now - held_since_[i];
      held_since_[i] = -1.0;
      base_[i] = version_;
      launch(h, now);
      again = true;
    }
  }
}

}  // namespace

SegmentModel::SegmentModel(const ComputeModel& compute, const NetworkModel& network)
    : compute_(compute), network_(network) {}

int64_t SegmentModel::run(const Plan& plan, int64_t t, int64_t max_iterations, double& clock_ms,
                          std::vector<WorkerStats>& stats, SyncRecord& rec) const {
  Segment s(compute_, plan, t, clock_ms, stats, rec);
  int64_t iterations = 0;
  if (plan.sync.mode == SyncMode::local) {
    iterations = local_segment(s, network_, max_iterations, clock_ms);
  } else {  // ksync and grouped run until sync_every global batches' worth of samples are in
    const int64_t B = plan.global_batch();
    const int64_t target = std::min<int64_t>(plan.sync.sync_every, max_iterations) * B;
    const int64_t samples = plan.sync.mode == SyncMode::ksync ? ksync_segment(s, network_, target, clock_ms)
                                                              : GroupedSegment(s, network_).run(target, clock_ms);
    iterations = std::max<int64_t>(1, samples / B);
  }
  return s.finish(iterations, clock_ms);
}

}  // namespace tandem
