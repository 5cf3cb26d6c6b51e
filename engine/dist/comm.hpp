#pragma once
// Comm: how workers talk. One interface, several transports: LocalComm (a single
// rank: every collective is a no-op, the fast path), MpiComm (OpenMPI, any number
// of ranks on one or many hosts; shared memory on one host) and NcclComm (GPU
// memory, nccl_comm.hpp).
//
// Every wait has a deadline: a collective that is not done in time aborts the
// whole job and names the missing ranks (DESIGN.md habit 8), instead of hanging a
// cluster forever. Ranks post a small report to rank 0 before each iteration's
// barrier (the stats of their previous iteration); it costs no wait on the way, and
// it is how rank 0 knows who never arrived when the barrier times out.
//
// Waiting never busy-polls a core for long: ranks often share cores (4 emulated
// workers on 2 cores), and a rank spinning in a collective would steal the CPU from
// the ranks still computing. Waits poll briefly, then sleep between polls.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem {

// A sync group's communicator (engine/train/plan.hpp SyncMode::grouped): the ranks
// of one group, host memory, every wait bounded by the world's deadline.
class GroupComm {
public:
  virtual ~GroupComm() = default;
  virtual int rank() const = 0;  // within the group
  virtual int size() const = 0;
  // Sets up what collectives of up to `floats` floats need (shared memory on one
  // host). A collective of the group without a deadline: call it where every member
  // is, as right after the split.
  virtual void prepare(size_t floats) {}
  virtual void allreduce_sum(float* data, size_t count, const char* what) = 0;
  // From the group's rank 0 to the others.
  virtual void broadcast(void* data, size_t bytes, const char* what) = 0;
};

// Point-to-point messages on a channel of their own, apart from the collectives:
// what workers and the parameter server say to each other, so only between rank 0
// and each rank (a hub; rank 0 may also talk to itself, worker to server). Safe to
// use from a second thread of a rank (the server runs beside rank 0's worker).
// Messages have a fixed size per tag and at most one per tag and rank is in flight
// (a tag goes one way at a time); every wait is bounded by the world's deadline.
class Channel {
public:
  static constexpr int kAnySource = -1;
  virtual ~Channel() = default;
  virtual void send(int to, int tag, const void* data, size_t bytes, const char* what) = 0;
  // Waits for a message of `tag` from `from` (or anyone) into data; returns the sender.
  virtual int receive(int from, int tag, void* data, size_t bytes, const char* what) = 0;
};

// What gradients cross the network as (comm.dtype): float32, or bfloat16 (half the
// bytes: each rank's part rounded once, the sum accumulated in float32 and rounded
// once for the way back).
enum class Wire { fp32, bf16 };

// Sums started now and completed later, by one thread of the caller's (the gradient
// buckets' communication thread, engine/train/sync/gradient_buckets.hpp) while the
// rank's own thread goes on with its collectives: a communicator of their own. Every
// rank starts the same sums in the same order. In-place SUM of host floats.
class AsyncAllreduce {
public:
  virtual ~AsyncAllreduce() = default;
  // Starts summing data[0, count) over all ranks; returns at once. The first `exact`
  // floats (the Control's) are summed in float32 whatever the wire.
  virtual void start(float* data, size_t count, size_t exact, const char* what) = 0;
  // Moves the started sums on; how many are not complete yet, counting a sum complete
  // once it and every one started before it are (never waits).
  virtual size_t pending(const char* what) = 0;
};

class Comm {
public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // Whether allreduce_sum(float*) and arrive_and_allreduce take device (GPU) memory
  // (NCCL) rather than host memory (every other transport). A GPU worker on a host
  // transport stages its gradients through a host buffer.
  virtual bool device_memory() const { return false; }

  // In-place SUM over all ranks. `what` names the collective in errors.
  virtual void allreduce_sum(float* data, size_t count, const char* what) = 0;
  virtual void allreduce_sum(double* data, size_t count, const char* what) = 0;

