#include "engine/data/idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

// gzip's trailer holds the inflated size modulo 2^32: a hint to allocate once, where
// growing the buffer copied the 47 MB of images several times.
size_t inflated_size_hint(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return 0;
  uint8_t t[4] = {};
  const bool ok = std::fseek(f, -4, SEEK_END) == 0 && std::fread(t, 1, 4, f) == 4;
  std::fclose(f);
  const size_t hint = ok ? (size_t(t[0]) | size_t(t[1]) << 8 | size_t(t[2]) << 16 | size_t(t[3]) << 24) : 0;
  return std::min<size_t>(hint, size_t(1) << 30);
}

SharedBytes gunzip_file(const std::string& path, const std::string& package) {
  if (!std::filesystem::exists(path))
    TANDEM_FAIL_HINT("install the data set with `apt-get install " + package +
                         "`, or point data.dir=... at a folder holding the IDX files",
                     "data file '", path, "' does not exist");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) TANDEM_FAIL_HINT("check the file's permissions", "cannot open data file '", path, "'");
  gzbuffer(f, 1 << 20);
  auto out = std::make_shared<std::vector<uint8_t>>();
  // One byte past the hint: the read that finds the end fits, instead of doubling.
  out->resize(std::max<size_t>(inflated_size_hint(path) + 1, 1 << 16));
  size_t filled = 0;
  for (;;) {
    if (filled == out->size()) out->resize(out->size() * 2);
    const size_t room = std::min<size_t>(out->size() - filled, 1u << 30);
    const int n = gzread(f, out->data() + filled, static_cast<unsigned>(room));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      TANDEM_FAIL_HINT("reinstall it with `apt-get install --reinstall " + package + "`", "data file '", path,
                       "' is corrupt: ", msg);
    }
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  out->resize(filled);
  // gzread stops quietly at a truncated stream; zlib only records it (and gzclose reports it).
  int errnum = 0;
  const std::string zmsg = gzerror(f, &errnum);
  const int rc = gzclose(f);
  if (errnum != Z_OK || rc != Z_OK)
    TANDEM_FAIL_HINT("reinstall it with `apt-get install --reinstall " + package + "`", "data file '", path,
                     "' is truncated or corrupt (zlib: ", errnum != Z_OK ? zmsg : "error " + std::to_string(rc),
                     ", after ", filled, " decompressed bytes)");
  const uint8_t* data = out->data();
  return {data, filled, std::move(out)};
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

// The IDX array in `raw`, the whole inflated content of `path`.
IdxArray parse_idx(SharedBytes raw, const std::string& path, int expected_ndim, const std::string& package) {
  const std::string reinstall = "reinstall it with `apt-get install --reinstall " + package + "`";
  // The magic first: a file of the wrong kind should be reported as such, not as short.
  if (raw.size < 4)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' is too short (", raw.size, " bytes) to be an IDX file");
  const uint32_t magic = big_endian(raw.data);
  const uint32_t want = 0x0800u + static_cast<uint32_t>(expected_ndim);
  if (magic != want)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' has IDX magic ", magic, ", expected ", want,
                     " (unsigned bytes, ", expected_ndim, " dimensions)");
  const size_t header = 4 + 4 * static_cast<size_t>(expected_ndim);
  if (raw.size < header)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' is too short (", raw.size, " bytes) for its IDX header of ",
                     expected_ndim, " dimensions");
  IdxArray a;
  // A corrupt header can announce more than 2^64 bytes: saturate instead of wrapping.
  uint64_t count = 1;
  for (int i = 0; i < expected_ndim; ++i) {
    const uint32_t dim = big_endian(raw.data + 4 + 4 * i);
    a.dims.push_back(dim);
    count = (dim != 0 && count > UINT64_MAX / dim) ? UINT64_MAX : count * dim;
  }
  if (raw.size - header != count)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' holds ", raw.size - header, " data bytes but its header says ",
                     count, " (", expected_ndim, " dimensions): the file is truncated or padded");
  a.bytes = {raw.data + header, raw.size - header, std::move(raw.owner)};
  return a;
}

}  // namespace

IdxArray read_idx_gz(const std::string& path, int expected_ndim, const std::string& package) {
  const std::string entry = inflated_entry(path);  // before the source is read
  if (SharedBytes cached = map_inflated(entry); cached.owner) {
    try {
      return parse_idx(std::move(cached), path, expected_ndim, package);
    } catch (const std::exception&) {
      drop_inflated(entry);  // a cache file that does not parse: inflated and written again
    }
  }
  SharedBytes raw = gunzip_file(path, package);
  IdxArray a = parse_idx(raw, path, expected_ndim, package);
  store_inflated(entry, raw.data, raw.size);
  return a;
}

}  // namespace tandem
