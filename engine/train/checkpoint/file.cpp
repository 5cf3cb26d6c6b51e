#include "engine/train/checkpoint/file.hpp"

#include "engine/core/log.hpp"
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "engine/core/error.hpp"
#include "engine/core/write_all.hpp"

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
    if (write_all(fd_, data, bytes) != bytes)
      TANDEM_FAIL_HINT("free disk space (or move the run directory: out_dir=...) and resume from the last "
                       "checkpoint", system_error("cannot write the checkpoint", path_));
    // Not for an empty write: crc32_z of a null buffer is zlib's initial value.
    if (bytes > 0) crc_ = crc32_z(crc_, static_cast<const Bytef*>(data), static_cast<z_size_t>(bytes));
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
  json j = {{"local_batch", p.local_batch}, {"mode", sync_mode_name(p.sync.mode)}, {"group", p.sync.group},
            {"k", p.sync.k},  {"local_steps", p.sync.local_steps},   {"staleness", p.sync.staleness},
            {"sync_every", p.sync.sync_every}};
  if (!p.micro_batches.empty()) j["micro_batches"] = p.micro_batches;  // absent: none (older files too)
  return j;
}

// Bytes from a file, fit for a message on a terminal: what is not printable ASCII
// (a control character, an escape sequence, a broken UTF-8 sequence) as \xNN, and
// short.
std::string printable(const std::string& raw, size_t max_chars = 200) {
  std::string out;
  for (const char c : raw.substr(0, max_chars)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return raw.size() > max_chars ? out + "..." : out;
}

// How two model summaries differ, for messages: the first line that does (the first
// names the model and its size; the others its layers), each side quoted.
std::string model_difference(const std::string& written, const std::string& built) {
  auto lines = [](const std::string& s) {
    std::vector<std::string> out;
    for (size_t at = 0; at <= s.size();) {
      const size_t end = std::min(s.find('\n', at), s.size());
      out.push_back(s.substr(at, end - at));
      at = end + 1;
    }
    return out;
  };
  const std::vector<std::string> w = lines(written), b = lines(built);
  size_t i = 0;
  while (i < w.size() && i < b.size() && w[i] == b[i]) ++i;
  return (i == 0 ? std::string() : "summary line " + std::to_string(i + 1) + ": ") + "'" +
         printable(i < w.size() ? w[i] : "") + "'; this experiment builds '" + printable(i < b.size() ? b[i] : "") +
         "'";
}

// Counters and times a run can reach (iterations, samples, milliseconds, a global
// batch): at most 2^53, where a double still holds every integer, as the trace and
// the summary hold them. A header past it was altered, and its sums cannot overflow.
constexpr int64_t kMaxCount = int64_t{1} << 53;
// A pending stats record is one WorkerStats (a few hundred bytes) of some build.
constexpr int64_t kMaxRecord = int64_t{1} << 16;
constexpr size_t kShownChars = 40;  // of a bad value, in a message

constexpr const char* kDamaged =
    "the file was damaged or altered after it was written: --resume falls back to the checkpoint before it; "
    "move this one aside to keep it out of the set, or start afresh without --resume";
constexpr const char* kOtherExperiment =
    "resume with the experiment (model and optimizer) the run was started with, or start afresh without --resume";

// The header's sections, in the file's order, each a count of values of one width.
struct Section {
  const char* key;  // the header field with its count
  size_t width;     // bytes per value
  size_t count = 0, offset = 0;
};

// A JSON value for a message: short, printable whatever bytes it holds, and never
// dumped when nested (dump() recurses: a header of 100000 '[' would end the stack).
std::string shown(const json& v) {
  if (v.is_structured())
    for (const json& e : v)
      if (e.is_structured()) return v.is_array() ? "a nested JSON array" : "a nested JSON object";
  return printable(v.dump(-1, ' ', true, json::error_handler_t::replace), kShownChars);
}

// One read_checkpoint: the file's bytes, its header, and the checks in the order the
// file is met (see file.hpp). Each rejection names the file, the field, its value and
// what was expected; nothing is allocated from a number that was not checked.
class CheckpointReader {
public:
  CheckpointReader(std::string path, const CheckpointExpect& expect) : path_(std::move(path)), expect_(expect) {}

  CheckpointState read() {
    load();
    check_prefix();
    parse_header();
    measure_sections();
    check_checksum();
    read_fields();
    check_against_model();
    copy_sections();
    return std::move(s_);
  }

private:
  [[noreturn]] void reject(const std::string& check, const char* hint = kDamaged) const {
    throw CheckpointRejected(path_ + ": " + check, "read_checkpoint (engine/train/checkpoint/file.cpp)", hint);
  }

  void load() {
    const char* readable = "check that the file exists and this user may read it";
    std::error_code ec;
    if (!fs::is_regular_file(path_, ec)) reject("cannot be opened: not a regular file", readable);
    const uintmax_t size = fs::file_size(path_, ec);
    std::ifstream in(path_, std::ios::binary);
    if (ec || !in) reject(std::string("cannot be opened: ") + std::strerror(errno), readable);
    try {
      bytes_.resize(static_cast<size_t>(size));
    } catch (const std::exception&) {  // a file far larger than any checkpoint of this run
      reject("cannot be read: its " + std::to_string(size) + " bytes do not fit in memory");
    }
    in.read(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
    if (in.gcount() != static_cast<std::streamsize>(bytes_.size()))
      reject("cannot be read (" + std::to_string(in.gcount()) + " of " + std::to_string(size) + " bytes): " +
                 std::strerror(errno),
             readable);
  }

  void check_prefix() {
    if (bytes_.size() < kPrefix + sizeof(uint32_t))
      reject("truncated: " + std::to_string(bytes_.size()) + " bytes, shorter than the header");
    if (std::memcmp(bytes_.data(), kMagic, sizeof kMagic) != 0) reject("not a tandem checkpoint (wrong magic)");
    uint32_t format = 0;
    std::memcpy(&format, bytes_.data() + sizeof kMagic, sizeof format);
    std::memcpy(&header_bytes_, bytes_.data() + sizeof kMagic + sizeof format, sizeof header_bytes_);
    if (format != kCheckpointFormat)
      reject("format version " + std::to_string(format) + ", this build reads version " +
                 std::to_string(kCheckpointFormat),
             "resume with the tandem build that wrote it, or start afresh without --resume");
    // Subtracted from a length known to hold the prefix and the checksum, rather than
    // added to a number from the file: no sum to wrap.
    if (header_bytes_ > bytes_.size() - kPrefix - sizeof(uint32_t))
      reject("truncated: " + std::to_string(bytes_.size()) + " bytes, the header alone needs " +
             std::to_string(kPrefix + size_t{header_bytes_} + sizeof(uint32_t)));
  }

  void parse_header() {
    try {
      h_ = json::parse(bytes_.begin() + kPrefix, bytes_.begin() + kPrefix + header_bytes_);
    } catch (const std::exception& e) {  // a parse error, or a header too large for memory
      reject("corrupted header (" + printable(e.what()) + ")");
    }
    if (!h_.is_object()) reject("corrupted header (" + shown(h_) + " is not a JSON object)");
  }

  // Every section's count against the bytes still left for it, one at a time, so
  // that no product or sum can overflow; the sections must then fill the file
  // exactly. The message lists every count: which one is wrong, the file cannot say.
  void measure_sections() {
    const size_t between = bytes_.size() - kPrefix - header_bytes_ - sizeof(uint32_t);
    size_t at = kPrefix + header_bytes_, left = between;
    bool over = false;
    std::string counts;
    for (Section& sec : sections_) {
      const int64_t n = integer(h_, sec.key, sec.key, 0, std::numeric_limits<int64_t>::max());
      counts += std::string(counts.empty() ? "" : ", ") + sec.key + " " + std::to_string(n) + " x " +
                std::to_string(sec.width) + " bytes";
      over = over || static_cast<uint64_t>(n) > left / sec.width;
      if (over) continue;
      sec.count = static_cast<size_t>(n);
      sec.offset = at;
      at += sec.count * sec.width;
      left -= sec.count * sec.width;
    }
    if (over)
      reject("truncated (or its header altered): the sections (" + counts + ") need more than the " +
             std::to_string(between) + " bytes between the header and the checksum");
    if (left != 0)
      reject("wrong length: the sections (" + counts + ") take " + std::to_string(between - left) + " of the " +
             std::to_string(between) + " bytes between the header and the checksum");
  }

  void check_checksum() {
    const size_t body = bytes_.size() - sizeof(uint32_t);
    uint32_t stored = 0;
    std::memcpy(&stored, bytes_.data() + body, sizeof stored);
    const uint32_t crc =
        static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes_.data()), body));
    if (crc != stored) reject("checksum mismatch: the file is corrupted");
  }

  const json& field(const json& obj, const char* key, const std::string& name) const {
    const auto it = obj.find(key);
    if (it == obj.end()) reject("incomplete header: field '" + name + "' is missing");
    return *it;
  }

  // An integer from lo to hi: a JSON integer, not a fraction, a string or a number
  // past int64, so that nothing is rounded, truncated or wrapped on the way in.
  int64_t integer(const json& obj, const char* key, const std::string& name, int64_t lo, int64_t hi) const {
    return as_integer(field(obj, key, name), name, lo, hi);
  }
  int64_t as_integer(const json& v, const std::string& name, int64_t lo, int64_t hi) const {
    const bool fits = v.is_number_integer() &&
                      (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(hi));
    const int64_t x = fits ? v.get<int64_t>() : 0;
    if (!fits || x < lo || x > hi)
      reject("header field '" + name + "' is " + shown(v) + ", not an integer from " + std::to_string(lo) + " to " +
             std::to_string(hi));
    return x;
  }

  double number(const json& obj, const char* key, const std::string& name, double lo, double hi) const {
    const json& v = field(obj, key, name);
    const double x = v.is_number() ? v.get<double>() : std::nan("");
    if (!(x >= lo && x <= hi))  // NaN fails too
      reject("header field '" + name + "' is " + shown(v) + ", not a number from " + shown(json(lo)) + " to " +
             shown(json(hi)));
    return x;
  }

  std::string text(const char* key) const {
    const json& v = field(h_, key, key);
    if (!v.is_string()) reject("header field '" + std::string(key) + "' is " + shown(v) + ", not a string");
    return v.get<std::string>();
  }

  uint64_t seed() const {
    const json& v = field(h_, "seed", "seed");
    if (!v.is_number_unsigned())
      reject("header field 'seed' is " + shown(v) + ", not an integer from 0 to 18446744073709551615");
    return v.get<uint64_t>();
  }

  void read_fields() {
    s_.iteration = integer(h_, "iteration", "iteration", 0, kMaxCount);
    s_.world = static_cast<int>(integer(h_, "world", "world", 1, std::numeric_limits<int>::max()));
    s_.seed = seed();
    s_.experiment = text("experiment");
    s_.model = text("model");
    s_.param_count = static_cast<int64_t>(sections_[0].count);
    s_.stats_record = integer(h_, "stats_record", "stats_record", 0, kMaxRecord);
    check_pending_stats();
    s_.plan = read_plan();
    s_.policy = text("policy");
    s_.policy_state = text("policy_state");
    s_.train_ms = number(h_, "train_ms", "train_ms", 0.0, static_cast<double>(kMaxCount));
    s_.samples = integer(h_, "samples", "samples", 0, kMaxCount);
    if (h_.contains("samples_drawn")) {
      s_.samples_drawn = integer(h_, "samples_drawn", "samples_drawn", 0, kMaxCount);
      s_.sample_cursor = integer(h_, "sample_cursor", "sample_cursor", 0, kMaxCount);
    }
    if (h_.contains("noise_scale")) s_.noise_scale = number(h_, "noise_scale", "noise_scale", 0.0, 1e30);
    if (h_.contains("noise_state") && h_["noise_state"].is_array() && h_["noise_state"].size() == 4)
      for (const auto& v : h_["noise_state"]) s_.noise_state.push_back(v.is_number() ? v.get<double>() : 0.0);
    s_.version = integer(h_, "version", "version", 0, kMaxCount);
    if (h_.contains("optimizer_steps"))
      s_.optimizer_steps = integer(h_, "optimizer_steps", "optimizer_steps", 0, kMaxCount);
    if (h_.contains("skipped_steps")) s_.skipped_steps = integer(h_, "skipped_steps", "skipped_steps", 0, kMaxCount);
    s_.test_accuracy = number(h_, "test_accuracy", "test_accuracy", 0.0, 1.0);
    s_.best_test_accuracy = number(h_, "best_test_accuracy", "best_test_accuracy", 0.0, 1.0);
    if (!field(h_, "time_to_target_s", "time_to_target_s").is_null())
      s_.time_to_target_s = number(h_, "time_to_target_s", "time_to_target_s", 0.0, static_cast<double>(kMaxCount));
  }

  // Pending stats are one record per worker of the run that wrote them, or none.
  void check_pending_stats() const {
    const size_t bytes = sections_[3].count, record = static_cast<size_t>(s_.stats_record);
    if (bytes != 0 && (record == 0 || bytes % record != 0 || bytes / record != static_cast<size_t>(s_.world)))
      reject("header field 'stats_bytes' is " + std::to_string(bytes) + ", not one record of stats_record " +
             std::to_string(record) + " bytes for each of the " + std::to_string(s_.world) + " workers");
  }

  std::vector<int64_t> local_batches(const json& plan) const {
    const json& v = field(plan, "local_batch", "plan.local_batch");
    if (!v.is_array() || v.size() != static_cast<size_t>(s_.world))
      reject("header field 'plan.local_batch' is " + shown(v) + ", not one local batch for each of the " +
             std::to_string(s_.world) + " workers");
    std::vector<int64_t> out;
    int64_t sum = 0;
    for (size_t r = 0; r < v.size(); ++r) {
      const std::string name = "plan.local_batch[" + std::to_string(r) + "]";
      // Each at most what is left of kMaxCount: the sum cannot overflow.
      out.push_back(as_integer(v[r], name, 0, kMaxCount - sum));
      sum += out.back();
    }
    return out;
  }

  int sync_field(const json& plan, const char* key) const {
    return static_cast<int>(integer(plan, key, std::string("plan.") + key, std::numeric_limits<int>::min(),
                                    std::numeric_limits<int>::max()));
  }

  // Types and ranges here; whether the plan is one a run of `world` workers can train
  // with is Plan::validate's to say, as for any plan.
  Plan read_plan() const {
    const json& j = field(h_, "plan", "plan");
    if (!j.is_object()) reject("header field 'plan' is " + shown(j) + ", not a JSON object");
    Plan p;
    p.local_batch = local_batches(j);
    const json& mode = field(j, "mode", "plan.mode");
    if (!mode.is_string() || !parse_sync_mode(mode.get<std::string>(), &p.sync.mode))
      reject("header field 'plan.mode' is " + shown(mode) + ", not one of \"bsp\", \"grouped\", \"ksync\", \"local\"");
    const json& group = field(j, "group", "plan.group");
    if (!group.is_array() || (!group.empty() && group.size() != static_cast<size_t>(s_.world)))
      reject("header field 'plan.group' is " + shown(group) + ", neither empty nor one group number for each of the " +
             std::to_string(s_.world) + " workers");
    for (size_t r = 0; r < group.size(); ++r)
      p.sync.group.push_back(
          static_cast<int>(as_integer(group[r], "plan.group[" + std::to_string(r) + "]", 0, s_.world - 1)));
    p.sync.k = sync_field(j, "k");
    p.sync.local_steps = sync_field(j, "local_steps");
    p.sync.staleness = sync_field(j, "staleness");
    p.sync.sync_every = sync_field(j, "sync_every");
    if (j.contains("micro_batches")) {
      const json& micro = j["micro_batches"];
      if (!micro.is_array() || micro.size() != static_cast<size_t>(s_.world))
        reject("header field 'plan.micro_batches' is " + shown(micro) + ", not one count for each of the " +
               std::to_string(s_.world) + " workers");
      for (size_t r = 0; r < micro.size(); ++r)
        p.micro_batches.push_back(
            as_integer(micro[r], "plan.micro_batches[" + std::to_string(r) + "]", 1, kMaxMicroBatches));
    }
    try {
      p.validate(s_.world, p.global_batch());
    } catch (const Error& e) {
      reject("header field 'plan' holds a plan no run of " + std::to_string(s_.world) + " workers trains with: " +
             e.what_failed());
    }
    return p;
  }

  void check_against_model() const {
    const Section &params = sections_[0], &velocity = sections_[1], &layer_state = sections_[2];
    if (!expect_.model.empty() && s_.model != expect_.model)
      reject("written for another model: " + model_difference(s_.model, expect_.model), kOtherExperiment);
    // The same model summary and other sizes: the file was altered, not mistaken.
    const char* hint = expect_.model.empty() ? kOtherExperiment : kDamaged;
    if (expect_.param_count && params.count != static_cast<uint64_t>(*expect_.param_count))
      reject("header field 'param_count' is " + std::to_string(params.count) + ", this experiment's model has " +
                 std::to_string(*expect_.param_count) + " parameters",
             hint);
    if (velocity.count != 0 && velocity.count != params.count && velocity.count / 2 != params.count)
      reject("header field 'velocity_count' is " + std::to_string(velocity.count) +
             ", not 0 (plain SGD), one momentum value per parameter or two moments per parameter (AdamW) "
             "(param_count " + std::to_string(params.count) + ")");
    if (velocity.count / 2 == params.count && velocity.count % 2 != 0)
      reject("header field 'velocity_count' is " + std::to_string(velocity.count) + ", odd for two moments of " +
             std::to_string(params.count) + " parameters");
    if (expect_.layer_state_count && layer_state.count != static_cast<uint64_t>(*expect_.layer_state_count))
      reject("header field 'layer_state_count' is " + std::to_string(layer_state.count) +
                 ", this experiment's model keeps " + std::to_string(*expect_.layer_state_count) +
                 " values of layer state (batch-norm running statistics)",
             hint);
  }

  template <typename T>
  std::vector<T> values(const Section& sec) const {
    std::vector<T> out(sec.count);
    if (!out.empty()) std::memcpy(out.data(), bytes_.data() + sec.offset, sec.count * sizeof(T));
    return out;
  }
  std::string raw(const Section& sec) const { return bytes_.substr(sec.offset, sec.count); }

  // Only now, every count checked against the file and the model, is anything copied.
  void copy_sections() {
    static_assert(sizeof(float) == 4 && sizeof(double) == 8, "the file holds float32 and float64 values");
    s_.params = values<float>(sections_[0]);
    s_.velocity = values<float>(sections_[1]);
    s_.layer_state = values<double>(sections_[2]);
    s_.pending_stats = raw(sections_[3]);
    s_.policy_window = raw(sections_[4]);
    s_.cluster_stats = raw(sections_[5]);
  }

  std::string path_;
  const CheckpointExpect& expect_;
  std::string bytes_;
  uint32_t header_bytes_ = 0;
  json h_;
  Section sections_[6] = {{"param_count", sizeof(float)},  {"velocity_count", sizeof(float)},
                          {"layer_state_count", sizeof(double)}, {"stats_bytes", 1},
                          {"window_bytes", 1},            {"cluster_bytes", 1}};
  CheckpointState s_;
};

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
            {"noise_scale", s.noise_scale},
            {"noise_state", s.noise_state},
            {"version", s.version},
            {"optimizer_steps", s.optimizer_steps},
            {"skipped_steps", s.skipped_steps},
            {"test_accuracy", s.test_accuracy},
            {"best_test_accuracy", s.best_test_accuracy},
            {"time_to_target_s", s.time_to_target_s ? json(*s.time_to_target_s) : json(nullptr)}};
  TANDEM_CHECK(s.params.size() == static_cast<size_t>(s.param_count), "checkpoint of ", s.param_count,
               " parameters given ", s.params.size(), " values (a bug in tandem)");
  if (s.samples_drawn >= 0 && s.sample_cursor >= 0) {
    h["samples_drawn"] = s.samples_drawn;
    h["sample_cursor"] = s.sample_cursor;
  }
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

CheckpointState read_checkpoint(const std::string& path, const CheckpointExpect& expect) {
  try {
    return CheckpointReader(path, expect).read();
  } catch (const std::bad_alloc&) {  // the sections are copied out of the file's bytes: twice its size
    throw CheckpointRejected(path + ": does not fit in memory", "read_checkpoint (engine/train/checkpoint/file.cpp)",
                             "free memory, or resume on a machine with more");
  }
}

CheckpointState read_checkpoint(const std::string& path, const std::string& model) {
  CheckpointExpect expect;
  expect.model = model;
  return read_checkpoint(path, expect);
}

std::optional<LoadedCheckpoint> load_latest_checkpoint(const std::string& dir, const CheckpointExpect& expect,
                                                       std::vector<std::string>* why) {
  for (const std::string& path : list_checkpoints(dir)) {
    try {
      return LoadedCheckpoint{read_checkpoint(path, expect), path};
    } catch (const CheckpointRejected& e) {
      log::warn("checkpoint rejected: {} (what to do: {}); trying the one before it", e.what_failed(), e.hint());
      if (why) why->push_back(e.what_failed());
    }
  }
  return std::nullopt;
}

}  // namespace tandem
