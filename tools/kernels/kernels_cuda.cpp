// The CUDA kernels (kernels/cuda) in the harness: the memory-bound ops at sizes that
// stream from HBM rather than sit in the 50 MB L2 (sgd_step over 10M parameters, bias
// + ReLU, softmax cross-entropy, batchnorm forward, dropout, the bf16 conversions),
// and the GPT's ops at the shapes of the GPT benchmark (tools/bench/gpt_vs_torch.py:
// 64 x 256 tokens, 384 wide), where some arrays (25 MB) fit in L2: read those
// fractions as "at a training step's size", not as HBM streaming. The batched GEMM is
// cuBLAS's, not ours, and is left out (this harness's arithmetic peak is the host's).
// Each is validated the way the CPU cases are, against the CPU kernel of kernels/cpu
// (itself tested against the definition), and timed with CUDA events: one warm-up
// launch, then the mean of `repeat` launches back to back on one stream, as a
// training step issues them.
//
// GB/s are compared with the device's peak memory bandwidth as the driver states it:
// memory clock x bus width x 2 (double data rate), from cudaDeviceGetAttribute
// (CUDA 13 dropped the fields from cudaDeviceProp; the attributes remain). Where the
// driver does not answer, a large device-to-device copy measured here stands in, and
// the header line says which it is. The copy's own GB/s is printed either way: it is
// what a kernel can practically reach.
#include <cstdio>
#include <string>
#include <vector>

#include "engine/core/gpu_probe.hpp"
#include "tools/kernels/harness.hpp"

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cmath>
#include <memory>
#include <random>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"
#include "kernels/cpu/adamw_step.hpp"
#include "kernels/cpu/batchnorm.hpp"
#include "kernels/cpu/bias_act.hpp"
#include "kernels/cpu/causal_softmax.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/heads_permute.hpp"
#include "kernels/cpu/layernorm.hpp"
#include "kernels/cpu/round_mantissa.hpp"
#include "kernels/cpu/gather_rows.hpp"
#include "kernels/cpu/sgd_step.hpp"
#include "kernels/cpu/softmax_xent.hpp"
#include "kernels/cuda/adamw_step.cuh"
#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/bf16_convert.cuh"
#include "kernels/cuda/bias_act.cuh"
#include "kernels/cuda/causal_softmax.cuh"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/heads_permute.cuh"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/sgd_step.cuh"
#include "kernels/cuda/softmax_xent.cuh"
#endif

