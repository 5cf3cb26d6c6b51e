#pragma once
// A synthetic data set of any sample shape, for throughput work and tests that must
// not depend on files. It is learnable, not noise: each class has a fixed random
// prototype and a sample is its class prototype plus noise. Everything is a function
// of (seed, index), computed on gather, so size costs no memory.
#include <memory>

#include "engine/data/dataset.hpp"

namespace tandem {

// seed fixes the class prototypes; split (0 = train, 1 = test) picks which samples
// are drawn around them, so a test set shares its training set's classes.
std::unique_ptr<Dataset> make_synthetic(Shape sample_shape, int classes, int64_t size, uint64_t seed, int split = 0);

}  // namespace tandem
