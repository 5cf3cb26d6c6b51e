#pragma once
// TANDEM_HOST_DEVICE marks a function that the CPU code and CUDA kernels share word
// for word (kernels/step_rule.hpp, kernels/dropout_seed.hpp): __host__ __device__
// under nvcc, nothing in plain C++.
#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif
