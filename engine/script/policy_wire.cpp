#include "engine/script/policy_wire.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>

#include "engine/core/clock.hpp"

namespace tandem {

void WireWriter::put_string(const std::string& s) {
  put<uint64_t>(s.size());
  bytes_.append(s);
}

std::string WireReader::get_string(const char* field) {
  const uint64_t n = get<uint64_t>(field);
  need(n, field);
  std::string s = bytes_.substr(at_, static_cast<size_t>(n));
  at_ += static_cast<size_t>(n);
  return s;
}

void WireReader::expect_end(const char* what) const {
  if (at_ != bytes_.size())
    throw ScriptFailure(ScriptFailure::Garbage, std::string("the policy worker's ") + what + " has " +
                                                    std::to_string(bytes_.size() - at_) + " stray bytes at its end");
}

void WireReader::fail(const char* field) const {
  throw ScriptFailure(ScriptFailure::Garbage, std::string("a message from the policy worker process is cut short at ") +
                                                  field + " (" + std::to_string(bytes_.size()) + " bytes)");
}

void put_cluster(WireWriter& w, const PolicyCluster& c) {
  w.put<int32_t>(c.workers);
  w.put<int64_t>(c.global_batch);
  w.put<int64_t>(c.global_batch_min);
  w.put<int64_t>(c.global_batch_max);
  w.put_string(c.lr_scaling);
  w.put_vector(c.min_batch);
  w.put_vector(c.max_batch);
  w.put<uint64_t>(c.devices.size());
  for (const std::string& d : c.devices) w.put_string(d);
  w.put_string(c.params_json);
  w.put<int32_t>(c.history);
}

PolicyCluster get_cluster(WireReader& r) {
  PolicyCluster c;
  c.workers = r.get<int32_t>("cluster.workers");
  c.global_batch = r.get<int64_t>("cluster.global_batch");
  c.global_batch_min = r.get<int64_t>("cluster.global_batch_min");
  c.global_batch_max = r.get<int64_t>("cluster.global_batch_max");
  c.lr_scaling = r.get_string("cluster.lr_scaling");
  c.min_batch = r.get_vector<int64_t>("cluster.min_batch");
  c.max_batch = r.get_vector<int64_t>("cluster.max_batch");
  const uint64_t n = r.get<uint64_t>("cluster.devices");
  if (n != c.min_batch.size()) throw ScriptFailure(ScriptFailure::Garbage, "cluster.devices: one label per worker");
  for (uint64_t i = 0; i < n; ++i) c.devices.push_back(r.get_string("cluster.devices"));
  c.params_json = r.get_string("cluster.params");
  c.history = r.get<int32_t>("cluster.history");
  return c;
}

void put_answer(WireWriter& w, const PolicyAnswer& a) {
  w.put<uint8_t>(a.keep ? 1 : 0);
  w.put_vector(a.local_batch);
  w.put_vector(a.micro_batches);
  w.put<int32_t>(static_cast<int32_t>(a.sync.mode));
  w.put_vector(a.sync.group);
  w.put<int32_t>(a.sync.k);
  w.put<int32_t>(a.sync.local_steps);
  w.put<int32_t>(a.sync.staleness);
  w.put<int32_t>(a.sync.sync_every);
  w.put_string(a.reason);
  w.put<uint64_t>(a.metrics.size());
  for (const auto& [name, value] : a.metrics) {
    w.put_string(name);
    w.put<double>(value);
  }
}

PolicyAnswer get_answer(WireReader& r) {
  PolicyAnswer a;
  a.keep = r.get<uint8_t>("answer.keep") != 0;
  a.local_batch = r.get_vector<int64_t>("answer.local_batch");
  a.micro_batches = r.get_vector<int64_t>("answer.micro_batches");
  const int32_t mode = r.get<int32_t>("answer.mode");
  if (!known_sync_mode(mode))
    throw ScriptFailure(ScriptFailure::Garbage, "answer.mode " + std::to_string(mode) + " is no sync mode");
  a.sync.mode = static_cast<SyncMode>(mode);
  a.sync.group = r.get_vector<int>("answer.groups");
  a.sync.k = r.get<int32_t>("answer.k");
  a.sync.local_steps = r.get<int32_t>("answer.local_steps");
  a.sync.staleness = r.get<int32_t>("answer.staleness");
  a.sync.sync_every = r.get<int32_t>("answer.sync_every");
  a.reason = r.get_string("answer.reason");
  const uint64_t metrics = r.get<uint64_t>("answer.metrics");
  if (metrics > kMaxPolicyMetrics)
    throw ScriptFailure(ScriptFailure::Garbage, "answer.metrics: " + std::to_string(metrics) + " of them");
  for (uint64_t i = 0; i < metrics; ++i) {
    std::string name = r.get_string("answer.metrics");
    a.metrics.emplace_back(std::move(name), r.get<double>("answer.metrics"));
  }
  return a;
}

bool wait_readable(int fd, double deadline_ms) {
  for (;;) {
    const double left = deadline_ms - now_ms();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int timeout = std::isinf(left) ? -1 : static_cast<int>(std::ceil(std::min(left, 1e9)));
    const int n = ::poll(&p, 1, timeout);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the read report it
  }
}

namespace {

bool read_exact(int fd, char* out, size_t n, double deadline_ms, bool* timed_out) {
  size_t done = 0;
  while (done < n) {
    if (!wait_readable(fd, deadline_ms)) {
      if (timed_out) *timed_out = true;
      return false;
    }
    const ssize_t got = ::read(fd, out + done, n - done);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

bool send_frame(int fd, const std::string& payload) {
  if (payload.size() > kMaxFrame) return false;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::string frame(reinterpret_cast<const char*>(&n), sizeof n);
  frame += payload;
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t put = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    done += static_cast<size_t>(put);
  }
  return true;
}

bool recv_frame(int fd, std::string& payload, double deadline_ms, bool* timed_out) {
  if (timed_out) *timed_out = false;
  uint32_t n = 0;
  if (!read_exact(fd, reinterpret_cast<char*>(&n), sizeof n, deadline_ms, timed_out)) return false;
  if (n > kMaxFrame) return false;
  payload.resize(n);
  return read_exact(fd, payload.data(), n, deadline_ms, timed_out);
}

}  // namespace tandem
