#include "engine/dist/nccl_comm.hpp"

#include "engine/core/host_name.hpp"
#include "engine/core/log.hpp"
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "engine/core/error.hpp"

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "engine/core/clock.hpp"
#endif

namespace tandem {

namespace {

}  // namespace

#if TANDEM_HAVE_CUDA

namespace {

// Polling, as MpiComm's (comm.hpp): for the first kNcclYieldMs the waiter yields the core
// between polls, which is where a collective among ranks that all arrived ends; past
// it the wait is for GPU work or for another rank, and the waiter sleeps, backing off
// to about a millisecond, so a rank sharing its core with a computing one costs it
// nothing. A millisecond is small next to an iteration of GPU work.
constexpr double kNcclYieldMs = 1.0;
constexpr int kNcclFirstSleepUs = 50, kNcclMaxSleepUs = 1000;
// ncclCommAbort is itself a wait (it joins NCCL's threads); past this the job ends
// without it.
constexpr double kAbortWaitMs = 10000.0;

// Until done() is true (returns true) or the deadline passes (returns false).
template <typename Done>
bool poll_until(Done&& done, double deadline_ms) {
  const double start = now_ms();
  int sleep_us = kNcclFirstSleepUs;
  for (;;) {
    if (done()) return true;
    const double now = now_ms();
    if (now > deadline_ms) return false;
    if (now - start < kNcclYieldMs) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, kNcclMaxSleepUs);
  }
}

// The communicator's state: ncclInProgress while a non-blocking call is still
// running, ncclSuccess when it is done, an error when it failed (also when the state
// could not be read).
ncclResult_t async_state(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
  return rc != ncclSuccess ? rc : state;
}

// Polls the state until the non-blocking call on `comm` is no longer in progress.
// Returns false at the deadline (*state is then ncclInProgress).
bool wait_not_in_progress(ncclComm_t comm, double deadline_ms, ncclResult_t* state) {
  return poll_until(
      [&] {
        *state = async_state(comm);
        return *state != ncclInProgress;
      },
      deadline_ms);
}

// "unhandled system error (…): NCCL's last error", for messages.
std::string nccl_text(ncclResult_t rc, ncclComm_t comm) {
  std::string text = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" [NCCL: ") + last + "]";
  return text;
}

// Aborts `comm` (a no-op on nullptr), waiting at most kAbortWaitMs: a helper thread
// makes the call, so an abort stuck in NCCL cannot hang the job it is ending.
void abort_bounded(ncclComm_t comm) {
  if (!comm) return;
  try {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([comm, done] {
      ncclCommAbort(comm);
      done->store(true);
    }).detach();
    if (!poll_until([&] { return done->load(); }, now_ms() + kAbortWaitMs))
      log::warn("ncclCommAbort did not return within {:.0f} s; going on without it", kAbortWaitMs / 1000.0);
  } catch (const std::exception&) {
    ncclCommAbort(comm);  // no thread to be had: abort here, unbounded
  }
}

// Ends a communicator's life without throwing: finalize (a collective: it waits for
// the other ranks to finish their work on it) and destroy when it is healthy and we
// are not unwinding from an error (the other ranks would not come), abort otherwise.
void close_comm(ncclComm_t comm, double timeout_s, const char* which) noexcept {
  if (!comm) return;
  try {
    bool healthy = std::uncaught_exceptions() == 0 && async_state(comm) == ncclSuccess;
    if (healthy) {
      const ncclResult_t rc = ncclCommFinalize(comm);
      ncclResult_t state = rc;
      if (rc == ncclSuccess || rc == ncclInProgress) {
        if (!wait_not_in_progress(comm, now_ms() + timeout_s * 1000.0, &state))
          log::warn("finalizing the NCCL communicator of {} did not finish within {:.0f} s: aborting it", which,
                       timeout_s);
      }
      healthy = state == ncclSuccess;
      if (!healthy && state != ncclInProgress)
        log::warn("finalizing the NCCL communicator of {} failed: {}; aborting it", which, nccl_text(state, comm));
    }
    if (healthy)
      ncclCommDestroy(comm);
    else
      abort_bounded(comm);
  } catch (...) {
    // Logging failed; the communicator is left to the process's end.
  }
}

std::string uuid_text(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

constexpr const char* kNcclHint =
    "run with NCCL_DEBUG=WARN (or INFO) for NCCL's own account, check the other ranks' logs for the first error, "
    "or set TANDEM_NCCL=0 to keep gradients on MPI";

}  // namespace

// What a reduction is, for its messages.
struct ReduceSite {
  const char* what;
  std::string over;  // "all 4 ranks", "sync group 2 (3 ranks)"
  bool all_arrived;  // every rank passed the host barrier just before
};