namespace tandem::kernels {

#if TANDEM_HAVE_CUDA
namespace {

#define KERNELS_CUDA_OK(stmt)                                                                      \
  do {                                                                                             \
    const cudaError_t kernels_err_ = (stmt);                                                       \
    if (kernels_err_ != cudaSuccess) TANDEM_FAIL(#stmt, " failed: ", cudaGetErrorString(kernels_err_)); \
  } while (0)

std::vector<float> random_floats(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// A device array that frees itself; cases share it with their lambdas.
template <typename T>
struct DeviceArray {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceArray(size_t count) : n(count) {
    KERNELS_CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&p), (count ? count : 1) * sizeof(T)));
  }
  ~DeviceArray() { cudaFree(p); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void upload(const std::vector<T>& host) {
    KERNELS_CUDA_OK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n);
    KERNELS_CUDA_OK(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
};

template <typename T>
std::shared_ptr<DeviceArray<T>> device_array(size_t n) {
  return std::make_shared<DeviceArray<T>>(n);
}

template <typename T>
std::shared_ptr<DeviceArray<T>> device_copy(const std::vector<T>& host) {
  auto d = device_array<T>(host.size());
  d->upload(host);
  return d;
}

// The stream every case launches on (a blocking one: it orders itself after the
// cudaMemcpy calls that reset inputs, which run on the legacy stream).
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { KERNELS_CUDA_OK(cudaStreamCreate(&s)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Mean seconds per launch: one warm-up, then `repeat` launches between two events.
double event_seconds(const std::function<void()>& launch, cudaStream_t stream, int repeat) {
  if (repeat < 1) repeat = 1;
  launch();
  cudaEvent_t start, stop;
  KERNELS_CUDA_OK(cudaEventCreate(&start));
  KERNELS_CUDA_OK(cudaEventCreate(&stop));
  KERNELS_CUDA_OK(cudaEventRecord(start, stream));
  for (int i = 0; i < repeat; ++i) launch();
  KERNELS_CUDA_OK(cudaEventRecord(stop, stream));
  KERNELS_CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0.0f;
  KERNELS_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e-3 / repeat;
}

// A device-to-device copy of 1 GiB: bytes read + bytes written, per second.
double copy_gb_per_s(cudaStream_t stream) {
  const size_t bytes = size_t{1} << 30;
  DeviceArray<char> a(bytes), b(bytes);
  KERNELS_CUDA_OK(cudaMemsetAsync(a.p, 1, bytes, stream));
  const double s = event_seconds(
      [&] { KERNELS_CUDA_OK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream)); }, stream, 5);
  return 2.0 * static_cast<double>(bytes) / s / 1e9;
}

// The harness's Version for a CUDA launch: launches on `stream` (run), resets its
// inputs, launches once and reads the result back (output), times itself with events.
Version cuda_version(std::shared_ptr<Stream> stream, double peak, std::function<void()> launch,
                     std::function<std::vector<float>()> output) {
  Version v{"cuda", launch, output};
  v.seconds = [stream, launch](int repeat) { return event_seconds(launch, stream->s, repeat); };
  v.peak_gb_per_s = peak;
  return v;
}

OpCase sgd_case(size_t n, std::shared_ptr<Stream> stream, double peak) {
  const float lr = 0.05f, momentum = 0.9f, wd = 5e-4f, scale = 1.0f / 128;
  const auto grad = random_floats(n, 3), param0 = random_floats(n, 4), velocity0 = random_floats(n, 5);
  auto d_param = device_copy(param0), d_grad = device_copy(grad), d_velocity = device_copy(velocity0);
  // param r/w, velocity r/w, grad r
  OpCase oc{"sgd_step", std::to_string(n) + " parameters", 4.0 * 5 * static_cast<double>(n), 0.0, 1e-5, {}, {}};
  oc.reference = [=] {
    std::vector<float> p = param0, v = velocity0;
    cpu::sgd_step(p.data(), grad.data(), v.data(), n, lr, momentum, wd, scale, false);
    return p;
  };
  auto launch = [=] {
    cuda::sgd_step(d_param->p, d_grad->p, d_velocity->p, n, lr, momentum, wd, scale, false, stream->s);
  };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {  // one step from the start, as the reference
    d_param->upload(param0);
    d_velocity->upload(velocity0);
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    return d_param->download();
  }));
  return oc;
}

OpCase bias_act_case(int rows, int cols, std::shared_ptr<Stream> stream, double peak) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const auto y0 = random_floats(n, 12), bias = random_floats(static_cast<size_t>(cols), 13);
  auto d_y = device_copy(y0), d_bias = device_copy(bias);
  // y read and written in place
  OpCase oc{"bias_act", std::to_string(rows) + "x" + std::to_string(cols) + " relu", 4.0 * 2 * static_cast<double>(n),
            0.0, 1e-5, {}, {}};
  oc.reference = [=] {
    std::vector<float> y = y0;
    cpu::bias_act_forward(y.data(), bias.data(), rows, cols, Activation::relu);
    return y;
  };
  auto launch = [=] { cuda::bias_act_forward(d_y->p, d_bias->p, rows, cols, Activation::relu, stream->s); };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    d_y->upload(y0);
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    return d_y->download();
  }));
  return oc;
}

