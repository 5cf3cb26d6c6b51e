#include "engine/dist/mpi_comm.hpp"

#include "engine/core/log.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>

#include <sched.h>
#include <sys/prctl.h>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/dist/abort_note.hpp"
#include "engine/dist/mpi_check.hpp"
#include "engine/dist/mpi_async_allreduce.hpp"
#include "engine/dist/mpi_scatter_gather.hpp"
#include "engine/dist/shm_channel.hpp"

namespace tandem {

namespace {

// Polling. For the first kYieldMs a waiting rank polls and yields the core between
// polls (sched_yield): a collective among ranks that are all present finishes in
// that window, and a rank that still has compute to do gets the core whenever it
// wants it. Past that the wait is for a slower rank, and the waiter sleeps between
// polls, backing off to the cap, so it costs no CPU at all.
constexpr double kYieldMs = 0.5;
constexpr int kFirstSleepUs = 20, kMaxSleepUs = 100;

}  // namespace

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var)) return true;
  return false;
}

MpiComm::MpiComm(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  // Several threads call MPI: the parameter server's thread beside rank 0's worker.
  if (!initialized) {
    int provided = 0;
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", "start-up");
    thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  } else {
    int provided = 0;
    MPI_Query_thread(&provided);
    thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  }
  // Errors come back as codes, so they can be reported with what was being done.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // Waits sleep in short steps; the kernel's default 50 us timer slack would
  // stretch each of them, and with them every collective's latency.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // One host (as in every emulated cluster): gradients are summed through shared
  // memory. TANDEM_SHM_ALLREDUCE=0 turns it off, for comparison.
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_);
  int node_size = 0;
  MPI_Comm_size(node_, &node_size);
  const char* shm = std::getenv("TANDEM_SHM_ALLREDUCE");
  if (node_size == size_ && !(shm && std::string(shm) == "0")) shm_ = std::make_unique<ShmAllreduce>(node_);
  // Ranks on several hosts (MPI's view: separate daemons, as under a hostfile): the
  // window could not reach them, so everything goes over MPI. Said once, by rank 0,
  // before the logger is set up, so that a user (and tests/integration/multihost)
  // can see which path a run took.
  if (node_size != size_ && rank_ == 0)
    log::info("ranks on several hosts ({} of {} on rank 0's): gradients go over MPI, not shared memory",
                 node_size, size_);
  if (node_size != size_) set_up_two_levels(node_size);
}

void MpiComm::set_up_two_levels(int node_size) {
  // Two levels where some host runs several ranks: they sum on the host through
  // shared memory, one rank per host (its node rank 0) sums across hosts, and hands
  // the result back through the host's window. Every rank takes part in the setup
  // (collectives over the world), so every rank agrees on the way.
  int node_rank = 0;
  MPI_Comm_rank(node_, &node_rank);
  int leader = node_rank == 0 ? 1 : 0, hosts = 0;
  check_mpi(MPI_Allreduce(&leader, &hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce", "start-up");
  const char* off = std::getenv("TANDEM_TWO_LEVEL_ALLREDUCE");
  two_level_ = hosts < size_ && !(off && std::string(off) == "0");
  if (!two_level_) return;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, rank_, &leaders_), "MPI_Comm_split",
            "start-up");
  if (leaders_ != MPI_COMM_NULL) MPI_Comm_set_errhandler(leaders_, MPI_ERRORS_RETURN);
  if (node_size > 1) {
    node_shm_ = std::make_unique<ShmAllreduce>(node_);
    node_world_ranks_.resize(static_cast<size_t>(node_size));
    MPI_Allgather(&rank_, 1, MPI_INT, node_world_ranks_.data(), 1, MPI_INT, node_);
  }
  if (rank_ == 0)
    log::info("gradients are summed in two levels: the ranks of a host through its shared memory, then one rank "
              "per host across the {} hosts", hosts);
}

MpiComm::~MpiComm() {
  shm_.reset();
  node_shm_.reset();
  if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string MpiComm::missing_ranks(std::vector<MPI_Request>& requests, const std::vector<int>& peers) {
  std::string missing;
  auto add = [&](std::vector<MPI_Request>& reqs, const std::vector<int>& who) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      int done = 0;
      if (reqs[i] != MPI_REQUEST_NULL) MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
      if (reqs[i] != MPI_REQUEST_NULL && !done && who[i] >= 0)
        missing += (missing.empty() ? "" : ", ") + std::to_string(who[i]);
    }
  };
  add(requests, peers);
  // Rank 0's posted reports tell who never reached this iteration's collective.
  if (missing.empty() && rank_ == 0) add(report_requests_, report_peers_);
  return missing;
}

