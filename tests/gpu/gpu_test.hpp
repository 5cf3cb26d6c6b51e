#pragma once
// What the per-op GPU tests (test_cuda_<op>.cpp) share. Each test runs a CUDA
// launcher (kernels/cuda/<op>.cuh) on random inputs over several shapes, awkward ones
// included, and compares with the CPU reference (kernels/cpu) with a tolerance
// scaled by the reference's magnitude (DESIGN.md habit 2). Without a GPU, or in a
// build without CUDA, a test prints why and exits 77, which ctest reports as skipped.
//
//   int main() {
//   #if TANDEM_HAVE_CUDA
//     return tandem::gpu_test::run("sgd_step", [] { ... GPU_CHECK_CLOSE(...); ... });
//   #else
//     return tandem::gpu_test::skip_without_cuda();
//   #endif
//   }
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "engine/core/gpu_probe.hpp"

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tandem::gpu_test {

constexpr int kSkipped = 77;

inline int skip_without_cuda() {
  std::printf("skipped: no GPU (tandem was built without CUDA)\n");
  return kSkipped;
}

// Largest |got - want| over the largest |want| (at least 1); infinite when the sizes
// differ or got has a NaN where want has none.
template <typename T>
double scaled_error(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return INFINITY;
  double scale = 1.0, err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    scale = std::max(scale, std::fabs(w));
    if (std::isnan(g) != std::isnan(w)) return INFINITY;
    if (!std::isnan(w)) err = std::max(err, std::fabs(g - w));
  }
  return err / scale;
}

inline int& failures() {
  static int n = 0;
  return n;
}

// One line per check, so a failing run shows which op and shape, and by how much.
inline void report(bool ok, const std::string& op, const std::string& shape, const std::string& what,
                   double error, double tolerance) {
  std::printf("%s %s [%s] %s: error %.3g (tolerance %.3g)\n", ok ? "ok  " : "FAIL", op.c_str(), shape.c_str(),
              what.c_str(), error, tolerance);
  if (!ok) ++failures();
}

}  // namespace tandem::gpu_test

// GPU_CHECK_CLOSE(op, shape, what, got, want, tol): scaled_error(got, want) <= tol.
#define GPU_CHECK_CLOSE(op, shape, what, got, want, tol)                                          \
  do {                                                                                            \
    const double gpu_check_err_ = ::tandem::gpu_test::scaled_error((got), (want));               \
    ::tandem::gpu_test::report(gpu_check_err_ <= (tol), (op), (shape), (what), gpu_check_err_, (tol)); \
  } while (0)

// GPU_CHECK(op, shape, what, cond): an exact property (bitwise equality, a count).
#define GPU_CHECK(op, shape, what, cond)                                                               \
  do {                                                                                                 \
    const bool gpu_check_ok_ = static_cast<bool>(cond);                                                \
    ::tandem::gpu_test::report(gpu_check_ok_, (op), (shape), std::string(what) + " (" #cond ")",      \
                               gpu_check_ok_ ? 0.0 : 1.0, 0.0);                                        \
  } while (0)

// GPU_CHECK_THROWS(op, shape, what, stmt): a launcher refuses bad arguments with a
// tandem::Error (before launching anything).
#define GPU_CHECK_THROWS(op, shape, what, stmt)                                                         \
  do {                                                                                                  \
    bool gpu_threw_ = false;                                                                            \
    try {                                                                                               \
      stmt;                                                                                             \
    } catch (const ::tandem::Error&) {                                                                  \
      gpu_threw_ = true;                                                                                \
    }                                                                                                   \
    ::tandem::gpu_test::report(gpu_threw_, (op), (shape), std::string(what) + " is refused",           \
                               gpu_threw_ ? 0.0 : 1.0, 0.0);                                            \
  } while (0)

#if TANDEM_HAVE_CUDA