// The bf16 convolutions' conversions (cudnn_ops.cpp), float32 to bfloat16 and back:
// exactly the CPU's rounding to 7 mantissa bits (tolerance 0). Values span many
// binades, so the rounding is tested at every exponent.
OpCase bf16_round_trip_case(size_t n, std::shared_ptr<Stream> stream, double peak) {
  auto x = random_floats(n, 40);
  for (size_t i = 0; i < n; ++i) x[i] = std::ldexp(x[i], static_cast<int>(i % 61) - 30);
  auto d_x = device_copy(x), d_y = device_array<float>(n);
  auto d_half = device_array<uint16_t>(n);
  // x read (4), bfloat16 written and read (2 + 2), y written (4)
  OpCase oc{"bf16_round_trip", std::to_string(n) + " floats", 12.0 * static_cast<double>(n), 0.0, 0.0, {}, {}};
  oc.reference = [=] {
    std::vector<float> y = x;
    cpu::round_in_place(y.data(), n, 7);
    return y;
  };
  auto launch = [=] {
    cuda::to_bf16(d_x->p, d_half->p, n, stream->s);
    cuda::from_bf16(d_half->p, d_y->p, n, stream->s);
  };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    return d_y->download();
  }));
  return oc;
}

// Output: dlogits, then the mean loss and the accuracy (so the totals are checked too).
OpCase softmax_case(int rows, int classes, std::shared_ptr<Stream> stream, double peak) {
  const size_t n = static_cast<size_t>(rows) * classes;
  const auto logits = random_floats(n, 30, -6.0f, 6.0f);
  std::vector<int32_t> labels(static_cast<size_t>(rows));
  std::mt19937 rng(31);
  for (auto& l : labels) l = static_cast<int32_t>(rng() % static_cast<unsigned>(classes));
  auto d_logits = device_copy(logits), d_grad = device_array<float>(n);
  auto d_labels = device_copy(labels);
  auto d_totals = device_array<double>(2);
  // logits read, dlogits written, labels read
  OpCase oc{"softmax_xent", std::to_string(rows) + "x" + std::to_string(classes),
            4.0 * 2 * static_cast<double>(n) + 4.0 * rows, 0.0, 1e-5, {}, {}};
  oc.reference = [=] {
    std::vector<float> g(n);
    int64_t correct = 0;
    const double loss = cpu::softmax_xent(logits.data(), labels.data(), rows, classes, g.data(), &correct);
    g.push_back(static_cast<float>(loss / rows));
    g.push_back(static_cast<float>(static_cast<double>(correct) / rows));
    return g;
  };
  auto launch = [=] { cuda::softmax_xent(d_logits->p, d_labels->p, rows, classes, d_grad->p, d_totals->p, stream->s); };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    std::vector<float> g = d_grad->download();
    const std::vector<double> totals = d_totals->download();
    g.push_back(static_cast<float>(totals[0] / rows));
    g.push_back(static_cast<float>(totals[1] / rows));
    return g;
  }));
  return oc;
}