std::unique_ptr<AsyncAllreduce> MpiComm::open_async_allreduce(const char* what, Wire wire) {
  // One host sums through shared memory (the CPU's own work, nothing to hide behind).
  if (size_ == 1 || shm_ || !thread_multiple_) return nullptr;
  if (two_level_) {
    // A window and communicators of the buckets' own: the rank's thread keeps its own.
    std::unique_ptr<AsyncAllreduce> across;
    if (leaders_ != MPI_COMM_NULL) {
      MPI_Comm dup = MPI_COMM_NULL;
      check_mpi(MPI_Comm_dup(leaders_, &dup), "MPI_Comm_dup", what);
      MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
      across = make_mpi_async_allreduce(dup, wire);
    }
    MPI_Comm host = MPI_COMM_NULL;
    std::unique_ptr<ShmAllreduce> window;
    ShmAllreduce::Wait wait;
    if (node_shm_) {
      check_mpi(MPI_Comm_dup(node_, &host), "MPI_Comm_dup", what);
      window = std::make_unique<ShmAllreduce>(host);
      wait = window_wait(*window, node_world_ranks_, "a gradient bucket's sum on its host");
    }
    return make_two_level_async_allreduce(host, std::move(window), std::move(wait), std::move(across), timeout_s_);
  }
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup", what);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  return make_mpi_async_allreduce(dup, wire);
}

// The roll call: every rank past a deadline sends a word to every other and listens
// for theirs for a moment; those not heard from are silent. Every deadline's abort
// calls it (Comm::missing_text), so the ranks that only waited for the
// culprit answer it. The ranks' deadlines differ by how far apart they reached their
// waits, which the moment allows for; a rank later still is "far slower", as the
// message says.
std::vector<int> MpiComm::silent_ranks() {
  // Once per process: rank 0's parameter-server thread and its training thread can
  // pass their deadlines together, and the second must wait for the first's answer.
  std::call_once(roll_call_once_, [this] { hold_roll_call(); });
  return silent_;
}

void MpiComm::hold_roll_call() {
  constexpr int kTag = 0x7a11;
  static const char kHere = 1;
  const double listen_ms = std::min(timeout_s_, 2.0) * 1000.0;
  std::vector<MPI_Request> heard(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<MPI_Request> said(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  // Left to the receives still posted when the job aborts next (a late word must not
  // land in freed memory): never freed, once per job at most.
  char* words = new char[static_cast<size_t>(size_)];
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Irecv(&words[r], 1, MPI_BYTE, r, kTag, MPI_COMM_WORLD, &heard[r]);
    MPI_Isend(&kHere, 1, MPI_BYTE, r, kTag, MPI_COMM_WORLD, &said[r]);
  }
  const double until = now_ms() + listen_ms;
  for (bool all = false; !all && now_ms() < until;) {
    all = true;
    for (MPI_Request& h : heard) {  // one at a time: MPI_Testall frees none until all are done
      int done = 0;
      if (h != MPI_REQUEST_NULL) MPI_Test(&h, &done, MPI_STATUS_IGNORE);
      all = all && h == MPI_REQUEST_NULL;
    }
    if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int r = 0; r < size_; ++r)
    if (heard[r] != MPI_REQUEST_NULL) silent_.push_back(r);
  // The job aborts next: the requests left open go with it.
}

void MpiComm::fail_deadline(const std::string& named, const char* if_none, const char* what) {
  abort(fmt::format("{} did not complete within {:.0f} s (collective_timeout_s); {}", what, timeout_s_,
                    missing_text(named, if_none)));
}

void MpiComm::poll_until(const std::function<bool()>& done, std::vector<MPI_Request>& requests,
                         const std::vector<int>& peers, const char* what) {
  const double start = now_ms(), deadline = start + timeout_s_ * 1000.0;
  int sleep_us = kFirstSleepUs;
  for (;;) {
    if (done()) return;
    const double now = now_ms();
    if (now > deadline) fail_deadline(missing_ranks(requests, peers), "rank 0 names the missing ranks", what);
    if (now - start < kYieldMs) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, kMaxSleepUs);
  }
}

