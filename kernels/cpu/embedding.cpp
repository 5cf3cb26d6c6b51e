#include "kernels/cpu/embedding.hpp"

#include <cstddef>
#include <cstring>

#include "engine/core/error.hpp"

namespace tandem::cpu {

namespace {

int token_at(const float* tokens, size_t i, int vocab) {
  const float f = tokens[i];
  const int v = static_cast<int>(f);
  TANDEM_CHECK(f >= 0.0f && f < static_cast<float>(vocab) && static_cast<float>(v) == f, "token ", f,
               " at position ", i, " of the batch is not an integer in [0, ", vocab, ")");
  return v;
}

}  // namespace

void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim, int vocab,
                       float* y) {
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t) {
      const size_t i = static_cast<size_t>(b) * seq + t;
      const float* e = wte + static_cast<size_t>(token_at(tokens, i, vocab)) * dim;
      const float* p = wpe + static_cast<size_t>(t) * dim;
      float* out = y + i * dim;
      for (int c = 0; c < dim; ++c) out[c] = e[c] + p[c];
    }
}

void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                        float* dwpe) {
  std::memset(dwpe, 0, sizeof(float) * static_cast<size_t>(seq) * dim);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t) {
      const size_t i = static_cast<size_t>(b) * seq + t;
      const float* g = dy + i * dim;
      float* e = dwte + static_cast<size_t>(token_at(tokens, i, vocab)) * dim;
      float* p = dwpe + static_cast<size_t>(t) * dim;
      for (int c = 0; c < dim; ++c) {
        e[c] += g[c];
        p[c] += g[c];
      }
    }
}

}  // namespace tandem::cpu
