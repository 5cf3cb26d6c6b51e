#pragma once
// A Channel (comm.hpp) between rank 0 and each rank of one host, through a shared
// window: what the parameter server and its workers say to each other when every
// rank shares the host, as in emulated clusters. Over MPI a 1 MB push and its reply
// cost ~10 ms on 8 ranks sharing 2 cores (a rendezvous needs both sides polling in
// turn); here a message is one copy in and one copy out, and a waiter sleeps on a
// futex until the copy is there.
//
// Layout: for each tag and each rank r a slot holding one message in flight between
// rank 0 and r (either way; r = 0 is rank 0's worker and server talking), with its
// state word (empty/full, a futex), sender, receiver and size, then the payload.
// Every message to rank 0 also rings a doorbell, so a receive from any rank sleeps
// on one word instead of polling N slots.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "engine/dist/comm.hpp"

namespace tandem {

class ShmChannel final : public Channel {
public:
  // node: every rank of `world`, all on this host; tags: the tags messages use;
  // max_bytes: the largest message. Collective and without a deadline: open it
  // where every rank is. Throws when the window cannot be had (the caller falls
  // back to MPI).
  ShmChannel(Comm& world, MPI_Comm node, const std::vector<int>& tags, size_t max_bytes);
  ~ShmChannel() override;
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;
  // Only between rank 0 and another rank (or rank 0 and itself): a hub.
  void send(int to, int tag, const void* data, size_t bytes, const char* what) override;
  int receive(int from, int tag, void* data, size_t bytes, const char* what) override;

  struct Slot;

private:
  Slot* slot(int tag, int peer, const char* what);
  // Aborts past a deadline: `who` says what did not happen; `named` is the rank
  // waited for (-1: any), narrowed by the roll call (Comm::missing_text).
  [[noreturn]] void fail_deadline(const char* what, const std::string& who, int named);

  Comm& world_;
  int rank_ = 0, size_ = 1;
  std::vector<int> tags_;
  size_t max_bytes_ = 0, slot_bytes_ = 0;
  MPI_Win window_ = MPI_WIN_NULL;
  char* base_ = nullptr;  // the doorbell, then the slots
  int next_ = 0;          // where a receive from any rank starts looking (fairness)
};

}  // namespace tandem