// A batch gathered from a data set held on the device (Fashion-MNIST's layout: 784
// bytes and a label byte per sample, 60,000 samples). Output: the samples, then the
// labels as floats.
OpCase gather_case(int count, std::shared_ptr<Stream> stream, double peak) {
  const int64_t rows = 60000, sample = 784;
  std::vector<uint8_t> samples(static_cast<size_t>(rows * sample)), label_rows(static_cast<size_t>(rows));
  std::mt19937 rng(40);
  for (auto& b : samples) b = static_cast<uint8_t>(rng());
  for (auto& l : label_rows) l = static_cast<uint8_t>(rng() % 10);
  const auto table = random_floats(256, 41);
  std::vector<int64_t> indices(static_cast<size_t>(count));
  for (auto& i : indices) i = static_cast<int64_t>(rng() % static_cast<unsigned>(rows));
  auto d_samples = device_copy(samples), d_labels = device_copy(label_rows);
  auto d_table = device_copy(table);
  auto d_indices = device_copy(indices);
  auto d_x = device_array<float>(static_cast<size_t>(count * sample));
  auto d_out = device_array<int32_t>(static_cast<size_t>(count));
  // bytes read, floats written, indices read, labels read and written
  OpCase oc{"gather_byte_rows", std::to_string(count) + " of 60000x784 bytes",
            static_cast<double>(count) * (sample * 5.0 + 8 + 1 + 4), 0.0, 0.0, {}, {}};
  auto rows_of = [=](const uint8_t* s, const uint8_t* l, const float* t) {
    ByteRowTable r;
    r.samples = s;
    r.sample_bytes = r.sample_stride = sample;
    r.labels = l;
    r.label_bytes = r.label_stride = 1;
    r.table = t;
    r.rows = rows;
    return r;
  };
  oc.reference = [=] {
    std::vector<float> x(static_cast<size_t>(count * sample));
    std::vector<int32_t> l(static_cast<size_t>(count));
    cpu::gather_byte_rows(rows_of(samples.data(), label_rows.data(), table.data()), indices.data(), count, x.data(),
                          l.data());
    for (int32_t v : l) x.push_back(static_cast<float>(v));
    return x;
  };
  auto launch = [=] {
    cuda::gather_byte_rows(rows_of(d_samples->p, d_labels->p, d_table->p), d_indices->p, count, d_x->p, d_out->p,
                           stream->s);
  };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    std::vector<float> x = d_x->download();
    for (int32_t v : d_out->download()) x.push_back(static_cast<float>(v));
    return x;
  }));
  return oc;
}

// Output: y (xhat is written too, and counted in the bytes).
OpCase batchnorm_case(int batch, int channels, int spatial, std::shared_ptr<Stream> stream, double peak) {
  const size_t n = static_cast<size_t>(batch) * channels * spatial, c = static_cast<size_t>(channels);
  const auto x = random_floats(n, 6), mean = random_floats(c, 7), gamma = random_floats(c, 8),
             beta = random_floats(c, 9);
  const std::vector<float> invstd(c, 1.5f);
  auto d_x = device_copy(x), d_mean = device_copy(mean), d_invstd = device_copy(invstd), d_gamma = device_copy(gamma),
       d_beta = device_copy(beta), d_xhat = device_array<float>(n), d_y = device_array<float>(n);
  // x read, xhat and y written
  OpCase oc{"batchnorm_forward",
            std::to_string(batch) + "x" + std::to_string(channels) + "x" + std::to_string(spatial),
            4.0 * 3 * static_cast<double>(n), 0.0, 1e-5, {}, {}};
  oc.reference = [=] {
    std::vector<float> xhat(n), y(n);
    cpu::batchnorm_forward(x.data(), mean.data(), invstd.data(), gamma.data(), beta.data(), batch, channels, spatial,
                           xhat.data(), y.data());
    return y;
  };
  auto launch = [=] {
    cuda::batchnorm_forward(d_x->p, d_mean->p, d_invstd->p, d_gamma->p, d_beta->p, batch, channels, spatial,
                            d_xhat->p, d_y->p, stream->s);
  };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    return d_y->download();
  }));
  return oc;
}

// Bitwise the CPU's mask: tolerance 0.
OpCase dropout_case(int rows, int cols, std::shared_ptr<Stream> stream, double peak) {
  const size_t n = static_cast<size_t>(rows) * cols;
  const float p = 0.5f;
  const uint64_t seed = 0x5eed;
  const int64_t first_row = 4096;
  const auto x = random_floats(n, 40);
  auto d_x = device_copy(x), d_y = device_array<float>(n);
  // x read, y written
  OpCase oc{"dropout", std::to_string(rows) + "x" + std::to_string(cols) + " p0.5", 4.0 * 2 * static_cast<double>(n),
            0.0, 0.0, {}, {}};
  oc.reference = [=] {
    std::vector<float> y(n);
    cpu::dropout_forward(x.data(), y.data(), rows, cols, p, seed, first_row);
    return y;
  };
  auto launch = [=] { cuda::dropout_forward(d_x->p, d_y->p, rows, cols, p, seed, first_row, stream->s); };
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    return d_y->download();
  }));
  return oc;
}

