#include "engine/dist/mpi_async_allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "engine/core/clock.hpp"
#include "engine/core/error.hpp"
#include "engine/dist/mpi_check.hpp"
#include "engine/dist/mpi_scatter_gather.hpp"
#include "kernels/cpu/bf16_wire.hpp"

namespace tandem {

namespace {

class MpiAsyncAllreduce final : public AsyncAllreduce {
public:
  MpiAsyncAllreduce(MPI_Comm comm, Wire wire) : comm_(comm), wire_(wire) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // Collectives on a communicator must start in the same order on every rank. The
    // starts come in the buckets' order everywhere, but a sum's second step (bf16, or
    // a large float32 sum: mpi_scatter_gather.hpp) starts when its first is seen done,
    // which differs between ranks: those go on a communicator of their own, in the
    // buckets' order too (advance()).
    check_mpi(MPI_Comm_dup(comm_, &gather_comm_), "MPI_Comm_dup", "the gradient buckets' gathers");
  }
  // Sums still in flight (a step that failed) complete or die with the job: freeing
  // a communicator leaves its pending operations to finish normally.
  ~MpiAsyncAllreduce() override {
    if (gather_comm_ != MPI_COMM_NULL) MPI_Comm_free(&gather_comm_);
    MPI_Comm_free(&comm_);
  }

  void start(float* data, size_t count, size_t exact, const char* what) override {
    Sum& s = pending_.emplace_back();
    s.data = data;
    s.count = count;
    if (wire_ == Wire::fp32) {
      if (ScatterGatherSum::fits(count, size_)) {
        if (spare_.empty()) spare_.push_back(std::make_unique<ScatterGatherSum>());
        s.scatter_gather = std::move(spare_.back());
        spare_.pop_back();
        s.requests.push_back(MPI_REQUEST_NULL);
        s.scatter_gather->exchange(data, count, comm_, &s.requests.back(), what);
        s.phase = Phase::exchanging;
      } else {
        allreduce(data, count, s, what);
      }
      return;
    }
    exact = std::min(exact, count);
    if (exact > 0) allreduce(data, exact, s, what);
    if (count > exact) exchange(s, exact, what);
  }

  size_t pending(const char* what) override {
    // A sum's gather may start only once every sum before it has started its own.
    bool in_order = true;
    for (Sum& s : pending_) {
      advance(s, in_order, what);
      if (s.phase == Phase::exchanging) in_order = false;
    }
    while (!pending_.empty() && pending_.front().phase == Phase::done) pending_.pop_front();
    return pending_.size();
  }

private:
  enum class Phase { summing, exchanging, gathering, done };
  struct Sum {
    float* data = nullptr;
    size_t count = 0;
    Phase phase = Phase::summing;
    std::vector<MPI_Request> requests;  // of the phase in flight (and the exact part's)
    // bf16: from `first` on, the parts rank j sums ([displs[j], +counts[j])), what this
    // rank sends, receives and gets back.
    size_t first = 0;
    std::vector<int> counts, displs, recv_counts, recv_displs;
    std::vector<uint16_t> send, recv, result;
    std::unique_ptr<ScatterGatherSum> scatter_gather;  // a large float32 sum's two steps
  };

