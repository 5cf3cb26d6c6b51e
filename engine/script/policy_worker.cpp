#include "engine/script/policy_worker.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "engine/script/policy_wire.hpp"
#include "engine/script/worker_confinement.hpp"

namespace tandem {

namespace {

struct Worker {
  std::unique_ptr<PolicySandbox> policy;
  PolicyLimits limits;
  const char* region = nullptr;  // the host's stats, read-only
  size_t region_bytes = 0;

  std::vector<WorkerStats> get_stats(WireReader& in) const {
    if (in.get<uint8_t>("stats.where") == 0) return in.get_vector<WorkerStats>("stats.workers");
    const auto n = in.get<uint64_t>("stats.count");
    if (!region || n > region_bytes / sizeof(WorkerStats))
      throw ScriptFailure(ScriptFailure::Garbage, "the stats do not fit the shared region");
    std::vector<WorkerStats> v(static_cast<size_t>(n));
    std::memcpy(v.data(), region, v.size() * sizeof(WorkerStats));
    return v;
  }

  // The CPU seconds a request may take before the kernel ends the process (SIGXCPU):
  // a backstop behind the host's deadline (policy_process.hpp), which comes first.
  double cpu_limit_s(PolicyOp op) const {
    const bool setup = op == PolicyOp::load || op == PolicyOp::init || op == PolicyOp::restore;
    return 5.0 * (setup ? limits.setup_budget_ms() : limits.budget_ms) / 1000.0 + 1.0;
  }

  // The request's answer, after the common header (ok, cost, memory).
  void serve(PolicyOp op, WireReader& in, WireWriter& out);
  PolicySandbox& loaded() {
    if (!policy) throw ScriptFailure(ScriptFailure::Error, "the policy worker was asked to run a policy before loading one");
    return *policy;
  }
};

void Worker::serve(PolicyOp op, WireReader& in, WireWriter& out) {
  switch (op) {
    case PolicyOp::load: {
      const std::string path = in.get_string("load.path");
      limits.budget_ms = in.get<double>("load.budget_ms");
      limits.memory_mb = in.get<double>("load.memory_mb");
      limits.setup_ms = in.get<double>("load.setup_ms");
      const std::string confinement = confine_policy_worker(limits.memory_mb);
      arm_cpu_limit(cpu_limit_s(op));
      policy = std::make_unique<PolicySandbox>(path, limits);
      out.put_string(policy->name());
      out.put_string(confinement);
      return;
    }
    case PolicyOp::init:
      loaded().init(get_cluster(in));
      out.put_string(loaded().params_in_force());
      return;
    case PolicyOp::step:
    case PolicyOp::observe: {
      const auto iteration = in.get<int64_t>("stats.iteration");
      const auto global_batch = in.get<int64_t>("stats.global_batch");
      const auto stats = get_stats(in);
      const auto cluster = in.get<ClusterStats>("stats.cluster");
      if (op == PolicyOp::observe)
        loaded().observe(iteration, global_batch, stats, cluster);
      else
        put_answer(out, loaded().step(iteration, global_batch, stats, cluster));
      return;
    }
    case PolicyOp::save:
      out.put_string(loaded().save_literal());
      return;
    case PolicyOp::restore:
      out.put<uint8_t>(loaded().restore_literal(in.get_string("restore.state")) ? 1 : 0);
      return;
  }
  throw ScriptFailure(ScriptFailure::Garbage, "the policy worker got an unknown request " + std::to_string(int(op)));
}

}  // namespace

void run_policy_worker(int fd, int stats_fd) {
  Worker w;
  struct stat st {};
  if (stats_fd >= 0 && ::fstat(stats_fd, &st) == 0 && st.st_size > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, stats_fd, 0);
    if (p != MAP_FAILED) {
      w.region = static_cast<const char*>(p);
      w.region_bytes = static_cast<size_t>(st.st_size);
    }
  }
  if (stats_fd >= 0) ::close(stats_fd);
  std::string request;
  while (recv_frame(fd, request, HUGE_VAL)) {
    WireWriter reply;
    try {
      WireReader in(request);
      const auto op = static_cast<PolicyOp>(in.get<uint8_t>("request.op"));
      if (w.policy) arm_cpu_limit(w.cpu_limit_s(op));
      WireWriter body;
      w.serve(op, in, body);
      reply.put<uint8_t>(1);
      reply.put<double>(w.policy ? w.policy->last_call_ms() : 0.0);
      reply.put<double>(w.policy ? w.policy->memory_mb() : 0.0);
      reply.put_string(body.bytes());
    } catch (const ScriptFailure& f) {
      reply = WireWriter();
      reply.put<uint8_t>(0);
      reply.put<uint8_t>(static_cast<uint8_t>(f.kind()));
      reply.put<double>(w.policy ? w.policy->last_call_ms() : 0.0);
      reply.put_string(f.what());
    } catch (const std::exception& e) {
      reply = WireWriter();
      reply.put<uint8_t>(0);
      reply.put<uint8_t>(static_cast<uint8_t>(ScriptFailure::Error));
      reply.put<double>(0.0);
      reply.put_string(e.what());
    }
    if (!send_frame(fd, reply.bytes())) break;
  }
  ::_exit(0);  // no lua_close: a policy's finalizers never run
}

}  // namespace tandem