// A CUDA runtime call in a test: failure raises a tandem::Error naming the call.
#define GPU_CUDA_OK(stmt)                                                                           \
  do {                                                                                              \
    const cudaError_t gpu_err_ = (stmt);                                                            \
    if (gpu_err_ != cudaSuccess) TANDEM_FAIL(#stmt, " failed: ", cudaGetErrorString(gpu_err_));     \
  } while (0)

namespace tandem::gpu_test {

// A device array of n T (no allocation for n == 0: data() is null, as an empty
// tensor's would be).
template <typename T>
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n) GPU_CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() const { return p_; }
  size_t size() const { return n_; }

private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// The launchers run on a non-blocking stream (as the engine's), which does not order
// itself after the legacy stream's cudaMemcpy/cudaMemset: the helpers below wait for
// the whole device before returning, so a test never races its own copies.
// upload(host, offset): host lands at element `offset` of a buffer of offset + n
// elements, so d.data() + offset is a pointer that is not 16-byte aligned (offset 1
// exercises the kernels' scalar paths). download(d, offset) reads from there to the end.
template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& host, size_t offset = 0) {
  DeviceBuffer<T> d(host.size() + offset);
  if (!host.empty())
    GPU_CUDA_OK(cudaMemcpy(d.data() + offset, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  GPU_CUDA_OK(cudaDeviceSynchronize());
  return d;
}

template <typename T>
std::vector<T> download(const DeviceBuffer<T>& d, size_t offset = 0) {
  GPU_CUDA_OK(cudaDeviceSynchronize());
  std::vector<T> host(d.size() > offset ? d.size() - offset : 0);
  if (!host.empty())
    GPU_CUDA_OK(cudaMemcpy(host.data(), d.data() + offset, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// The device pointer at `offset`, or null for an empty buffer (as an empty tensor's).
template <typename T>
T* at(const DeviceBuffer<T>& d, size_t offset = 0) {
  return d.size() > offset ? d.data() + offset : nullptr;
}

template <typename T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Overwrite a buffer with garbage (0x7f7f7f7f: a large float, a large double) first,
// so a kernel that forgets to write an element is seen.
template <typename T>
void poison(DeviceBuffer<T>& d) {
  if (d.size()) GPU_CUDA_OK(cudaMemset(d.data(), 0x7f, d.size() * sizeof(T)));
  GPU_CUDA_OK(cudaDeviceSynchronize());
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Runs a test body on a stream of its own: 77 without a GPU, 1 if a check failed or
// anything threw (a tandem::Error from a launcher, a CUDA failure), else 0.
template <typename Body>
int run(const char* op, Body body) {
  const GpuProbe gpus = probe_gpus();
  if (gpus.devices.empty()) {
    std::printf("skipped: no GPU (%s)\n", gpus.reason.c_str());
    return kSkipped;
  }
  std::printf("%s on %s\n", op, gpus.devices.front().c_str());
  cudaStream_t stream = nullptr;
  try {
    GPU_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    body(stream);
    GPU_CUDA_OK(cudaStreamSynchronize(stream));
    GPU_CUDA_OK(cudaStreamDestroy(stream));
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", op, e.what());
    return 1;
  }
  if (failures()) {
    std::printf("%s: %d check(s) failed\n", op, failures());
    return 1;
  }
  std::printf("%s: all checks passed\n", op);
  return 0;
}

inline void sync(cudaStream_t stream) { GPU_CUDA_OK(cudaStreamSynchronize(stream)); }

// A copy of host floats on a tandem Device, through its interface (as the engine's
// tensors are): the tests that compare the CUDA device with the CPU device op by op.
struct DeviceCopy {
  Device& dev;
  size_t n;
  float* p;
  DeviceCopy(Device& d, const std::vector<float>& host) : dev(d), n(host.size()), p(d.allocate(host.size())) {
    if (n) dev.copy_from_host(p, host.data(), n);
  }
  ~DeviceCopy() { dev.deallocate(p, n); }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  std::vector<float> to_host() const {
    std::vector<float> h(n);
    if (n) dev.copy_to_host(h.data(), p, n);
    return h;
  }
};

}  // namespace tandem::gpu_test

#endif  // TANDEM_HAVE_CUDA
