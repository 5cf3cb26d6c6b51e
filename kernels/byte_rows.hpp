#pragma once
// A table of byte rows a batch is gathered from by index (kernels/*/gather_rows.*),
// declared at the kernels' level like activation.hpp. Row s holds sample_bytes values
// at samples + s * sample_stride, each the table's float for its byte, and
// label_bytes labels at labels + s * label_stride. Strides may be shorter than the
// rows: a text's windows overlap, and its labels are its samples shifted by one
// byte. Where the pointers point (host or device memory) is the user's business.
#include <cstdint>

namespace tandem {

struct ByteRowTable {
  const uint8_t* samples = nullptr;
  int64_t sample_bytes = 0, sample_stride = 0;
  const uint8_t* labels = nullptr;
  int64_t label_bytes = 0, label_stride = 0;
  const float* table = nullptr;  // 256 floats: the value of each byte
  int64_t rows = 0;

  // The bytes from the first row's start to the last row's end.
  int64_t sample_span() const { return rows > 0 ? (rows - 1) * sample_stride + sample_bytes : 0; }
  int64_t label_span() const { return rows > 0 ? (rows - 1) * label_stride + label_bytes : 0; }
};

}  // namespace tandem
