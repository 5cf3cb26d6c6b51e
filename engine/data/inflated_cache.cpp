#include "engine/data/inflated_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "engine/core/mapped_file.hpp"
#include "engine/core/write_all.hpp"

namespace tandem {

namespace fs = std::filesystem;

namespace {

// A temporary file older than this was left by a writer that died.
constexpr double kAbandonedTmpS = 600.0;
// A small file inflates in well under a millisecond: caching it would only leave
// files behind (tests write many small data files under temporary names).
constexpr size_t kMinCachedBytes = size_t(1) << 20;
const char kTmpMark[] = ".tmp.";

// FNV-1a: a name that stays the same across builds and standard libraries.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// "<file name>-<path hash>-": the prefix every cached copy of this source shares.
std::string entry_prefix(const fs::path& source) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(source.string())));
  return source.filename().string() + "-" + hash + "-";
}

std::string stamp(const struct timespec& t) { return std::to_string(t.tv_sec) + "." + std::to_string(t.tv_nsec); }

// Copies of the same source under other names (it changed since), and temporary files
// a dead writer left: removed. A rank that still maps an old copy keeps its pages.
void remove_stale(const fs::path& entry) {
  // The name is entry_prefix(source) and a key with no '-' in it.
  const std::string name = entry.filename().string();
  const std::string prefix = name.substr(0, name.rfind('-') + 1);
  std::error_code ec;
  fs::directory_iterator it(entry.parent_path(), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const fs::path old = it->path();
    const std::string other = old.filename().string();
    if (old == entry || other.rfind(prefix, 0) != 0) continue;
    struct stat st {};
    const bool tmp = other.find(kTmpMark) != std::string::npos;
    if (tmp && (::stat(old.c_str(), &st) != 0 || std::difftime(std::time(nullptr), st.st_mtime) < kAbandonedTmpS))
      continue;  // another writer's, still being written
    std::error_code ignored;
    fs::remove(old, ignored);
  }
}

}  // namespace

std::string inflated_cache_dir() {
  const char* own = std::getenv("TANDEM_CACHE_DIR");
  if (own && *own) return std::string(own) == "off" ? "" : std::string(own) + "/inflated";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/tandem/inflated";
  const char* home = std::getenv("HOME");
  if (home && *home == '/') return std::string(home) + "/.cache/tandem/inflated";
  return "";
}

std::string inflated_entry(const std::string& gz_path) {
  const std::string dir = inflated_cache_dir();
  if (dir.empty()) return "";
  std::error_code ec;
  const fs::path source = fs::absolute(gz_path, ec);
  struct stat st {};
  if (ec || ::stat(source.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return dir + "/" + entry_prefix(source) + std::to_string(st.st_size) + "_" + std::to_string(st.st_ino) + "_" +
         stamp(st.st_mtim) + "_" + stamp(st.st_ctim);
}

SharedBytes map_inflated(const std::string& entry) {
  // No entry yet is the usual miss: said without an exception.
  if (entry.empty() || ::access(entry.c_str(), R_OK) != 0) return {};
  try {
    auto file = std::make_shared<MappedFile>(entry, "inflated cache file '" + entry + "'", "");
    if (!file->data()) return {};  // empty
    return {file->data(), static_cast<size_t>(file->size()), file};
  } catch (const std::exception&) {
    return {};  // removed meanwhile, or not mappable: inflated again
  }
}

void store_inflated(const std::string& entry, const uint8_t* bytes, size_t size) {
  if (entry.empty() || size < kMinCachedBytes) return;
  const fs::path path(entry);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return;
  remove_stale(path);
  // mkstemp: a name no other writer (another rank, another host sharing the folder)
  // holds, created afresh, never through a link someone left at that name.
  std::string tmp = entry + kTmpMark + "XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return;
  // On disk before it has its name, so that a crash cannot leave a named file of the
  // right size with zeros in it.
  bool ok = write_all(fd, bytes, size) == size && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  // link, not rename: an entry that exists already stays (it is whole, and other ranks
  // may have it mapped); this copy is then simply not needed.
  if (ok) (void)::link(tmp.c_str(), entry.c_str());
  ::unlink(tmp.c_str());
}

void drop_inflated(const std::string& entry) {
  if (!entry.empty()) ::unlink(entry.c_str());
}

}  // namespace tandem
