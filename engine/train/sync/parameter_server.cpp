#include "engine/train/sync/parameter_server.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include "engine/core/log.hpp"

#include "engine/core/clock.hpp"
#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "kernels/cpu/sgd_step.hpp"

namespace tandem {

void ServerTotals::add(const ServerTotals& o) {
  received += o.received;
  applied += o.applied;
  dropped += o.dropped;
  updates += o.updates;
  nonfinite += o.nonfinite;
  staleness_sum += o.staleness_sum;
  staleness_max = std::max(staleness_max, o.staleness_max);
  busy_ms += o.busy_ms;
  if (staleness_histogram.size() < o.staleness_histogram.size())
    staleness_histogram.resize(o.staleness_histogram.size(), 0);
  for (size_t i = 0; i < o.staleness_histogram.size(); ++i) staleness_histogram[i] += o.staleness_histogram[i];
}

ParameterServer::ParameterServer(Comm& world, Channel& channel, size_t param_count, const OptimizerConfig& optimizer,
                                 const LrSchedule& schedule, int64_t global_batch, int64_t max_nonfinite)
    : world_(world), channel_(channel), count_(param_count), optimizer_(optimizer), schedule_(schedule),
      global_batch_(global_batch), params_(param_count), velocity_(param_count), accum_(param_count),
      message_(sizeof(PushHeader) + param_count * sizeof(float)),
      reply_(sizeof(ReplyHeader) + param_count * sizeof(float)),
      nonfinite_(max_nonfinite) {}

ParameterServer::~ParameterServer() {
  if (thread_.joinable()) thread_.join();
}

void ParameterServer::begin(const Plan& plan, const float* params, const float* velocity, int64_t version,
                            int64_t first_iteration) {
  TANDEM_CHECK(!thread_.joinable(), "a parameter server segment began before the last one finished (a bug in tandem)");
  plan_ = plan;
  std::copy(params, params + count_, params_.begin());
  if (velocity)
    std::copy(velocity, velocity + count_, velocity_.begin());
  else
    std::fill(velocity_.begin(), velocity_.end(), 0.0f);
  // One group has no staleness (it is bsp through the server): momentum per push.
  slow_ = plan.sync.mode == SyncMode::grouped && plan.sync.groups() > 1 && optimizer_.slow_momentum > 0.0 &&
          optimizer_.momentum > 0.0;
  if (slow_) {
    start_.assign(params, params + count_);
    // The velocity (bsp units: a global batch moves the weights by lr * v) as the
    // outer momentum of a segment of sync_every global batches.
    const float to_u = static_cast<float>(static_cast<double>(plan.sync.sync_every) * schedule_.at(first_iteration));
    for (float& v : velocity_) v *= to_u;
  }
  version_ = version;
  first_iteration_ = first_iteration;
  samples_applied_ = 0;
  totals_ = ServerTotals{};
  meet_ = false;
  told_.clear();
  participants_.clear();
  const int n = static_cast<int>(plan.local_batch.size());
  if (plan.sync.mode == SyncMode::grouped) {
    std::vector<bool> seen(static_cast<size_t>(plan.sync.groups()), false);
    for (int r = 0; r < n; ++r) {  // a group's leader is its lowest rank
      const int g = plan.sync.group[static_cast<size_t>(r)];
      if (!seen[static_cast<size_t>(g)]) participants_.push_back(r);
      seen[static_cast<size_t>(g)] = true;
    }
  } else {
    for (int r = 0; r < n; ++r) participants_.push_back(r);
  }
  thread_ = std::thread([this] {
    try {
      serve();
    } catch (const std::exception& e) {
      world_.abort(std::string("the parameter server failed: ") + e.what());
    }
  });
}

ServerTotals ParameterServer::finish(float* params, float* velocity, int64_t* version, double* iterations_done) {
  if (thread_.joinable()) thread_.join();
  *iterations_done = static_cast<double>(samples_applied_) / static_cast<double>(global_batch_);
  if (slow_) {
    // The meeting's momentum step: u = beta u + (start - end); weights = start - u.
    const float beta = static_cast<float>(optimizer_.slow_momentum);
    for (size_t i = 0; i < count_; ++i) {
      velocity_[i] = beta * velocity_[i] + (start_[i] - params_[i]);
      params_[i] = start_[i] - velocity_[i];
    }
    // Back to bsp units over the global batches this segment made.
    const double k = std::max(*iterations_done, 1e-9) * schedule_.at(first_iteration_);
    const float to_v = static_cast<float>(1.0 / k);
    for (float& v : velocity_) v *= to_v;
  }
  std::copy(params_.begin(), params_.end(), params);
  if (velocity) std::copy(velocity_.begin(), velocity_.end(), velocity);
  *version = version_;
  return totals_;
}

void ParameterServer::apply(const float* grad_sum, int64_t samples, bool ksync_mean) {
  // A NaN or Inf (one worker's blow-up, in a group through the group's sum): the
  // master weights must stay finite, so the update is skipped, no version made; its
  // samples count as seen, as a skipped bsp step's iteration does. Repeated, the
  // job ends: training has diverged.
  if (!std::all_of(grad_sum, grad_sum + count_, [](float g) { return std::isfinite(g); })) {
    ++totals_.nonfinite;
    const bool stop = nonfinite_.skipped();
    log::warn("parameter server: an update of {} samples holds a NaN or Inf: skipped ({})", samples,
                 nonfinite_.progress());
    if (stop)
      world_.abort(nonfinite_.diverged("updates", "at the parameter server") +
                   "; lower the learning rate, the staleness bound or the number of groups, and resume from the "
                   "last checkpoint");
    samples_applied_ += samples;
    if (samples_applied_ >= static_cast<int64_t>(plan_.sync.sync_every) * global_batch_) meet_ = true;
    return;
  }
  nonfinite_.finite();
  const double B = static_cast<double>(global_batch_);
  const int64_t iteration = first_iteration_ + samples_applied_ / global_batch_;
  // grouped: the update moves the weights by the group's share of a global batch;
  // ksync: the mean over the samples that made it. Several groups: plain SGD here
  // and the momentum at the meeting (slow momentum, the header says why); else one
  // step of SGD with momentum per update. Other ways tried for stale pushes and
  // dropped: momentum m^(1/G) per push; that minus the momentum asynchrony adds
  // (Mitliagkas et al., "Asynchrony begets momentum"); delay compensation
  // (DC-ASGD). None came near bsp's accuracy per sample; slow momentum does.
  const double share = static_cast<double>(samples) / B;
  const double scale = ksync_mean ? 1.0 / static_cast<double>(samples) : 1.0 / B;
  const double decay = ksync_mean ? optimizer_.weight_decay : optimizer_.weight_decay * share;
  if (slow_) {
    // Plain SGD inside the segment; the momentum comes at the meeting (finish()).
    const double lr = schedule_.at(iteration) * (1.0 - optimizer_.slow_momentum) / (1.0 - optimizer_.momentum);
    cpu::sgd_step(params_.data(), grad_sum, nullptr, count_, static_cast<float>(lr), 0.0f, static_cast<float>(decay),
                  static_cast<float>(scale), false);
  } else {
    cpu::sgd_step(params_.data(), grad_sum, optimizer_.momentum != 0.0 ? velocity_.data() : nullptr, count_,
                  static_cast<float>(schedule_.at(iteration)), static_cast<float>(optimizer_.momentum),
                  static_cast<float>(decay), static_cast<float>(scale), optimizer_.nesterov);
  }
  samples_applied_ += samples;
  ++version_;
  ++totals_.updates;
  if (samples_applied_ >= static_cast<int64_t>(plan_.sync.sync_every) * global_batch_) meet_ = true;
}

void ParameterServer::reply(int to, double staleness, bool dropped) {
  ReplyHeader h;
  h.version = version_;
  h.meet = meet_ ? 1 : 0;
  h.dropped = dropped ? 1 : 0;
  h.staleness = staleness;
  std::memcpy(reply_.data(), &h, sizeof h);
  std::memcpy(reply_.data() + sizeof h, params_.data(), count_ * sizeof(float));
  channel_.send(to, kReplyTag, reply_.data(), reply_.size(), "the parameter server's reply");
  if (meet_) told_.push_back(to);
}

void ParameterServer::serve() {
  const bool grouped = plan_.sync.mode == SyncMode::grouped;
  const int groups = plan_.sync.groups();
  // grouped: the version each group's weights are at, and the groups waiting for a reply.
  std::vector<int64_t> base(static_cast<size_t>(groups), version_);
  struct Held {
    int group, rank;
    double staleness;
  };
  std::vector<Held> held;
  // ksync: the pushes accumulated for the current version.
  std::vector<int> waiting;
  int64_t waiting_samples = 0;
  auto record = [&](double staleness, int64_t pushes) {
    totals_.applied += pushes;
    totals_.staleness_sum += staleness * static_cast<double>(pushes);
    totals_.staleness_max = std::max(totals_.staleness_max, staleness);
    const size_t bin = static_cast<size_t>(std::max(0.0, staleness));
    if (totals_.staleness_histogram.size() <= bin) totals_.staleness_histogram.resize(bin + 1, 0);
    totals_.staleness_histogram[bin] += pushes;
  };
  auto told = [&](int rank) { return std::find(told_.begin(), told_.end(), rank) != told_.end(); };
  // A held group may go once no group still computing is more than S versions behind.
  auto may_release = [&](int g) {
    if (meet_) return true;
    for (int h = 0; h < groups; ++h) {
      if (h == g) continue;
      const bool waits = std::any_of(held.begin(), held.end(), [&](const Held& x) { return x.group == h; });
      if (waits || told(participants_[static_cast<size_t>(h)])) continue;
      if (version_ - base[static_cast<size_t>(h)] > plan_.sync.staleness) return false;
    }
    return true;
  };
  auto flush_ksync = [&] {
    if (waiting.empty()) return;
    apply(accum_.data(), waiting_samples, true);
    record(0.0, static_cast<int64_t>(waiting.size()));
    for (int r : waiting) reply(r, 0.0, false);
    waiting.clear();
    waiting_samples = 0;
    std::fill(accum_.begin(), accum_.end(), 0.0f);
  };

  while (told_.size() < participants_.size()) {
    const int from = channel_.receive(Channel::kAnySource, kPushTag, message_.data(), message_.size(),
                                      "waiting for the workers' gradients at the parameter server");
    const double start = now_ms();
    PushHeader h;
    std::memcpy(&h, message_.data(), sizeof h);
    const auto* grad = reinterpret_cast<const float*>(message_.data() + sizeof h);
    ++totals_.received;
    TANDEM_CHECK(!told(from), "rank ", from, " pushed a gradient after it was told to meet (a bug in tandem)");
    if (grouped) {
      TANDEM_CHECK(h.group >= 0 && h.group < groups, "rank ", from, " pushed for group ", h.group, " of ", groups);
      const double staleness = static_cast<double>(version_ - h.base_version);
      apply(grad, h.samples, false);
      record(staleness, 1);
      held.push_back({h.group, from, staleness});
      // Release every held group that may go, in arrival order.
      for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < held.size(); ++i)
          if (may_release(held[i].group)) {
            const Held x = held[i];
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
            base[static_cast<size_t>(x.group)] = version_;
            reply(x.rank, x.staleness, false);
            again = true;
            break;
          }
      }
    } else if (h.base_version == version_) {
      const float* g = grad;
      for (size_t i = 0; i < count_; ++i) accum_[i] += g[i];
      waiting.push_back(from);
      waiting_samples += h.samples;
      if (static_cast<int>(waiting.size()) >= plan_.sync.k || meet_) flush_ksync();
    } else {
      ++totals_.dropped;  // computed on weights an update has already replaced
      reply(from, static_cast<double>(version_ - h.base_version), true);
    }
    if (meet_) flush_ksync();
    totals_.busy_ms += now_ms() - start;
  }
  TANDEM_CHECK(totals_.received == totals_.applied + totals_.dropped, "the parameter server received ",
               totals_.received, " gradients but applied ", totals_.applied, " and dropped ", totals_.dropped,
               " (a bug in tandem)");
}

}  // namespace tandem