// The GPT's ops (models/gpt.lua) at the shapes of tools/bench/gpt_vs_torch.py's
// model: batch 64 x seq 256 tokens, 384 wide, 6 heads of 64, a byte vocabulary (256),
// MLP 4 x 384 wide. Bytes are the least traffic the op needs (each input read once,
// each output written once), so the fraction of peak says how close a kernel comes.
struct GptShape {
  int batch = 64, seq = 256, dim = 384, heads = 6, vocab = 256;
  size_t tokens() const { return static_cast<size_t>(batch) * seq; }
  std::string text() const {
    return std::to_string(batch) + "x" + std::to_string(seq) + "x" + std::to_string(dim);
  }
};

// A case with one CUDA version: `launch` is what is timed; output() runs `reset`
// first (restoring inputs that timed launches changed), launches once and reads
// `result` back.
OpCase gpt_case(std::string op, std::string shape, double bytes, double tolerance,
                std::function<std::vector<float>()> reference, std::shared_ptr<Stream> stream, double peak,
                std::function<void()> launch, std::function<void()> reset,
                std::shared_ptr<DeviceArray<float>> result) {
  OpCase oc{std::move(op), std::move(shape), bytes, 0.0, tolerance, std::move(reference), {}};
  oc.versions.push_back(cuda_version(stream, peak, launch, [=] {
    reset();
    launch();
    KERNELS_CUDA_OK(cudaStreamSynchronize(stream->s));
    return result->download();
  }));
  return oc;
}

std::vector<float> byte_tokens(size_t n, int vocab) {
  std::mt19937 rng(120);
  std::vector<float> t(n);
  for (auto& v : t) v = static_cast<float>(rng() % static_cast<unsigned>(vocab));
  return t;
}