void MpiComm::wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers, const char* what) {
  poll_until(
      [&] {
        int done = 0;
        check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
                  "MPI_Testall", what);
        return done != 0;
      },
      requests, peers, what);
}

void MpiComm::allreduce(void* data, size_t count, MPI_Datatype type, const char* what, MPI_Comm comm) {
  int members = 1;
  MPI_Comm_size(comm, &members);
  if (type == MPI_FLOAT && ScatterGatherSum::fits(count, members)) {
    // mpi_scatter_gather.hpp says why not MPI_Iallreduce.
    scatter_gather_.sum(static_cast<float*>(data), count, comm, what, [&](MPI_Request& r, const char* step) {
      requests_.assign(1, r);
      peers_.assign(1, -1);
      wait_all(requests_, peers_, step);
    });
    return;
  }
  int type_size = 0;
  MPI_Type_size(type, &type_size);
  auto* bytes = static_cast<char*>(data);
  // MPI counts are ints: large buffers go in chunks.
  for (size_t done = 0; done < count;) {
    const size_t n = std::min<size_t>(count - done, INT_MAX);
    requests_.assign(1, MPI_REQUEST_NULL);
    peers_.assign(1, -1);
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, bytes + done * static_cast<size_t>(type_size), static_cast<int>(n), type,
                             MPI_SUM, comm, &requests_[0]),
              "MPI_Iallreduce", what);
    wait_all(requests_, peers_, what);
    done += n;
  }
}

void MpiComm::allreduce_sum(float* data, size_t count, const char* what) {
  // Small buffers gain nothing from shared memory: two barriers cost more than one message round.
  constexpr size_t kShmMinFloats = 4096;
  if (shm_ && count >= kShmMinFloats) {
    shm_->sum(data, count, shm_wait(what));
    return;
  }
  if (two_level_ && count >= kShmMinFloats) {
    // The host's sum on every rank of it, the hosts' sum on their first ranks, and
    // that back to the host's others: the bytes across hosts are one rank's.
    if (node_shm_) node_shm_->sum(data, count, node_wait(what));
    if (leaders_ != MPI_COMM_NULL) allreduce(data, count, MPI_FLOAT, what, leaders_);
    // The host's sum above made the window room for count floats: the broadcast fits.
    if (node_shm_) node_shm_->broadcast(data, count * sizeof(float), node_wait(what));
    return;
  }
  allreduce(data, count, MPI_FLOAT, what);
}

void MpiComm::prepare_allreduce(size_t count) {
  if (shm_) shm_->reserve(count);
  if (node_shm_) node_shm_->reserve(count);
}

ShmAllreduce::Wait MpiComm::node_wait(const char* what) { return window_wait(*node_shm_, node_world_ranks_, what); }

ShmAllreduce::Wait MpiComm::shm_wait(const char* what) { return window_wait(*shm_, {}, what); }

ShmAllreduce::Wait MpiComm::window_wait(ShmAllreduce& shm, std::vector<int> names, const char* what) {
  return [this, &shm, names = std::move(names), what](const std::function<bool()>& open) {
    const double deadline = now_ms() + timeout_s_ * 1000.0;
    // open() sleeps until the barrier opens or for a millisecond: no yielding or
    // sleeping here. MPI_Iprobe keeps the posted reports moving meanwhile.
    while (!open()) {
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      if (now_ms() > deadline) fail_deadline(shm.missing_ranks(names), "missing rank(s): none found", what);
    }
  };
}

void MpiComm::arrive_and_allreduce(float* data, size_t count, double* idle_ms, const char* what) {
  if (!shm_) {
    Comm::arrive_and_allreduce(data, count, idle_ms, what);
    return;
  }
  // The shared all-reduce's first barrier is the arrival: every rank is there.
  shm_->sum(data, count, shm_wait(what), idle_ms);
  sync_end_ms_ = shm_->last_open_ms();
}
void MpiComm::allreduce_sum(double* data, size_t count, const char* what) {
  allreduce(data, count, MPI_DOUBLE, what);
}

