// The parameter server's update rules, exactly, on a few parameters: the server
// thread talks to this test through an in-process channel, the test playing two
// single-worker groups. Checked against the formulas written out here:
//   - slow momentum (two groups): plain SGD at lr (1 - beta) / (1 - m) per push,
//     then at the meeting u = beta * u0 + (start - end), weights = start - u, and
//     the velocity handed back is u over (global batches done * lr), where u0 was
//     the velocity handed in times sync_every * lr;
//   - slow_momentum = 0, and one group: momentum m on every push, as bsp steps;
//   - the counts: every push applied, one version each, staleness as the versions
//     the push's weights were behind.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/dist/local_comm.hpp"
#include "engine/train/sync/parameter_server.hpp"

BOOST_AUTO_TEST_SUITE(test_parameter_server)  // ctest's unit.test_parameter_server (tests/CMakeLists.txt)

using namespace tandem;

namespace {

// Messages queued per (receiver, tag), as the hub channel delivers them.
class QueueChannel final : public Channel {
public:
  // `me`: the rank this end speaks as (the server is rank 0).
  struct Message {
    int from;
    std::vector<char> bytes;
  };
  void send_as(int me, int to, int tag, const void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    const char* p = static_cast<const char*>(data);
    queues_[{to, tag}].push_back({me, std::vector<char>(p, p + bytes)});
    ready_.notify_all();
  }
  // Waits at most 10 s: a protocol that stops answering fails the test (on the
  // server's thread the throw ends the process through Comm::abort) instead of
  // hanging it.
  int receive_as(int me, int tag, void* data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto& q = queues_[{me, tag}];
    if (!ready_.wait_for(lock, std::chrono::seconds(10), [&] { return !q.empty(); }))
      throw std::runtime_error("rank " + std::to_string(me) + " got no message of tag " + std::to_string(tag) +
                               " within 10 s");
    Message m = std::move(q.front());
    q.pop_front();
    BOOST_REQUIRE_EQUAL(m.bytes.size(), bytes);
    std::memcpy(data, m.bytes.data(), bytes);
    return m.from;
  }
  // The server's side: it is rank 0.
  void send(int to, int tag, const void* data, size_t bytes, const char*) override { send_as(0, to, tag, data, bytes); }
  int receive(int, int tag, void* data, size_t bytes, const char*) override { return receive_as(0, tag, data, bytes); }

private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::map<std::pair<int, int>, std::deque<Message>> queues_;
};

constexpr size_t kCount = 3;
constexpr int64_t kB = 8;

struct Reply {
  ReplyHeader header;
  std::vector<float> weights;
};

// One worker's push (as rank `rank`, the leader of `group`) and the server's reply.
Reply push(QueueChannel& ch, int rank, int group, int64_t base_version, int64_t samples, const std::vector<float>& grad) {
  std::vector<char> msg(sizeof(PushHeader) + kCount * sizeof(float));
  PushHeader h;
  h.group = group;
  h.rank = rank;
  h.base_version = base_version;
  h.samples = samples;
  std::memcpy(msg.data(), &h, sizeof h);
  std::memcpy(msg.data() + sizeof h, grad.data(), kCount * sizeof(float));
  ch.send_as(rank, 0, kPushTag, msg.data(), msg.size());
  std::vector<char> reply(sizeof(ReplyHeader) + kCount * sizeof(float));
  BOOST_REQUIRE_EQUAL(ch.receive_as(rank, kReplyTag, reply.data(), reply.size()), 0);
  Reply r;
  std::memcpy(&r.header, reply.data(), sizeof r.header);
  r.weights.resize(kCount);
  std::memcpy(r.weights.data(), reply.data() + sizeof r.header, kCount * sizeof(float));
  return r;
}

struct Setup {
  OptimizerConfig opt;
  ScheduleConfig sched;  // constant
  Plan plan;
  Setup(double slow_momentum, std::vector<int> groups) {
    opt.lr = 0.1;
    opt.momentum = 0.9;
    opt.weight_decay = 0.0;
    opt.slow_momentum = slow_momentum;
    plan.local_batch = {4, 4};
    plan.sync.mode = SyncMode::grouped;
    plan.sync.group = std::move(groups);
    plan.sync.staleness = 10;
    plan.sync.sync_every = 1;  // the segment ends once B samples are applied
  }
};

const std::vector<float> kStart = {1.0f, -2.0f, 0.5f};
const std::vector<float> kVelocity = {0.2f, 0.0f, -0.4f};
const std::vector<float> kGrad0 = {0.8f, -1.6f, 2.4f};  // sums over 4 samples
const std::vector<float> kGrad1 = {-0.4f, 0.4f, 1.2f};

}  // namespace