NcclComm::NcclComm(std::unique_ptr<Comm> host_comm, int cuda_device, void* cuda_stream)
    : host_(std::move(host_comm)), cuda_device_(cuda_device), stream_(static_cast<cudaStream_t>(cuda_stream)) {
  TANDEM_CHECK(host_ != nullptr, "NcclComm needs the world's host Comm");
  timeout_s_ = host_->timeout_s();
  // Every failure here ends the job: the other ranks would otherwise wait in the
  // set-up until their deadline.
  auto fail = [&](const std::string& why) {
    abort_bounded(comm_);
    comm_ = nullptr;
    host().abort(fmt::format("setting up NCCL on rank {} (CUDA device {}): {}", rank(), cuda_device_, why));
  };
  auto check_cuda = [&](cudaError_t rc, const char* call) {
    if (rc != cudaSuccess)
      fail(fmt::format("{} failed: {}; check the GPU this rank was given and CUDA_VISIBLE_DEVICES", call,
                       cudaGetErrorString(rc)));
  };
  check_cuda(cudaSetDevice(cuda_device_), "cudaSetDevice");
  check_cuda(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming), "cudaEventCreateWithFlags");

  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank() == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) fail(fmt::format("ncclGetUniqueId failed: {}; {}", nccl_text(rc, nullptr), kNcclHint));
  }
  host().broadcast(&id, sizeof id, "the broadcast of the NCCL unique id");
  // Everyone is here (this deadline names who is not), so a set-up that then does
  // not finish is NCCL's: ranks that cannot reach each other.
  host().barrier("the arrival at the NCCL set-up");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const double deadline = now_ms() + timeout_s_ * 1000.0;
  const ncclResult_t rc = ncclCommInitRankConfig(&comm_, size(), id, rank(), &config);
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(fmt::format("ncclCommInitRankConfig failed: {}; {}", nccl_text(rc, comm_), kNcclHint));
  ncclResult_t state = ncclInProgress;
  if (!wait_not_in_progress(comm_, deadline, &state))
    fail(fmt::format("every rank arrived, but the NCCL communicator's set-up did not finish within {:.0f} s "
                     "(collective_timeout_s): the ranks cannot connect to each other, or one hung inside NCCL; the "
                     "communicator was aborted. Check the network between the hosts (NCCL_SOCKET_IFNAME) and the "
                     "other ranks' logs, run with NCCL_DEBUG=INFO, or set TANDEM_NCCL=0 to keep gradients on MPI",
                     timeout_s_));
  if (state != ncclSuccess)
    fail(fmt::format("the NCCL communicator's set-up failed: {}; {}", nccl_text(state, comm_), kNcclHint));
  log::debug("NCCL communicator ready: rank {} of {} on CUDA device {}", rank(), size(), cuda_device_);
}

NcclComm::~NcclComm() {
  close_comm(comm_, timeout_s_, "the world");
  comm_ = nullptr;
  if (reduced_) cudaEventDestroy(reduced_);
}

void NcclComm::reduce_and_wait(ncclComm*& comm, float* device_data, size_t count, const ReduceSite& site) {
  if (count == 0) return;
  TANDEM_CHECK(comm != nullptr, site.what, ": the NCCL communicator was aborted earlier");
  auto fail = [&](const std::string& why) {
    abort_bounded(comm);
    comm = nullptr;
    // A group's failure takes the world's communicator down with it: the job ends.
    abort_bounded(comm_);
    comm_ = nullptr;
    host().abort(fmt::format("{} on rank {}: the NCCL all-reduce of {} floats over {} {}", site.what, rank(), count,
                             site.over, why));
  };
  auto fail_nccl = [&](const char* call, ncclResult_t rc) {
    fail(fmt::format("failed: {} reports {}; the NCCL communicator was aborted. To find out why, {}", call,
                     nccl_text(rc, comm), kNcclHint));
  };
  auto fail_deadline = [&] {
    fail(fmt::format(
        "did not finish within {:.0f} s (collective_timeout_s): {}; the NCCL communicator was aborted. Check the "
        "other ranks' logs for the first error; if the all-reduce is merely slow (a huge model, a slow "
        "interconnect), raise collective_timeout_s",
        timeout_s_,
        site.all_arrived ? "every rank arrived, so a rank died or hung inside it, or the interconnect failed"
                         : "a rank did not reach it, died or hung inside it, or the interconnect failed"));
  };
  auto fail_cuda = [&](const char* call, cudaError_t rc) {
    fail(fmt::format("failed: {} reports {} (a CUDA error, perhaps left by an earlier kernel on this stream); the "
                     "NCCL communicator was aborted. Run with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
                     call, cudaGetErrorString(rc)));
  };

  const double deadline = now_ms() + timeout_s_ * 1000.0;
  const ncclResult_t rc = ncclAllReduce(device_data, device_data, count, ncclFloat, ncclSum, comm, stream_);
  if (rc != ncclSuccess && rc != ncclInProgress) fail_nccl("ncclAllReduce", rc);
  // A non-blocking communicator may still be enqueuing (the first all-reduce also
  // connects the ranks): the event goes on the stream only after the enqueue.
  ncclResult_t state = ncclInProgress;
  if (!wait_not_in_progress(comm, deadline, &state)) fail_deadline();
  if (state != ncclSuccess) fail_nccl("ncclAllReduce", state);

  const cudaError_t recorded = cudaEventRecord(reduced_, stream_);
  if (recorded != cudaSuccess) fail_cuda("cudaEventRecord", recorded);
  const bool finished = poll_until(
      [&] {
        const cudaError_t q = cudaEventQuery(reduced_);
        if (q == cudaSuccess) return true;
        if (q != cudaErrorNotReady) fail_cuda("cudaEventQuery", q);
        // A network error or a peer's death shows here; the kernel itself would wait on.
        const ncclResult_t s = async_state(comm);
        if (s != ncclSuccess && s != ncclInProgress) fail_nccl("ncclCommGetAsyncError", s);
        return false;
      },
      deadline);
  if (!finished) fail_deadline();
}