void add_gpt_cases(std::vector<OpCase>& cases, const GptShape& g, std::shared_ptr<Stream> stream, double peak) {
  const size_t n = g.tokens(), c = static_cast<size_t>(g.dim), nc = n * c, vc = static_cast<size_t>(g.vocab) * c,
               tc = static_cast<size_t>(g.seq) * c;
  const auto nothing = [] {};

  {  // embedding: forward, then backward (dwte accumulated: reset to its start for the check)
    const auto tokens = byte_tokens(n, g.vocab), wte = random_floats(vc, 121), wpe = random_floats(tc, 122),
               dy = random_floats(nc, 123), dwte0 = random_floats(vc, 124);
    auto d_tokens = device_copy(tokens), d_wte = device_copy(wte), d_wpe = device_copy(wpe), d_dy = device_copy(dy),
         d_y = device_array<float>(nc), d_dwte = device_copy(dwte0), d_dwpe = device_array<float>(tc);
    cases.push_back(gpt_case(
        "embedding_forward", g.text() + " v" + std::to_string(g.vocab), 4.0 * (n + nc + vc + tc), 1e-5,
        [=] {
          std::vector<float> y(nc);
          cpu::embedding_forward(tokens.data(), wte.data(), wpe.data(), g.batch, g.seq, g.dim, g.vocab, y.data());
          return y;
        },
        stream, peak,
        [=] {
          cuda::embedding_forward(d_tokens->p, d_wte->p, d_wpe->p, g.batch, g.seq, g.dim, g.vocab, d_y->p,
                                  stream->s);
        },
        nothing, d_y));
    cases.push_back(gpt_case(
        "embedding_backward", g.text() + " v" + std::to_string(g.vocab), 4.0 * (n + nc + 2 * vc + tc), 1e-5,
        [=] {
          std::vector<float> dwte = dwte0, dwpe(tc);
          cpu::embedding_backward(tokens.data(), dy.data(), g.batch, g.seq, g.dim, g.vocab, dwte.data(), dwpe.data());
          return dwte;
        },
        stream, peak,
        [=] {
          cuda::embedding_backward(d_tokens->p, d_dy->p, g.batch, g.seq, g.dim, g.vocab, d_dwte->p, d_dwpe->p,
                                   stream->s);
        },
        [=] { d_dwte->upload(dwte0); }, d_dwte));
  }

  {  // layer norm over the residual stream
    const int rows = static_cast<int>(n);
    const auto x = random_floats(nc, 125), gamma = random_floats(c, 126, 0.5f, 1.5f), beta = random_floats(c, 127),
               dy = random_floats(nc, 128);
    std::vector<float> mean(n), rstd(n), y(nc);
    cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), rows, g.dim, 1e-5f, y.data(), mean.data(), rstd.data());
    auto d_x = device_copy(x), d_gamma = device_copy(gamma), d_beta = device_copy(beta), d_dy = device_copy(dy),
         d_y = device_array<float>(nc), d_mean = device_copy(mean), d_rstd = device_copy(rstd),
         d_dx = device_array<float>(nc), d_dgamma = device_array<float>(c), d_dbeta = device_array<float>(c);
    cases.push_back(gpt_case(
        "layernorm_forward", g.text(), 4.0 * (2 * nc + 2 * n + 2 * c), 1e-5, [=] { return y; }, stream, peak,
        [=] {
          cuda::layernorm_forward(d_x->p, d_gamma->p, d_beta->p, rows, g.dim, 1e-5f, d_y->p, d_mean->p, d_rstd->p,
                                  stream->s);
        },
        nothing, d_y));
    cases.push_back(gpt_case(
        "layernorm_backward", g.text(), 4.0 * (3 * nc + 2 * n + 3 * c), 1e-5,
        [=] {
          std::vector<float> dx(nc), dgamma(c), dbeta(c);
          cpu::layernorm_backward(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), rows, g.dim, dx.data(),
                                  dgamma.data(), dbeta.data());
          return dx;
        },
        stream, peak,
        [=] {
          cuda::layernorm_backward(d_dy->p, d_x->p, d_gamma->p, d_mean->p, d_rstd->p, rows, g.dim, d_dx->p,
                                   d_dgamma->p, d_dbeta->p, stream->s);
        },
        nothing, d_dx));
  }

  {  // GELU over the MLP's hidden layer (4 x dim wide); backward in place, as the layer runs it
    const size_t h = 4 * nc;
    const auto x = random_floats(h, 129, -4.0f, 4.0f), dy = random_floats(h, 130);
    auto d_x = device_copy(x), d_y = device_array<float>(h), d_dy = device_copy(dy);
    cases.push_back(gpt_case(
        "gelu_forward", g.text() + "x4", 4.0 * 2 * h, 1e-5,
        [=] {
          std::vector<float> y(h);
          cpu::gelu_forward(x.data(), y.data(), h);
          return y;
        },
        stream, peak, [=] { cuda::gelu_forward(d_x->p, d_y->p, h, stream->s); }, nothing, d_y));
    cases.push_back(gpt_case(
        "gelu_backward", g.text() + "x4", 4.0 * 3 * h, 1e-5,
        [=] {
          std::vector<float> dx(h);
          cpu::gelu_backward(x.data(), dy.data(), dx.data(), h);
          return dx;
        },
        stream, peak, [=] { cuda::gelu_backward(d_x->p, d_y->p, d_y->p, h, stream->s); },
        [=] { d_y->upload(dy); }, d_y));
  }

  {  // causal softmax over every head's seq x seq scores; in place, as attention runs it
    const int64_t mats = static_cast<int64_t>(g.batch) * g.heads;
    const size_t tt = static_cast<size_t>(g.seq) * g.seq, total = static_cast<size_t>(mats) * tt,
                 lower = static_cast<size_t>(mats) * g.seq * (g.seq + 1) / 2;
    const float scale = 0.125f;
    const auto scores = random_floats(total, 131, -4.0f, 4.0f), datt = random_floats(total, 132);
    std::vector<float> att(total);
    cpu::causal_softmax_forward(scores.data(), att.data(), mats, g.seq, scale);
    auto d_work = device_copy(scores), d_att = device_copy(att);
    const std::string shape = std::to_string(mats) + "x" + std::to_string(g.seq) + "^2";
    cases.push_back(gpt_case(
        "causal_softmax_fwd", shape, 4.0 * (lower + total), 1e-5, [=] { return att; }, stream, peak,
        [=] { cuda::causal_softmax_forward(d_work->p, d_work->p, mats, g.seq, scale, stream->s); },
        [=] { d_work->upload(scores); }, d_work));
    cases.push_back(gpt_case(
        "causal_softmax_bwd", shape, 4.0 * (2 * lower + total), 1e-5,
        [=] {
          std::vector<float> d(total);
          cpu::causal_softmax_backward(att.data(), datt.data(), d.data(), mats, g.seq, scale);
          return d;
        },
        stream, peak,
        [=] { cuda::causal_softmax_backward(d_att->p, d_work->p, d_work->p, mats, g.seq, scale, stream->s); },
        [=] { d_work->upload(datt); }, d_work));
  }

  {  // head permutation of the fused q, k, v projection, and back for the attention output
    const int head_dim = g.dim / g.heads;
    const size_t qkv = 3 * nc;
    const auto x = random_floats(qkv, 133), heads_in = random_floats(nc, 134);
    auto d_seq = device_copy(x), d_heads = device_array<float>(qkv), d_heads_in = device_copy(heads_in),
         d_seq_out = device_array<float>(nc);
    cases.push_back(gpt_case(
        "heads_permute", g.text() + "x3 to heads", 4.0 * 2 * qkv, 0.0,
        [=] {
          std::vector<float> src = x, out(qkv);
          cpu::heads_permute(src.data(), out.data(), g.batch, g.seq, 3, g.heads, head_dim, true);
          return out;
        },
        stream, peak,
        [=] { cuda::heads_permute(d_seq->p, d_heads->p, g.batch, g.seq, 3, g.heads, head_dim, true, stream->s); },
        nothing, d_heads));
    cases.push_back(gpt_case(
        "heads_permute", g.text() + " to sequence", 4.0 * 2 * nc, 0.0,
        [=] {
          std::vector<float> src = heads_in, out(nc);
          cpu::heads_permute(out.data(), src.data(), g.batch, g.seq, 1, g.heads, head_dim, false);
          return out;
        },
        stream, peak,
        [=] {
          cuda::heads_permute(d_seq_out->p, d_heads_in->p, g.batch, g.seq, 1, g.heads, head_dim, false, stream->s);
        },
        nothing, d_seq_out));
  }

  {  // the residual stream's skip
    const auto y0 = random_floats(nc, 135), x = random_floats(nc, 136);
    auto d_y = device_copy(y0), d_x = device_copy(x);
    cases.push_back(gpt_case(
        "add_inplace", g.text(), 4.0 * 3 * nc, 1e-6,
        [=] {
          std::vector<float> y = y0;
          for (size_t i = 0; i < nc; ++i) y[i] += x[i];
          return y;
        },
        stream, peak, [=] { cuda::add(d_y->p, d_x->p, d_y->p, nc, stream->s); }, [=] { d_y->upload(y0); }, d_y));
  }
}