void MpiComm::post_report(const void* report, size_t bytes, void* reports) {
  constexpr int kReportTag = 11;
  const int n = static_cast<int>(bytes);
  if (rank_ == 0) {
    auto* out = static_cast<char*>(reports);
    std::memcpy(out, report, bytes);
    report_requests_.assign(static_cast<size_t>(size_ - 1), MPI_REQUEST_NULL);
    report_peers_.resize(report_requests_.size());
    for (int r = 1; r < size_; ++r) {
      report_peers_[static_cast<size_t>(r - 1)] = r;
      check_mpi(MPI_Irecv(out + static_cast<size_t>(r) * bytes, n, MPI_BYTE, r, kReportTag, MPI_COMM_WORLD,
                          &report_requests_[static_cast<size_t>(r - 1)]),
                "MPI_Irecv", "posting the report receives");
    }
  } else {
    report_requests_.assign(1, MPI_REQUEST_NULL);
    report_peers_.assign(1, 0);
    check_mpi(MPI_Isend(report, n, MPI_BYTE, 0, kReportTag, MPI_COMM_WORLD, &report_requests_[0]), "MPI_Isend",
              "sending the report");
    // One test pushes the small (eager) message out now, so it waits in rank 0's
    // queue rather than for this rank's next MPI call, after the all-reduce.
    int sent = 0;
    check_mpi(MPI_Test(&report_requests_[0], &sent, MPI_STATUS_IGNORE), "MPI_Test", "sending the report");
  }
}

bool MpiComm::reports_ready() {
  if (report_requests_.empty()) return true;
  int done = 0;
  check_mpi(MPI_Testall(static_cast<int>(report_requests_.size()), report_requests_.data(), &done,
                        MPI_STATUSES_IGNORE),
            "MPI_Testall", "checking the stats reports");
  return done != 0;
}

void MpiComm::finish_reports(const char* what) {
  wait_all(report_requests_, report_peers_, what);
  report_requests_.clear();
}

void MpiComm::barrier(const char* what) {
  // On one host the shared window's barrier: waiters sleep on a futex and wake the
  // moment the last rank arrives, where MPI's message rounds need every rank
  // scheduled in turn (ranks outnumber cores in emulated clusters).
  if (shm_) {
    shm_->barrier(shm_wait(what));
    return;
  }
  // Across hosts: each rank tells every other that it has arrived (empty messages)
  // and waits for theirs, so at the deadline every waiter names exactly the ranks
  // whose arrival has not come. An MPI_Ibarrier cannot say who is missing, and only
  // rank 0's posted reports could, which are complete by the time ranks meet here.
  // N-1 messages per rank instead of log N rounds: nothing for tens of ranks.
  constexpr int kArrivalTag = 12;
  const size_t peers = static_cast<size_t>(size_ - 1);
  requests_.assign(2 * peers, MPI_REQUEST_NULL);
  peers_.assign(2 * peers, -1);  // a send not yet gone names no one: its receive does
  for (int r = 0, i = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const size_t in = static_cast<size_t>(i++);
    peers_[in] = r;
    check_mpi(MPI_Irecv(nullptr, 0, MPI_BYTE, r, kArrivalTag, MPI_COMM_WORLD, &requests_[in]), "MPI_Irecv", what);
    check_mpi(MPI_Isend(nullptr, 0, MPI_BYTE, r, kArrivalTag, MPI_COMM_WORLD, &requests_[peers + in]), "MPI_Isend",
              what);
  }
  wait_all(requests_, peers_, what);
}

void MpiComm::broadcast(void* data, size_t bytes, const char* what) {
  // Large buffers (weights at a meeting of the relaxed modes) through the shared
  // window where it already has room; small ones gain nothing from it.
  constexpr size_t kShmMinBytes = 16384;
  if (shm_ && bytes >= kShmMinBytes && bytes <= shm_->capacity_bytes()) {
    shm_->broadcast(data, bytes, shm_wait(what));
    return;
  }
  TANDEM_CHECK(bytes <= static_cast<size_t>(INT_MAX), "broadcast of ", bytes, " bytes is too large");
  requests_.assign(1, MPI_REQUEST_NULL);
  peers_.assign(1, rank_ == 0 ? -1 : 0);
  check_mpi(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD, &requests_[0]), "MPI_Ibcast", what);
  wait_all(requests_, peers_, what);
}

void MpiComm::abort(const std::string& why) {
  log::critical("aborting the job: {}", why);
  log::flush();
  note_abort(rank_, why);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::exit(3);
}

}  // namespace tandem