BOOST_AUTO_TEST_CASE(two_groups_step_plainly_and_take_the_momentum_at_the_meeting) {
  Setup s(0.5, {0, 1});
  LocalComm world;
  QueueChannel ch;
  LrSchedule schedule(s.sched, s.opt.lr, 1000, 1000);
  ParameterServer server(world, ch, kCount, s.opt, schedule, kB, 5);
  server.begin(s.plan, kStart.data(), kVelocity.data(), 0, 0);
  // Both groups computed on version 0: the second push is one version stale and
  // completes B samples, so its reply calls the meeting; group 0, back with its
  // next gradient (on version 1, one behind), lands it and is told too.
  const Reply r0 = push(ch, 0, 0, 0, 4, kGrad0);
  const Reply r1 = push(ch, 1, 1, 0, 4, kGrad1);
  const Reply r2 = push(ch, 0, 0, 1, 4, kGrad1);
  std::vector<float> params(kCount), velocity(kCount);
  int64_t version = 0;
  double done = 0.0;
  const ServerTotals t = server.finish(params.data(), velocity.data(), &version, &done);

  const double lr_in = 0.1 * (1 - 0.5) / (1 - 0.9);  // 0.5
  for (size_t i = 0; i < kCount; ++i) {
    const double w1 = kStart[i] - lr_in * kGrad0[i] / kB;
    const double w2 = w1 - lr_in * kGrad1[i] / kB;
    const double w3 = w2 - lr_in * kGrad1[i] / kB;
    BOOST_TEST(r0.weights[i] == w1, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(r1.weights[i] == w2, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(r2.weights[i] == w3, boost::test_tools::tolerance(1e-6));
    const double u0 = 1 * 0.1 * kVelocity[i];  // sync_every * lr * v
    const double u = 0.5 * u0 + (kStart[i] - w3);
    BOOST_TEST(params[i] == kStart[i] - u, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(velocity[i] == u / (1.5 * 0.1), boost::test_tools::tolerance(1e-5));  // 1.5 global batches
  }
  BOOST_TEST(r0.header.meet == 0);
  BOOST_TEST(r1.header.meet == 1);
  BOOST_TEST(r2.header.meet == 1);
  BOOST_TEST(version == 3);
  BOOST_TEST(done == 1.5);
  BOOST_TEST(t.received == 3);
  BOOST_TEST(t.applied == 3);
  BOOST_TEST(t.updates == 3);
  BOOST_TEST(t.staleness_max == 1.0);
}

BOOST_AUTO_TEST_CASE(without_slow_momentum_every_push_steps_with_momentum) {
  for (const auto& groups : {std::vector<int>{0, 1}, std::vector<int>{0, 0}}) {
    // {0, 0}: one group (its leader, rank 0, pushes the group's sum) is bsp through
    // the server, per-push momentum whatever slow_momentum says.
    const bool one_group = groups[1] == 0;
    Setup s(one_group ? 0.7 : 0.0, groups);
    LocalComm world;
    QueueChannel ch;
    LrSchedule schedule(s.sched, s.opt.lr, 1000, 1000);
    ParameterServer server(world, ch, kCount, s.opt, schedule, kB, 5);
    server.begin(s.plan, kStart.data(), kVelocity.data(), 0, 0);
    std::vector<float> sum(kCount);
    for (size_t i = 0; i < kCount; ++i) sum[i] = kGrad0[i] + kGrad1[i];
    if (one_group) {
      push(ch, 0, 0, 0, 8, sum);
    } else {  // as above: the third push lands after the meeting is called
      push(ch, 0, 0, 0, 4, kGrad0);
      push(ch, 1, 1, 0, 4, kGrad1);
      push(ch, 0, 0, 1, 4, kGrad1);
    }
    std::vector<float> params(kCount), velocity(kCount);
    int64_t version = 0;
    double done = 0.0;
    server.finish(params.data(), velocity.data(), &version, &done);
    for (size_t i = 0; i < kCount; ++i) {
      double v = kVelocity[i], w = kStart[i];
      if (one_group) {
        v = 0.9 * v + sum[i] / kB;
        w -= 0.1 * v;
      } else {
        for (float g : {kGrad0[i], kGrad1[i], kGrad1[i]}) {
          v = 0.9 * v + g / kB;
          w -= 0.1 * v;
        }
      }
      BOOST_TEST(params[i] == w, boost::test_tools::tolerance(1e-6));
      BOOST_TEST(velocity[i] == v, boost::test_tools::tolerance(1e-6));
    }
    BOOST_TEST(version == (one_group ? 1 : 3));
  }
}

BOOST_AUTO_TEST_SUITE_END()  // test_parameter_server