// AdamW over a GPT's parameters (6 layers of 12 dim^2 + 13 dim, embeddings, ~10.8M
// for dim 384): param, m, v read and written, grad read. One step from the start.
OpCase adamw_case(size_t n, std::shared_ptr<Stream> stream, double peak) {
  const float lr = 6e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 1.0f / 16384;
  const float bc1 = 1.0f - 0.9f * 0.9f, bc2 = 1.0f - 0.95f * 0.95f;  // step 2
  const auto grad = random_floats(n, 140), param0 = random_floats(n, 141), m0 = random_floats(n, 142, -0.01f, 0.01f),
             v0 = random_floats(n, 143, 0.0f, 1e-4f);
  auto d_param = device_copy(param0), d_grad = device_copy(grad), d_m = device_copy(m0), d_v = device_copy(v0);
  return gpt_case(
      "adamw_step", std::to_string(n) + " parameters", 4.0 * 7 * static_cast<double>(n), 1e-5,
      [=] {
        std::vector<float> p = param0, m = m0, v = v0;
        cpu::adamw_step(p.data(), grad.data(), m.data(), v.data(), n, lr, beta1, beta2, eps, wd, scale, bc1, bc2);
        return p;
      },
      stream, peak,
      [=] {
        cuda::adamw_step(d_param->p, d_grad->p, d_m->p, d_v->p, n, lr, beta1, beta2, eps, wd, scale, bc1, bc2,
                         stream->s);
      },
      [=] {
        d_param->upload(param0);
        d_m->upload(m0);
        d_v->upload(v0);
      },
      d_param);
}

}  // namespace
#endif