namespace tandem {

namespace {

// Waits for one request with the same yield-then-sleep polling as the collectives,
// touching no MpiComm state: group and channel waits may run on another thread.
// Past the deadline, on_deadline() says what is missing and the job ends.
void poll_request(MPI_Request& request, MPI_Status* status, double timeout_s, const char* what,
                  const std::function<void()>& on_deadline) {
  const double start = now_ms(), deadline = start + timeout_s * 1000.0;
  int sleep_us = kFirstSleepUs;
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, status), "MPI_Test", what);
    if (done) return;
    const double now = now_ms();
    if (now > deadline) on_deadline();
    if (now - start < kYieldMs) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, kMaxSleepUs);
  }
}

// A sync group. On one host (every rank sharing it, as in emulated clusters) its
// all-reduce and broadcast go through a shared window of the group's own, as the
// world's do: a group of 7 ranks on 2 cores spent ~20 ms a step in MPI's message
// rounds for 1 MB, the window takes well under one.
class MpiGroupComm final : public GroupComm {
public:
  MpiGroupComm(MpiComm& world, MPI_Comm comm, int color, int host_ranks)
      : world_(world), comm_(comm), color_(color) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // The members' world ranks, to name them at a deadline (a local call).
    MPI_Group mine = MPI_GROUP_NULL, everyone = MPI_GROUP_NULL;
    MPI_Comm_group(comm_, &mine);
    MPI_Comm_group(MPI_COMM_WORLD, &everyone);
    std::vector<int> in_group(static_cast<size_t>(size_));
    std::iota(in_group.begin(), in_group.end(), 0);
    members_.resize(static_cast<size_t>(size_));
    MPI_Group_translate_ranks(mine, size_, in_group.data(), everyone, members_.data());
    MPI_Group_free(&mine);
    MPI_Group_free(&everyone);
    // Collective over the group, whose members have all just passed split's barrier.
    if (host_ranks > 0 && size_ > 1) shm_ = std::make_unique<ShmAllreduce>(comm_, host_ranks);
  }
  ~MpiGroupComm() override {
    shm_.reset();
    MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void prepare(size_t floats) override {
    if (shm_) shm_->reserve(floats);
  }
  void allreduce_sum(float* data, size_t count, const char* what) override {
    if (size_ == 1) return;
    if (shm_ && count * sizeof(float) <= shm_->capacity_bytes()) {
      shm_->sum(data, count, shm_wait(what));
      return;
    }
    if (ScatterGatherSum::fits(count, size_)) {  // mpi_scatter_gather.hpp
      scatter_gather_.sum(data, count, comm_, what, [&](MPI_Request& r, const char* step) { wait(r, step); });
      return;
    }
    for (size_t done = 0; done < count;) {
      const size_t n = std::min<size_t>(count - done, INT_MAX);
      MPI_Request r = MPI_REQUEST_NULL;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data + done, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_, &r),
                "MPI_Iallreduce", what);
      wait(r, what);
      done += n;
    }
  }
  void broadcast(void* data, size_t bytes, const char* what) override {
    if (size_ == 1) return;
    if (shm_ && bytes <= shm_->capacity_bytes()) {
      shm_->broadcast(data, bytes, shm_wait(what));
      return;
    }
    TANDEM_CHECK(bytes <= static_cast<size_t>(INT_MAX), "broadcast of ", bytes, " bytes in ", what, " is too large");
    MPI_Request r = MPI_REQUEST_NULL;
    check_mpi(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, 0, comm_, &r), "MPI_Ibcast", what);
    wait(r, what);
  }

private:
  [[noreturn]] void fail(const char* what, const std::string& named) {
    world_.abort(fmt::format("{} in sync group {} did not complete within {:.0f} s (collective_timeout_s): {}", what,
                             color_, world_.timeout_s(),
                             world_.missing_text(named, "a rank of the group is stuck, dead or far slower")));
  }
  void wait(MPI_Request& r, const char* what) {
    poll_request(r, MPI_STATUS_IGNORE, world_.timeout_s(), what, [&] { fail(what, ""); });
  }
  // The shared window's barriers sleep on a futex (a millisecond at a time) until
  // they open; between naps the deadline is checked.
  ShmAllreduce::Wait shm_wait(const char* what) {
    return [this, what](const std::function<bool()>& open) {
      const double deadline = now_ms() + world_.timeout_s() * 1000.0;
      while (!open())
        if (now_ms() > deadline) fail(what, shm_->missing_ranks(members_));
    };
  }
  MpiComm& world_;
  MPI_Comm comm_;
  int color_, rank_ = 0, size_ = 1;
  std::vector<int> members_;  // world rank of each group rank
  std::unique_ptr<ShmAllreduce> shm_;
  ScatterGatherSum scatter_gather_;  // large float32 sums' buffers, kept between steps
};