  // Starts sending `bytes` of this rank's report to rank 0, where it lands in
  // reports[rank * bytes] (rank 0 copies its own). Buffers must stay alive and
  // unchanged until finish_reports().
  virtual void post_report(const void* report, size_t bytes, void* reports) = 0;
  // Completes the posted reports: on rank 0 every report has then arrived.
  virtual void finish_reports(const char* what) = 0;
  // Whether finish_reports() would return at once (never waits).
  virtual bool reports_ready() = 0;

  // Returns once every rank has called it: where fast ranks wait for slow ones.
  virtual void barrier(const char* what) = 0;

  // Sums that overlap the rank's work (gradient buckets), where the transport gains by
  // them: messages between hosts, which wait on the network while the CPU computes.
  // Null where it does not (one rank; ranks on one host sum through shared memory,
  // which is the CPU's own work) or cannot (MPI without MPI_THREAD_MULTIPLE). A
  // collective over all ranks: every rank asks, and all get one or none.
  virtual std::unique_ptr<AsyncAllreduce> open_async_allreduce(const char* what, Wire wire) { return nullptr; }

  // Sets up what all-reducing `count` floats needs (shared memory on one host) at
  // start-up: the set-up is itself a collective, and one without a deadline, so it
  // must not wait inside the first iteration for a slow rank.
  virtual void prepare_allreduce(size_t count) {}

  // The iteration's synchronisation: waits until every rank has arrived (the time
  // waited, for slower ranks, goes to *idle_ms), then sums `data` over all ranks.
  // Keeping the wait out of the sum is what separates idle time from transfer time.
  virtual void arrive_and_allreduce(float* data, size_t count, double* idle_ms, const char* what);
  // When the last arrive_and_allreduce ended for all ranks alike (now_ms() clock),
  // where the transport knows it (ranks sharing a host: the instant the shared
  // all-reduce's last barrier opened); otherwise when it returned on this rank. The
  // emulator starts every rank's next emulated step there, so a rank that had to
  // wait for a core after the collective does not look slower.
  virtual double last_sync_end_ms() const { return sync_end_ms_; }

protected:
  double sync_end_ms_ = 0.0;

public:

  // From rank 0 to all: data of `bytes` (all ranks pass the same size).
  virtual void broadcast(void* data, size_t bytes, const char* what) = 0;

  // The ranks passing the same color form a group (ordered by rank); a collective
  // over all ranks. Transports without groups (one rank) fail.
  virtual std::unique_ptr<GroupComm> split(int color, const char* what);
  // A message channel of its own for messages of these tags, of at most max_bytes
  // (a collective over all ranks).
  virtual std::unique_ptr<Channel> open_channel(const char* what, const std::vector<int>& tags, size_t max_bytes);

  // Ends every rank of the job with this message (never returns).
  [[noreturn]] virtual void abort(const std::string& why) = 0;

  // Who is missing once a deadline passed, as the abort's message says it
  // ("missing rank(s): 1 (stuck, dead or far slower)"): of `named` ("1, 3": whom
  // this rank waited for), those that stay silent at a roll call of the ranks at
  // their deadlines; the silent ones when every named one answered (it was alive,
  // waiting for another: rank 0 for a dead rank's report, the server for a stopped
  // group); `named` when nobody is silent or the transport calls no roll; if_none
  // when there is nobody to name.
  std::string missing_text(const std::string& named, const std::string& if_none);
  // The ranks not heard from at that roll call (a collective of the ranks past a
  // deadline; at most once per process, the job aborts next); none by default.
  virtual std::vector<int> silent_ranks() { return {}; }

  void set_timeout_s(double s) { timeout_s_ = s; }
  double timeout_s() const { return timeout_s_; }

protected:
  double timeout_s_ = 300.0;
};

// Whether this process was started by mpirun (OpenMPI, PMIx or a PMI launcher).
bool launched_by_mpi();
// The world: MpiComm when started by mpirun with more than one rank, else LocalComm.
std::unique_ptr<Comm> make_world_comm(int* argc, char*** argv);

}  // namespace tandem