void NcclComm::allreduce_sum(float* device_data, size_t count, const char* what) {
  reduce_and_wait(comm_, device_data, count, {what, fmt::format("all {} ranks", size()), false});
}

void NcclComm::arrive_and_allreduce(float* device_data, size_t count, double* idle_ms, const char* what) {
  const double start = now_ms();
  host().barrier(what);
  if (idle_ms) *idle_ms = now_ms() - start;
  reduce_and_wait(comm_, device_data, count, {what, fmt::format("all {} ranks", size()), true});
  sync_end_ms_ = now_ms();
}

std::unique_ptr<NcclGroupComm> NcclComm::split(int color, int key, const char* what) {
  TANDEM_CHECK_HINT(color >= 0 || color == NCCL_SPLIT_NOCOLOR,
                    "give each sync group a colour >= 0, and -1 (NCCL_SPLIT_NOCOLOR) to a rank in none", what,
                    ": sync group colour ", color, " is invalid");
  TANDEM_CHECK(comm_ != nullptr, what, ": the NCCL communicator was aborted earlier");
  // Every rank arrives first (the host deadline names who does not): a split that
  // then does not finish is NCCL's.
  host().barrier(what);
  auto fail = [&](ncclComm_t child, const std::string& why) {
    // NCCL's advice for a non-blocking split that must stop: abort the parent, then the child.
    abort_bounded(comm_);
    comm_ = nullptr;
    abort_bounded(child);
    host().abort(fmt::format("{} on rank {}: splitting the NCCL communicator into sync groups (colour {}) {}", what,
                             rank(), color, why));
  };

  const double deadline = now_ms() + timeout_s_ * 1000.0;
  // NCCL writes the new communicator here from its own thread when the split is
  // done; until then it is null, and the parent's state says ncclInProgress.
  ncclComm_t child = nullptr;
  const ncclResult_t rc = ncclCommSplit(comm_, color, key, &child, nullptr);  // nullptr: inherit non-blocking
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(nullptr, fmt::format("failed: ncclCommSplit reports {}; {}", nccl_text(rc, comm_), kNcclHint));
  ncclResult_t state = ncclInProgress;
  const bool done = wait_not_in_progress(comm_, deadline, &state);
  child = __atomic_load_n(&child, __ATOMIC_ACQUIRE);
  if (!done)
    fail(child, fmt::format("did not finish within {:.0f} s (collective_timeout_s) although every rank arrived: a "
                            "rank hung inside NCCL or the interconnect failed; the communicators were aborted. Check "
                            "the other ranks' logs, or raise collective_timeout_s",
                            timeout_s_));
  if (state != ncclSuccess)
    fail(child, fmt::format("failed: {}; {}", nccl_text(state, comm_), kNcclHint));
  if (color == NCCL_SPLIT_NOCOLOR) return nullptr;
  if (!child) fail(nullptr, "finished without a communicator for this rank's group (an NCCL surprise)");
  // The group's own state, should its set-up still be finishing.
  if (!wait_not_in_progress(child, deadline, &state) || state != ncclSuccess)
    fail(child, fmt::format("left the group's communicator unready: {}; {}", nccl_text(state, child), kNcclHint));
  int group_rank = -1, group_size = 0;
  const ncclResult_t r1 = ncclCommUserRank(child, &group_rank), r2 = ncclCommCount(child, &group_size);
  if (r1 != ncclSuccess || r2 != ncclSuccess)
    fail(child, fmt::format("left a group communicator whose rank and size cannot be read: {}",
                            nccl_text(r1 != ncclSuccess ? r1 : r2, child)));
  return std::unique_ptr<NcclGroupComm>(new NcclGroupComm(*this, child, color, group_rank, group_size));
}

