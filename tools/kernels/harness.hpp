#pragma once
// The kernel development harness: for each op, a reference written straight from
// the definition, the versions under development, a check of every version against
// the reference (error scaled by the reference's magnitude), and a benchmark of
// each version in GB/s (memory-bound ops) or GFLOP/s (compute-bound ones) as a
// fraction of what this device can do, measured here (a triad moving as many bytes
// for bandwidth, so cache-resident kernels meet the cache's speed; a large
// single-threaded SGEMM for arithmetic). A CUDA version of an op registers
// next to the CPU ones, with the same reference and the same numbers.
#include <functional>
#include <string>
#include <vector>

namespace tandem::kernels {

struct Version {
  std::string name;
  std::function<void()> run;                     // one launch, timed
  std::function<std::vector<float>()> output;    // its result, after a run
  // A device version times itself (CUDA events: mean seconds per run over `repeat`
  // runs after a warm-up) and brings its device's peak memory bandwidth; a CPU
  // version leaves both empty and is timed by the host clock against a CPU triad.
  std::function<double(int repeat)> seconds = {};
  double peak_gb_per_s = 0.0;
};

struct OpCase {
  std::string op, shape;  // "im2col", "c8 28x28 k3 s1 p1"
  double bytes = 0.0;     // memory traffic per run (memory-bound ops), or
  double flops = 0.0;     // arithmetic per run (compute-bound ops)
  double tolerance = 1e-5;
  std::function<std::vector<float>()> reference;
  std::vector<Version> versions;
};

// Every op case, built with its inputs (kernels_cpu.cpp).
std::vector<OpCase> cpu_cases();
// The CUDA versions (kernels_cuda.cpp); none, with a line saying why, without a GPU.
std::vector<OpCase> cuda_cases();

// Largest |version - reference| over the largest |reference| (at least 1).
double scaled_error(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace tandem::kernels
