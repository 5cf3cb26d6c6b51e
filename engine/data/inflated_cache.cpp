#include "engine/data/inflated_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tandem {

namespace fs = std::filesystem;

namespace {

// FNV-1a: a name that stays the same across builds and standard libraries.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// "<file name>-<path hash>-" : the prefix every cached copy of this source shares.
std::string entry_prefix(const fs::path& source) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(source.string())));
  return source.filename().string() + "-" + hash + "-";
}

// The cache file for gz_path as it is now (its size and modification time in the
// name), or "" where the cache is off or the source cannot be looked at.
std::string entry_path(const std::string& gz_path) {
  const std::string dir = inflated_cache_dir();
  if (dir.empty()) return "";
  std::error_code ec;
  const fs::path source = fs::absolute(gz_path, ec);
  struct stat st {};
  if (ec || ::stat(source.c_str(), &st) != 0) return "";
  return dir + "/" + entry_prefix(source) + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec);
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

SharedBytes cached_inflated(const std::string& gz_path) {
  const std::string path = entry_path(gz_path);
  if (path.empty()) return {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  void* map = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && st.st_size > 0)
    map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) return {};
  const size_t size = static_cast<size_t>(st.st_size);
  SharedBytes out;
  out.data = static_cast<const uint8_t*>(map);
  out.size = size;
  out.owner = std::shared_ptr<const void>(map, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  return out;
}

void cache_inflated(const std::string& gz_path, const uint8_t* bytes, size_t size) {
  // A small file inflates in well under a millisecond: caching it would only leave
  // files behind (tests write many small data files under temporary names).
  constexpr size_t kMinCachedBytes = size_t(1) << 20;
  if (size < kMinCachedBytes) return;
  const std::string path = entry_path(gz_path);
  if (path.empty()) return;
  const fs::path entry(path);
  std::error_code ec;
  fs::create_directories(entry.parent_path(), ec);
  if (ec) return;
  // Copies of this source from before it changed are stale: remove them.
  const std::string prefix = entry.filename().string().substr(0, entry_prefix(fs::absolute(gz_path, ec)).size());
  for (const auto& old : fs::directory_iterator(entry.parent_path(), ec))
    if (old.path().filename().string().rfind(prefix, 0) == 0 && old.path() != entry &&
        old.path().filename().string().find(".tmp.") == std::string::npos)
      fs::remove(old.path(), ec);
  // Several ranks may inflate the same file at once: each writes its own temporary
  // file, and the renames replace one complete copy with another.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const bool ok = ::close(fd) == 0 && done == size;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace tandem