NcclGroupComm::~NcclGroupComm() {
  close_comm(comm_, close_timeout_s_, "a sync group");
  comm_ = nullptr;
}

void NcclGroupComm::allreduce_sum(float* device_data, size_t count, const char* what) {
  world_.reduce_and_wait(comm_, device_data, count,
                         {what, fmt::format("sync group {} ({} ranks)", color_, size_), false});
}

RankPlacement my_placement(bool on_gpu, int cuda_device) {
  RankPlacement p;
  p.host = host_name();
  if (!on_gpu) return p;
  p.on_gpu = true;
  p.cuda_device = cuda_device;
  cudaDeviceProp prop{};
  // Left empty when unreadable: decide_nccl then keeps gradients on MPI.
  if (cudaGetDeviceProperties(&prop, cuda_device) == cudaSuccess) p.gpu_uuid = uuid_text(prop.uuid);
  return p;
}

#else  // without CUDA: no NcclComm can exist, so the members below are never reached.

struct ReduceSite {};

NcclComm::NcclComm(std::unique_ptr<Comm> host_comm, int, void*) : host_(std::move(host_comm)) {
  TANDEM_FAIL_HINT("build tandem where CMake finds CUDA with NCCL, or let make_gpu_world_comm choose the transport",
                   "NcclComm: this tandem was built without CUDA and NCCL");
}
NcclComm::~NcclComm() = default;
void NcclComm::reduce_and_wait(ncclComm*&, float*, size_t, const ReduceSite&) {}
void NcclComm::allreduce_sum(float*, size_t, const char*) {}
void NcclComm::arrive_and_allreduce(float*, size_t, double*, const char*) {}
std::unique_ptr<NcclGroupComm> NcclComm::split(int, int, const char*) { return nullptr; }
NcclGroupComm::~NcclGroupComm() = default;
void NcclGroupComm::allreduce_sum(float*, size_t, const char*) {}

RankPlacement my_placement(bool, int) {
  RankPlacement p;
  p.host = host_name();  // never on a GPU: there is no CUDA
  return p;
}

#endif

std::unique_ptr<Comm> make_gpu_world_comm(std::unique_ptr<Comm> world, const RankPlacement& mine, void* cuda_stream) {
  if (world->size() == 1 || world->name() != "mpi") return world;
#if TANDEM_HAVE_CUDA
  // Every placement reaches rank 0 as a stats report does (its deadline names the
  // ranks that never send one); rank 0 decides for all and broadcasts the answer, so
  // no two ranks can choose differently.
  const PlacementRecord record = to_record(mine);
  std::vector<PlacementRecord> records(static_cast<size_t>(world->size()));
  world->post_report(&record, sizeof record, records.data());
  world->finish_reports("the gathering of every rank's GPU placement");
  int32_t use = 0;
  if (world->rank() == 0) {
    std::vector<RankPlacement> ranks;
    ranks.reserve(records.size());
    for (const auto& r : records) ranks.push_back(from_record(r));
    NcclDecision decision = decide_nccl(ranks);
    const char* env = std::getenv("TANDEM_NCCL");
    if (decision.use && env && std::string(env) == "0")
      decision = {false, "TANDEM_NCCL=0: gradients go through MPI"};
    // Where no rank has a GPU there is nothing to choose: the trainer's start lines
    // say how the workers talk; a user debugging the choice still finds it.
    const bool any_gpu = std::any_of(ranks.begin(), ranks.end(), [](const RankPlacement& p) { return p.on_gpu; });
    log::at(any_gpu ? log::Level::info : log::Level::debug, "{}", decision.reason);
    use = decision.use ? 1 : 0;
  }
  world->broadcast(&use, sizeof use, "the broadcast of the gradient transport");
  if (!use) return world;
  return std::make_unique<NcclComm>(std::move(world), mine.cuda_device, cuda_stream);
#else
  (void)mine;
  (void)cuda_stream;
  return world;  // no rank can be on a GPU: there is no CUDA
#endif
}

}  // namespace tandem
