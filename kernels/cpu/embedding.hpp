#pragma once
// Token + learned position embedding of a GPT (engine/core/device.hpp states the
// contract). Backward accumulates into the token table because the output
// projection may share it (weight tying) and writes its part first.
#include <cstdint>

namespace tandem::cpu {

void embedding_forward(const float* tokens, const float* wte, const float* wpe, int batch, int seq, int dim, int vocab,
                       float* y);
void embedding_backward(const float* tokens, const float* dy, int batch, int seq, int dim, int vocab, float* dwte,
                        float* dwpe);

}  // namespace tandem::cpu
