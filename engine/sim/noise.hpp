#pragma once
// The simulator's randomness: a factor of mean 1 for (seed, worker, iteration),
// counter-based, so any run of the same experiment sees the same noise. The compute
// model stretches every compute time by one (sim.seed), the gradient model every
// gradient norm (a stream of its own from sim.seed: the two are independent).
//   lognormal  exp(s z - s^2/2): multiplicative jitter, right-skewed (the default:
//              measured step times of a busy host look like this);
//   normal     1 + s z, symmetric;
//   uniform    1 + s sqrt(3) (2u - 1): standard deviation s, bounded;
//   spikes     (1 - s) + Exp(s): mostly just under the mean, an exponential tail
//              of occasional long steps (a time slice lost to another process).
// s is sim.noise, the distribution sim.noise_distribution. The symmetric ones are
// floored at 0.05 (a time is never negative); keep s below ~0.3 for them, or the
// floor lifts the mean.
#include <cstdint>

#include "engine/train/config.hpp"

namespace tandem {

double noise_factor(const SimConfig& c, uint64_t seed, int worker, int64_t iteration);

}  // namespace tandem