class MpiChannel final : public Channel {
public:
  MpiChannel(MpiComm& world, MPI_Comm comm) : world_(world), comm_(comm) {}
  ~MpiChannel() override { MPI_Comm_free(&comm_); }
  void send(int to, int tag, const void* data, size_t bytes, const char* what) override {
    TANDEM_CHECK(bytes <= static_cast<size_t>(INT_MAX), "message of ", bytes, " bytes in ", what, " is too large");
    MPI_Request r = MPI_REQUEST_NULL;
    check_mpi(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, to, tag, comm_, &r), "MPI_Isend", what);
    poll_request(r, MPI_STATUS_IGNORE, world_.timeout_s(), what, [&] {
      world_.abort(fmt::format("{}: rank {} did not take the message within {:.0f} s (collective_timeout_s); {}",
                               what, to, world_.timeout_s(), world_.missing_text(std::to_string(to), "")));
    });
  }
  int receive(int from, int tag, void* data, size_t bytes, const char* what) override {
    TANDEM_CHECK(bytes <= static_cast<size_t>(INT_MAX), "message of ", bytes, " bytes in ", what, " is too large");
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Status status;
    check_mpi(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, from == kAnySource ? MPI_ANY_SOURCE : from, tag,
                        comm_, &r),
              "MPI_Irecv", what);
    poll_request(r, &status, world_.timeout_s(), what, [&] {
      world_.abort(fmt::format("{}: nothing came from {} within {:.0f} s (collective_timeout_s); {}", what,
                               from == kAnySource ? std::string("any rank") : "rank " + std::to_string(from),
                               world_.timeout_s(),
                               world_.missing_text(from == kAnySource ? "" : std::to_string(from),
                                                   "the sender is stuck, dead or far slower")));
    });
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    TANDEM_CHECK(static_cast<size_t>(got) == bytes, what, ": a message of ", got, " bytes where ", bytes,
                 " were expected (ranks running different tandem builds or experiments?)");
    return status.MPI_SOURCE;
  }

private:
  MpiComm& world_;
  MPI_Comm comm_;
};

}  // namespace

std::unique_ptr<GroupComm> MpiComm::split(int color, const char* what) {
  // MPI_Comm_split cannot be bounded: a barrier with a deadline first makes sure
  // every rank is there, so the split itself cannot hang on a missing one.
  barrier(what);
  MPI_Comm group = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, rank_, &group), "MPI_Comm_split", what);
  MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
  return std::make_unique<MpiGroupComm>(*this, group, color, shm_ ? size_ : 0);
}

std::unique_ptr<Channel> MpiComm::open_channel(const char* what, const std::vector<int>& tags, size_t max_bytes) {
  TANDEM_CHECK_HINT(thread_multiple_, "use an MPI built with thread support (Debian's OpenMPI has it)",
                    "MPI does not provide MPI_THREAD_MULTIPLE, which the parameter server's thread needs (", what, ")");
  barrier(what);
  // Every rank on this host: through shared memory (TANDEM_SHM_CHANNEL=0 keeps MPI,
  // for comparison).
  const char* env = std::getenv("TANDEM_SHM_CHANNEL");
  if (shm_ && !(env && std::string(env) == "0")) {
    try {
      return std::make_unique<ShmChannel>(*this, node_, tags, max_bytes);
    } catch (const std::exception& e) {
      if (rank_ == 0) log::warn("{}: the shared-memory channel failed ({}); using MPI messages", what, e.what());
    }
  }
  MPI_Comm channel = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &channel), "MPI_Comm_dup", what);
  MPI_Comm_set_errhandler(channel, MPI_ERRORS_RETURN);
  return std::make_unique<MpiChannel>(*this, channel);
}

}  // namespace tandem