std::vector<OpCase> cuda_cases() {
  const GpuProbe gpus = probe_gpus();
  if (gpus.devices.empty()) {
    std::printf("no GPU: CUDA versions skipped (%s)\n", gpus.reason.c_str());
    return {};
  }
#if TANDEM_HAVE_CUDA
  auto stream = std::make_shared<Stream>();
  int device = 0, clock_khz = 0, bus_bits = 0;
  KERNELS_CUDA_OK(cudaGetDevice(&device));
  const bool stated = cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess &&
                      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess &&
                      clock_khz > 0 && bus_bits > 0;
  (void)cudaGetLastError();  // an attribute the driver refused is answered below, not left for a launch to report
  const double copy = copy_gb_per_s(stream->s);
  const double peak = stated ? 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9 : copy;
  if (stated)
    std::printf("device: %s: peak memory bandwidth %.0f GB/s (driver: %d MHz memory clock x %d-bit bus x 2); a "
                "device-to-device copy reaches %.0f GB/s here; CUDA kernels are timed with events, mean of the "
                "repeats after a warm-up\n",
                gpus.devices.front().c_str(), peak, clock_khz / 1000, bus_bits, copy);
  else
    std::printf("device: %s: the driver states no memory clock or bus width; peak memory bandwidth is a "
                "device-to-device copy measured here, %.0f GB/s; CUDA kernels are timed with events, mean of the "
                "repeats after a warm-up\n",
                gpus.devices.front().c_str(), peak);
  std::vector<OpCase> cases;
  cases.push_back(sgd_case(10'000'000, stream, peak));
  cases.push_back(bias_act_case(8192, 1024, stream, peak));
  cases.push_back(softmax_case(1 << 20, 10, stream, peak));
  cases.push_back(softmax_case(16384, 1000, stream, peak));
  cases.push_back(batchnorm_case(256, 64, 32 * 32, stream, peak));
  cases.push_back(dropout_case(8192, 4096, stream, peak));
  cases.push_back(bf16_round_trip_case(size_t{1} << 24, stream, peak));
  cases.push_back(gather_case(64, stream, peak));
  cases.push_back(gather_case(4096, stream, peak));
  add_gpt_cases(cases, GptShape{}, stream, peak);
  cases.push_back(adamw_case(10'750'000, stream, peak));
  return cases;
#else
  return {};
#endif
}

}  // namespace tandem::kernels
