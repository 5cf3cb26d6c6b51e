#pragma once
// The messages between the policy host (rank 0, the launcher) and the policy worker
// process (policy_process.hpp): length-prefixed frames over a socketpair, their
// payloads in this build's binary layout (both ends are the same build).
//
// Both ends treat the other side's bytes as untrusted: every read is bounds-checked
// and a frame is at most kMaxFrame bytes, so a worker that writes garbage before it
// dies is a failed call, never an overflow in rank 0.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/script/policy_sandbox.hpp"

namespace tandem {

enum class PolicyOp : uint8_t { load = 1, init, step, observe, save, restore };

// The largest frame either side accepts: stats of thousands of workers and a policy
// state in a checkpoint fit; anything larger is a broken or hostile peer.
constexpr size_t kMaxFrame = 64u << 20;
// The shared stats region (policy_process.hpp): 65536 workers' stats.
constexpr size_t kStatsRegionBytes = 16u << 20;

class WireWriter {
public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_string(const std::string& s);
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(v.size());
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  const std::string& bytes() const { return bytes_; }

private:
  std::string bytes_;
};

// Reads what a WireWriter wrote; any read past the end, or a count that cannot fit
// the bytes left, throws ScriptFailure(Garbage) naming the field.
class WireReader {
public:
  explicit WireReader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  T get(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    need(sizeof v, field);
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string get_string(const char* field);
  template <typename T>
  std::vector<T> get_vector(const char* field) {
    const uint64_t n = get<uint64_t>(field);
    if (n > (bytes_.size() - at_) / sizeof(T)) fail(field);
    std::vector<T> v(static_cast<size_t>(n));
    std::memcpy(v.data(), bytes_.data() + at_, v.size() * sizeof(T));
    at_ += v.size() * sizeof(T);
    return v;
  }
  void expect_end(const char* what) const;

private:
  void need(size_t n, const char* field) const {
    if (n > bytes_.size() - at_) fail(field);
  }
  [[noreturn]] void fail(const char* field) const;
  const std::string& bytes_;
  size_t at_ = 0;
};

void put_cluster(WireWriter& w, const PolicyCluster& c);
PolicyCluster get_cluster(WireReader& r);
void put_answer(WireWriter& w, const PolicyAnswer& a);
PolicyAnswer get_answer(WireReader& r);

// One frame on fd: false when the peer has gone (EOF, a broken pipe) or the frame is
// malformed. recv_frame waits until deadline_ms (now_ms()'s clock; +inf: for ever)
// and sets *timed_out when it passed.
// Waits until fd is readable (or closed, or in error: the read then says which) or
// deadline_ms (now_ms()'s clock; infinity: none) passes; false on the deadline.
bool wait_readable(int fd, double deadline_ms);
bool send_frame(int fd, const std::string& payload);
bool recv_frame(int fd, std::string& payload, double deadline_ms, bool* timed_out = nullptr);

}  // namespace tandem
