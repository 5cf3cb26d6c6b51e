#pragma once
// Reader for the IDX format of (Fashion-)MNIST, gzip-compressed as Debian ships it:
// a big-endian magic (0x0000 08 NDIM for unsigned bytes), NDIM big-endian uint32
// dimensions, then the bytes. Every structural problem is reported with the file.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/inflated_cache.hpp"

namespace tandem {

struct IdxArray {
  std::vector<uint32_t> dims;
  // The data after the header: in a mapping of the inflated copy in the cache, or in
  // the inflated buffer.
  SharedBytes bytes;
};

// expected_ndim: 1 for labels, 3 for images. `package` names the Debian package that
// provides the file, for the error message. A file inflated once is mapped from the
// cache afterwards.
IdxArray read_idx_gz(const std::string& path, int expected_ndim, const std::string& package);

}  // namespace tandem
