#pragma once
// Reader for the IDX format of (Fashion-)MNIST, gzip-compressed as Debian ships it:
// a big-endian magic (0x0000 08 NDIM for unsigned bytes), NDIM big-endian uint32
// dimensions, then the bytes. Every structural problem is reported with the file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem {

struct IdxArray {
  std::vector<uint32_t> dims;
  // The data after the header, valid while `owner` lives: a mapping of the inflated
  // copy in the cache (engine/data/inflated_cache.hpp), or the inflated buffer.
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

// expected_ndim: 1 for labels, 3 for images. `package` names the Debian package that
// provides the file, for the error message. A file read once is inflated from the
// cache afterwards.
IdxArray read_idx_gz(const std::string& path, int expected_ndim, const std::string& package);

}  // namespace tandem
