#include "engine/data/idx_reader.hpp"

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

std::vector<uint8_t> gunzip_file(const std::string& path, const std::string& package) {
  if (!std::filesystem::exists(path))
    TANDEM_FAIL_HINT("install the data set with `apt-get install " + package +
                         "`, or point data.dir=... at a folder holding the IDX files",
                     "data file '", path, "' does not exist");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) TANDEM_FAIL_HINT("check the file's permissions", "cannot open data file '", path, "'");
  gzbuffer(f, 1 << 20);
  std::vector<uint8_t> out;
  std::vector<uint8_t> chunk(1 << 22);
  for (;;) {
    const int n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int errnum = 0;
      std::string msg = gzerror(f, &errnum);
      gzclose(f);
      TANDEM_FAIL_HINT("reinstall it with `apt-get install --reinstall " + package + "`", "data file '", path,
                       "' is corrupt: ", msg);
    }
    if (n == 0) break;
    out.insert(out.end(), chunk.begin(), chunk.begin() + n);
  }
  // gzread stops quietly at a truncated stream; zlib only records it (and gzclose reports it).
  int errnum = 0;
  const std::string zmsg = gzerror(f, &errnum);
  const int rc = gzclose(f);
  if (errnum != Z_OK || rc != Z_OK)
    TANDEM_FAIL_HINT("reinstall it with `apt-get install --reinstall " + package + "`", "data file '", path,
                     "' is truncated or corrupt (zlib: ", errnum != Z_OK ? zmsg : "error " + std::to_string(rc),
                     ", after ", out.size(), " decompressed bytes)");
  return out;
}

uint32_t big_endian(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

IdxArray read_idx_gz(const std::string& path, int expected_ndim, const std::string& package) {
  std::vector<uint8_t> raw = gunzip_file(path, package);
  const std::string reinstall = "reinstall it with `apt-get install --reinstall " + package + "`";
  // The magic first: a file of the wrong kind should be reported as such, not as short.
  if (raw.size() < 4)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' is too short (", raw.size(), " bytes) to be an IDX file");
  const uint32_t magic = big_endian(raw.data());
  const uint32_t want = 0x0800u + static_cast<uint32_t>(expected_ndim);
  if (magic != want)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' has IDX magic ", magic, ", expected ", want,
                     " (unsigned bytes, ", expected_ndim, " dimensions)");
  const size_t header = 4 + 4 * static_cast<size_t>(expected_ndim);
  if (raw.size() < header)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' is too short (", raw.size(), " bytes) for its IDX header of ",
                     expected_ndim, " dimensions");
  IdxArray a;
  // A corrupt header can announce more than 2^64 bytes: saturate instead of wrapping.
  uint64_t count = 1;
  for (int i = 0; i < expected_ndim; ++i) {
    const uint32_t dim = big_endian(raw.data() + 4 + 4 * i);
    a.dims.push_back(dim);
    count = (dim != 0 && count > UINT64_MAX / dim) ? UINT64_MAX : count * dim;
  }
  if (raw.size() - header != count)
    TANDEM_FAIL_HINT(reinstall, "data file '", path, "' holds ", raw.size() - header, " data bytes but its header says ",
                     count, " (", expected_ndim, " dimensions): the file is truncated or padded");
  a.bytes.assign(raw.begin() + static_cast<std::ptrdiff_t>(header), raw.end());
  return a;
}

}  // namespace tandem
