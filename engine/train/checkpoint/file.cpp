#include "engine/train/checkpoint/file.hpp"

#include <spdlog/spdlog.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'E', 'M', 'C', 'K'};
constexpr size_t kPrefix = sizeof kMagic + 2 * sizeof(uint32_t);  // magic, format, header length
constexpr const char* kPrefixName = "ckpt-";
constexpr const char* kSuffix = ".tdm";

std::string system_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

// The whole file through one descriptor, so it can be fsync'ed.
class AtomicFile {
public:
  explicit AtomicFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      TANDEM_FAIL_HINT("check that the run directory exists and is writable", system_error("cannot create", path_));
  }
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* data, size_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        TANDEM_FAIL_HINT("free disk space (or move the run directory: out_dir=...) and resume from the last "
                         "checkpoint", system_error("cannot write the checkpoint", path_));
      crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(p), static_cast<z_size_t>(n));
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }
  uLong crc() const { return crc_; }
  void sync_and_close() {
    if (::fsync(fd_) != 0)
      TANDEM_FAIL_HINT("free disk space and resume from the last checkpoint", system_error("cannot flush", path_));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) TANDEM_FAIL(system_error("cannot close", path_));
  }

private:
  std::string path_;
  int fd_ = -1;
  uLong crc_ = crc32_z(0L, Z_NULL, 0);
};

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename is done; only its durability across a power cut is at stake
  ::fsync(fd);
  ::close(fd);
}

json plan_json(const Plan& p) {
  return {{"local_batch", p.local_batch}, {"mode", sync_mode_name(p.sync.mode)}, {"group", p.sync.group},
          {"k", p.sync.k},  {"local_steps", p.sync.local_steps},   {"staleness", p.sync.staleness},
          {"sync_every", p.sync.sync_every}};
}

Plan plan_from(const json& j) {
  Plan p;
  p.local_batch = j.at("local_batch").get<std::vector<int64_t>>();
  if (!parse_sync_mode(j.at("mode").get<std::string>(), &p.sync.mode)) throw std::runtime_error("unknown sync mode");
  p.sync.group = j.at("group").get<std::vector<int>>();
  p.sync.k = j.at("k").get<int>();
  p.sync.local_steps = j.at("local_steps").get<int>();
  p.sync.staleness = j.at("staleness").get<int>();
  p.sync.sync_every = j.at("sync_every").get<int>();
  return p;
}

// The model's name and size from its summary's first line, for messages.
std::string model_headline(const std::string& summary) { return summary.substr(0, summary.find('\n')); }

[[noreturn]] void reject(const std::string& path, const std::string& check) {
  throw CheckpointRejected(path + ": " + check);
}

}  // namespace

std::string checkpoint_dir(const std::string& run_dir) { return run_dir + "/checkpoints"; }

std::string checkpoint_path(const std::string& dir, int64_t iteration) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%010lld%s", kPrefixName, static_cast<long long>(iteration), kSuffix);
  return dir + "/" + name;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefixName, 0) == 0 && name.size() > std::strlen(kSuffix) &&
        name.compare(name.size() - std::strlen(kSuffix), std::string::npos, kSuffix) == 0)
      out.push_back(e.path().string());
  }
  // Zero-padded iterations: the names sort by iteration.
  std::sort(out.rbegin(), out.rend());
  return out;
}

void write_checkpoint(const std::string& dir, const CheckpointState& s, int64_t keep,
                      const std::function<void()>& midway) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    TANDEM_FAIL_HINT("check free disk space and permissions of the run directory",
                     "cannot create the checkpoint directory '", dir, "': ", ec.message());
  json h = {{"iteration", s.iteration},
            {"world", s.world},
            {"seed", s.seed},
            {"experiment", s.experiment},
            {"model", s.model},
            {"param_count", s.param_count},
            {"velocity_count", s.velocity.size()},
            {"layer_state_count", s.layer_state.size()},
            {"stats_bytes", s.pending_stats.size()},
            {"window_bytes", s.policy_window.size()},
            {"cluster_bytes", s.cluster_stats.size()},
            {"stats_record", s.stats_record},
            {"plan", plan_json(s.plan)},
            {"policy", s.policy},
            {"policy_state", s.policy_state},
            {"train_ms", s.train_ms},
            {"samples", s.samples},
            {"version", s.version},
            {"test_accuracy", s.test_accuracy},
            {"best_test_accuracy", s.best_test_accuracy},
            {"time_to_target_s", s.time_to_target_s ? json(*s.time_to_target_s) : json(nullptr)}};
  TANDEM_CHECK(s.params.size() == static_cast<size_t>(s.param_count), "checkpoint of ", s.param_count,
               " parameters given ", s.params.size(), " values (a bug in tandem)");
  const std::string header = h.dump();
  const std::string final_path = checkpoint_path(dir, s.iteration);
  const std::string tmp = dir + "/.writing-" + fs::path(final_path).filename().string();
  try {
    AtomicFile f(tmp);
    const uint32_t format = kCheckpointFormat, header_bytes = static_cast<uint32_t>(header.size());
    f.write(kMagic, sizeof kMagic);
    f.write(&format, sizeof format);
    f.write(&header_bytes, sizeof header_bytes);
    f.write(header.data(), header.size());
    const size_t half = s.params.size() / 2;
    f.write(s.params.data(), half * sizeof(float));
    if (midway) midway();
    f.write(s.params.data() + half, (s.params.size() - half) * sizeof(float));
    f.write(s.velocity.data(), s.velocity.size() * sizeof(float));
    f.write(s.layer_state.data(), s.layer_state.size() * sizeof(double));
    f.write(s.pending_stats.data(), s.pending_stats.size());
    f.write(s.policy_window.data(), s.policy_window.size());
    f.write(s.cluster_stats.data(), s.cluster_stats.size());
    const uint32_t crc = static_cast<uint32_t>(f.crc());
    f.write(&crc, sizeof crc);
    f.sync_and_close();
  } catch (...) {
    ::unlink(tmp.c_str());  // a torn temporary must not fill the disk further
    throw;
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0)
    TANDEM_FAIL_HINT("check permissions of the run directory", system_error("cannot rename " + tmp + " to", final_path));
  sync_dir(dir);
  const std::vector<std::string> all = list_checkpoints(dir);
  for (size_t i = static_cast<size_t>(std::max<int64_t>(keep, 1)); i < all.size(); ++i) fs::remove(all[i], ec);
}