  // An in-place float32 sum, in chunks of at most INT_MAX floats (MPI counts are ints).
  void allreduce(float* data, size_t count, Sum& s, const char* what) {
    for (size_t done = 0; done < count;) {
      const size_t n = std::min<size_t>(count - done, INT_MAX);
      s.requests.push_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data + done, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_,
                               &s.requests.back()),
                "MPI_Iallreduce", what);
      done += n;
    }
  }

  // bf16, step 1: every rank's part j, rounded, to rank j.
  void exchange(Sum& s, size_t first, const char* what) {
    const size_t n = s.count - first, N = static_cast<size_t>(size_);
    TANDEM_CHECK_HINT(n <= static_cast<size_t>(INT_MAX), "set comm.bucket_mb lower",
                      "a gradient bucket of ", n, " floats is too large for comm.dtype = 'bf16' (at most ", INT_MAX,
                      ")");
    s.first = first;
    split_parts(n, size_, s.counts, s.displs);
    const int mine = s.counts[static_cast<size_t>(rank_)];
    s.recv_counts.assign(N, mine);
    s.recv_displs.resize(N);
    for (size_t j = 0; j < N; ++j) s.recv_displs[j] = static_cast<int>(j) * mine;
    s.send.resize(n);
    s.recv.resize(static_cast<size_t>(mine) * N);
    cpu::to_bf16(s.data + first, n, s.send.data());
    s.requests.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Ialltoallv(s.send.data(), s.counts.data(), s.displs.data(), MPI_UINT16_T, s.recv.data(),
                             s.recv_counts.data(), s.recv_displs.data(), MPI_UINT16_T, comm_, &s.requests.back()),
              "MPI_Ialltoallv", what);
    s.phase = Phase::exchanging;
  }

  // bf16, step 2: this rank's part summed in float32 (rank order), rounded once, to all.
  void gather(Sum& s, const char* what) {
    const size_t N = static_cast<size_t>(size_), mine = static_cast<size_t>(s.counts[static_cast<size_t>(rank_)]);
    std::vector<float> acc(mine, 0.0f);
    for (size_t j = 0; j < N; ++j) cpu::add_bf16(s.recv.data() + j * mine, mine, acc.data());
    s.send.resize(mine);  // the sent parts are gone: the buffer carries this rank's sum
    cpu::to_bf16(acc.data(), mine, s.send.data());
    s.result.resize(s.count - s.first);
    s.requests.push_back(MPI_REQUEST_NULL);
    check_mpi(MPI_Iallgatherv(s.send.data(), static_cast<int>(mine), MPI_UINT16_T, s.result.data(), s.counts.data(),
                              s.displs.data(), MPI_UINT16_T, gather_comm_, &s.requests.back()),
              "MPI_Iallgatherv", what);
    s.phase = Phase::gathering;
  }

  // may_gather: every sum before this one has started its gather.
  void advance(Sum& s, bool may_gather, const char* what) {
    if (s.phase == Phase::done || (s.phase == Phase::exchanging && !may_gather)) return;
    int done = 0;
    statuses_.resize(s.requests.size());
    const int rc = MPI_Testall(static_cast<int>(s.requests.size()), s.requests.data(), &done, statuses_.data());
    // One of them failed: its own code says why.
    if (rc == MPI_ERR_IN_STATUS)
      for (const MPI_Status& st : statuses_)
        if (st.MPI_ERROR != MPI_ERR_PENDING) check_mpi(st.MPI_ERROR, phase_call(s.phase), what);
    check_mpi(rc, "MPI_Testall", what);
    if (!done) return;
    s.requests.clear();
    switch (s.phase) {
      case Phase::summing:  // float32, or the exact part alone
        s.phase = Phase::done;
        break;
      case Phase::exchanging:
        if (wire_ == Wire::fp32) {
          s.requests.push_back(MPI_REQUEST_NULL);
          s.scatter_gather->gather(gather_comm_, &s.requests.back(), what);
          s.phase = Phase::gathering;
        } else {
          gather(s, what);
        }
        break;
      case Phase::gathering:
        if (wire_ == Wire::fp32) {  // gathered in place; its buffers go to the next sum
          s.phase = Phase::done;
          spare_.push_back(std::move(s.scatter_gather));
          break;
        }
        cpu::from_bf16(s.result.data(), s.result.size(), s.data + s.first);
        s.phase = Phase::done;
        std::vector<uint16_t>().swap(s.send);  // the buffers go with the sum
        std::vector<uint16_t>().swap(s.recv);
        std::vector<uint16_t>().swap(s.result);
        break;
      case Phase::done:
        break;
    }
  }

  static const char* phase_call(Phase p) {
    return p == Phase::exchanging   ? ScatterGatherSum::kExchangeCall
           : p == Phase::gathering ? ScatterGatherSum::kGatherCall
                                   : "MPI_Iallreduce";
  }

  MPI_Comm comm_, gather_comm_ = MPI_COMM_NULL;
  Wire wire_;
  std::vector<MPI_Status> statuses_;
  int rank_ = 0, size_ = 1;
  std::deque<Sum> pending_;  // started and not yet complete (in order), oldest first
  std::vector<std::unique_ptr<ScatterGatherSum>> spare_;  // done sums' buffers, for the next
};

class TwoLevelAsyncAllreduce final : public AsyncAllreduce {
public:
  TwoLevelAsyncAllreduce(MPI_Comm host, std::unique_ptr<ShmAllreduce> window, ShmAllreduce::Wait wait,
                         std::unique_ptr<AsyncAllreduce> across, double timeout_s)
      : host_(host), window_(std::move(window)), wait_(std::move(wait)), across_(std::move(across)),
        timeout_s_(timeout_s) {}
  ~TwoLevelAsyncAllreduce() override {
    window_.reset();
    if (host_ != MPI_COMM_NULL) MPI_Comm_free(&host_);
  }

  void start(float* data, size_t count, size_t exact, const char* what) override {
    if (window_) window_->sum(data, count, wait_);
    if (across_) {
      across_->start(data, count, exact, what);
      const double deadline = now_ms() + timeout_s_ * 1000.0;
      int sleep_us = 20;
      while (across_->pending(what) > 0) {
        TANDEM_CHECK_HINT(now_ms() < deadline, "see which host died or stopped in the ranks' logs, or raise "
                                               "collective_timeout_s if the link is that slow",
                          what, ": the sum across hosts was not done within ", timeout_s_,
                          " s (collective_timeout_s)");
        std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
        sleep_us = std::min(sleep_us * 2, 1000);
      }
    }
    if (window_) window_->broadcast(data, count * sizeof(float), wait_);
  }
  size_t pending(const char*) override { return 0; }  // every sum is done in start()

private:
  MPI_Comm host_;
  std::unique_ptr<ShmAllreduce> window_;
  ShmAllreduce::Wait wait_;
  std::unique_ptr<AsyncAllreduce> across_;
  double timeout_s_;
};

}  // namespace

std::unique_ptr<AsyncAllreduce> make_mpi_async_allreduce(MPI_Comm comm, Wire wire) {
  return std::make_unique<MpiAsyncAllreduce>(comm, wire);
}

std::unique_ptr<AsyncAllreduce> make_two_level_async_allreduce(MPI_Comm host, std::unique_ptr<ShmAllreduce> window,
                                                               ShmAllreduce::Wait wait,
                                                               std::unique_ptr<AsyncAllreduce> across,
                                                               double timeout_s) {
  return std::make_unique<TwoLevelAsyncAllreduce>(host, std::move(window), std::move(wait), std::move(across),
                                                  timeout_s);
}

}  // namespace tandem
