#include "kernels/cpu/heads_permute.hpp"

#include <cstddef>
#include <cstring>

namespace tandem::cpu {

void heads_permute(float* seq_layout, float* head_layout, int batch, int seq, int parts, int heads, int head_dim,
                   bool to_heads) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(head_dim);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int p = 0; p < parts; ++p)
        for (int h = 0; h < heads; ++h) {
          float* s = seq_layout + ((((static_cast<size_t>(b) * seq + t) * parts + p) * heads + h) * head_dim);
          float* d = head_layout + ((((static_cast<size_t>(p) * batch + b) * heads + h) * seq + t) * head_dim);
          if (to_heads)
            std::memcpy(d, s, row_bytes);
          else
            std::memcpy(s, d, row_bytes);
        }
}

}  // namespace tandem::cpu