CheckpointState read_checkpoint(const std::string& path, const std::string& model) {
  std::ifstream in(path, std::ios::binary);
  if (!in) reject(path, "cannot be opened");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < kPrefix)
    reject(path, "truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the header");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) reject(path, "not a tandem checkpoint (wrong magic)");
  uint32_t format = 0, header_bytes = 0;
  std::memcpy(&format, bytes.data() + sizeof kMagic, sizeof format);
  std::memcpy(&header_bytes, bytes.data() + sizeof kMagic + sizeof format, sizeof header_bytes);
  if (format != kCheckpointFormat)
    reject(path, "format version " + std::to_string(format) + ", this build reads version " +
                     std::to_string(kCheckpointFormat));
  if (bytes.size() < kPrefix + header_bytes + sizeof(uint32_t))
    reject(path, "truncated: " + std::to_string(bytes.size()) + " bytes, the header alone needs " +
                     std::to_string(kPrefix + header_bytes + sizeof(uint32_t)));
  json h;
  CheckpointState s;
  size_t payload = 0;
  try {
    h = json::parse(bytes.begin() + kPrefix, bytes.begin() + kPrefix + header_bytes);
    s.param_count = h.at("param_count").get<int64_t>();
    payload = static_cast<size_t>(s.param_count) * sizeof(float) + h.at("velocity_count").get<size_t>() * sizeof(float) +
              h.at("layer_state_count").get<size_t>() * sizeof(double) + h.at("stats_bytes").get<size_t>() +
              h.at("window_bytes").get<size_t>() + h.at("cluster_bytes").get<size_t>();
  } catch (const std::exception& e) {
    reject(path, std::string("corrupted header (") + e.what() + ")");
  }
  const size_t expected = kPrefix + header_bytes + payload + sizeof(uint32_t);
  if (bytes.size() != expected)
    reject(path, (bytes.size() < expected ? "truncated: " : "wrong length: ") + std::to_string(bytes.size()) +
                     " bytes, the header says " + std::to_string(expected));
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + expected - sizeof stored, sizeof stored);
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), expected - sizeof stored));
  if (crc != stored) reject(path, "checksum mismatch: the file is corrupted");
  try {
    s.iteration = h.at("iteration").get<int64_t>();
    s.world = h.at("world").get<int>();
    s.seed = h.at("seed").get<uint64_t>();
    s.experiment = h.at("experiment").get<std::string>();
    s.model = h.at("model").get<std::string>();
    s.plan = plan_from(h.at("plan"));
    s.policy = h.at("policy").get<std::string>();
    s.policy_state = h.at("policy_state").get<std::string>();
    s.train_ms = h.at("train_ms").get<double>();
    s.samples = h.at("samples").get<int64_t>();
    s.version = h.at("version").get<int64_t>();
    s.test_accuracy = h.at("test_accuracy").get<double>();
    s.best_test_accuracy = h.at("best_test_accuracy").get<double>();
    if (!h.at("time_to_target_s").is_null()) s.time_to_target_s = h.at("time_to_target_s").get<double>();
  } catch (const std::exception& e) {
    reject(path, std::string("incomplete header (") + e.what() + ")");
  }
  if (!model.empty() && s.model != model)
    reject(path, "written for another model: " + model_headline(s.model) + "; this experiment builds " +
                     model_headline(model));
  const char* p = bytes.data() + kPrefix + header_bytes;
  s.params.resize(static_cast<size_t>(s.param_count));
  std::memcpy(s.params.data(), p, s.params.size() * sizeof(float));
  p += s.params.size() * sizeof(float);
  s.velocity.resize(h.at("velocity_count").get<size_t>());
  std::memcpy(s.velocity.data(), p, s.velocity.size() * sizeof(float));
  p += s.velocity.size() * sizeof(float);
  s.layer_state.resize(h.at("layer_state_count").get<size_t>());
  std::memcpy(s.layer_state.data(), p, s.layer_state.size() * sizeof(double));
  p += s.layer_state.size() * sizeof(double);
  s.pending_stats.assign(p, h.at("stats_bytes").get<size_t>());
  p += s.pending_stats.size();
  s.stats_record = h.at("stats_record").get<int64_t>();
  s.policy_window.assign(p, h.at("window_bytes").get<size_t>());
  p += s.policy_window.size();
  s.cluster_stats.assign(p, h.at("cluster_bytes").get<size_t>());
  return s;
}

std::optional<LoadedCheckpoint> load_latest_checkpoint(const std::string& dir, const std::string& model,
                                                       std::vector<std::string>* why) {
  for (const std::string& path : list_checkpoints(dir)) {
    try {
      return LoadedCheckpoint{read_checkpoint(path, model), path};
    } catch (const CheckpointRejected& e) {
      spdlog::warn("checkpoint rejected: {}; trying the one before it", e.what());
      if (why) why->push_back(e.what());
    }
  }
  return std::nullopt;
}

}  // namespace tandem
