// The CUDA device against the CPU device, op by op and model by model: the ops that
// go to cuBLAS (gemm) and cuDNN (convolution, max pooling), the ones that cross
// between host and device (the loss with device labels, the batch-norm sums, byte
// uploads normalised on arrival, batches gathered on the device from a data set held
// there, and staged), the sequence-model ops' wiring (a GPT's embedding,
// layer norm, GELU, causal softmax, head permute, add_inplace, AdamW), the memory
// pool's accounting, and then whole training steps (forward, loss, backward, SGD) of
// the MLP, LeNet, LeNet with batch norm and the small ResNet, started from the same
// weights on both devices. Every comparison's tolerance is scaled by the reference's
// magnitude; exits 77 without a GPU.
#include "tests/gpu/gpu_test.hpp"

#if TANDEM_HAVE_CUDA
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "engine/core/cuda_device.hpp"
#include "engine/core/tensor.hpp"
#include "engine/data/datasets.hpp"
#include "engine/data/sampler.hpp"
#include "engine/data/synthetic.hpp"
#include "engine/nn/loss.hpp"
#include "engine/nn/model.hpp"
#include "engine/nn/optimizer.hpp"
#include "engine/nn/sgd.hpp"
#include "engine/nn/step_scalars.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/train/batch_loader.hpp"
#include "engine/train/device_input.hpp"
#include "engine/train/step.hpp"
#include "tests/unit/byte_rows_dataset.hpp"

using namespace tandem;
using gpu_test::random_floats;

namespace {

// A tensor on `dev` holding `host`.
Tensor on(Device& dev, const std::vector<float>& host, Shape shape) {
  Tensor t(dev, std::move(shape));
  if (!host.empty()) t.from_host(host.data(), host.size());
  return t;
}

std::string dims(std::initializer_list<int> d) {
  std::string s;
  for (int v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

void check_gemm(Device& gpu) {
  Device& cpu = cpu_device();
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {7, 13, 5}, {64, 256, 784}, {1024, 10, 256}, {33, 65, 0}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int lda = ta ? m : k, ldb = tb ? k : n;
        const auto a = random_floats(static_cast<size_t>(std::max(1, (ta ? k : m) * lda)), 1);
        const auto b = random_floats(static_cast<size_t>(std::max(1, (tb ? n : k) * ldb)), 2);
        const auto c0 = random_floats(static_cast<size_t>(m * n), 3);
        const int64_t na = static_cast<int64_t>(a.size()), nb = static_cast<int64_t>(b.size());
        Tensor ac = on(cpu, a, {na}), bc = on(cpu, b, {nb}), cc = on(cpu, c0, {m * n});
        Tensor ag = on(gpu, a, {na}), bg = on(gpu, b, {nb}), cg = on(gpu, c0, {m * n});
        cpu.gemm(ta, tb, m, n, k, 1.25f, ac.data(), lda, bc.data(), ldb, 0.5f, cc.data(), n);
        gpu.gemm(ta, tb, m, n, k, 1.25f, ag.data(), lda, bg.data(), ldb, 0.5f, cg.data(), n);
        GPU_CHECK_CLOSE("gemm", dims({m, n, k}) + (ta ? " A^T" : "") + (tb ? " B^T" : ""), "C", cg.to_host(),
                        cc.to_host(), 1e-5);
      }
}

// The sequence-model ops through the device interface on both devices, at a tiny
// GPT's shapes: what this checks is CudaDevice's wiring (which argument goes where);
// the kernels themselves have their tests (test_cuda_<op>.cpp). add_inplace is the add
// kernel with its output as its first input.
void check_sequence_ops(Device& gpu) {
  Device& cpu = cpu_device();
  const int batch = 2, seq = 5, dim = 12, vocab = 7, heads = 3, head_dim = dim / heads;
  const int64_t n = int64_t{batch} * seq * dim, qkv = 3 * n, mats = int64_t{batch} * heads, tt = int64_t{seq} * seq;
  const std::string shape = "2x5x12, vocab 7, 3 heads";
  std::vector<float> tokens(static_cast<size_t>(batch * seq));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<float>((i * 5) % vocab);
  const auto x = random_floats(static_cast<size_t>(qkv), 30), w = random_floats(static_cast<size_t>(vocab * dim), 31),
             p = random_floats(static_cast<size_t>(seq * dim), 32), g = random_floats(static_cast<size_t>(dim), 33),
             s = random_floats(static_cast<size_t>(mats * tt), 34, -3.0f, 3.0f);
  struct Side {
    Tensor tok, x, w, p, g, s, y, y2, m, r, dw, dp, dg, db, a, d, h, v;
  };
  auto side = [&](Device& dev) {
    return Side{on(dev, tokens, {batch * seq}), on(dev, x, {qkv}), on(dev, w, {vocab * dim}), on(dev, p, {seq * dim}),
                on(dev, g, {dim}), on(dev, s, {mats * tt}), Tensor(dev, {qkv}), Tensor(dev, {qkv}),
                Tensor(dev, {batch * seq}), Tensor(dev, {batch * seq}), on(dev, w, {vocab * dim}),
                Tensor(dev, {seq * dim}), Tensor(dev, {dim}), Tensor(dev, {dim}), Tensor(dev, {mats * tt}),
                Tensor(dev, {mats * tt}), Tensor(dev, {qkv}), on(dev, g, {dim})};
  };
  Side c = side(cpu), q = side(gpu);
  // The same calls on each device, with its own buffers.
  const auto on_both = [&](auto&& calls) {
    calls(cpu, c);
    calls(gpu, q);
  };
  const auto compare = [&](const char* op, const char* what, const Tensor& got, const Tensor& want) {
    GPU_CHECK_CLOSE(op, shape, what, got.to_host(), want.to_host(), 1e-5);
  };
  on_both([&](Device& d, Side& u) {
    d.embedding_forward(u.tok.data(), u.w.data(), u.p.data(), batch, seq, dim, vocab, u.y.data());
    d.embedding_backward(u.tok.data(), u.x.data(), batch, seq, dim, vocab, u.dw.data(), u.dp.data());
    d.layernorm_forward(u.x.data(), u.g.data(), u.v.data(), batch * seq, dim, 1e-5f, u.y2.data(), u.m.data(),
                        u.r.data());
    d.layernorm_backward(u.x.data() + n, u.x.data(), u.g.data(), u.m.data(), u.r.data(), batch * seq, dim,
                         u.h.data(), u.dg.data(), u.db.data());
    d.causal_softmax_forward(u.s.data(), u.a.data(), mats, seq, 0.5f);
    d.causal_softmax_backward(u.a.data(), u.s.data(), u.d.data(), mats, seq, 0.5f);
  });
  compare("embedding_forward", "y", q.y, c.y);
  compare("embedding_backward", "dwte", q.dw, c.dw);
  compare("embedding_backward", "dwpe", q.dp, c.dp);
  compare("layernorm_forward", "y", q.y2, c.y2);
  compare("layernorm_forward", "rstd", q.r, c.r);
  compare("layernorm_backward", "dx", q.h, c.h);
  compare("layernorm_backward", "dgamma", q.dg, c.dg);
  compare("layernorm_backward", "dbeta", q.db, c.db);
  compare("causal_softmax_forward", "att", q.a, c.a);
  compare("causal_softmax_backward", "dscores", q.d, c.d);
  // Each device's update scalars, alive until the comparisons have read the results.
  std::map<const Device*, StepScalars> scalars;
  on_both([&](Device& d, Side& u) {
    d.gelu_forward(u.x.data(), u.y.data(), static_cast<size_t>(qkv));
    d.gelu_backward(u.x.data(), u.x.data() + 1, u.y2.data(), static_cast<size_t>(qkv - 1));
    d.heads_permute(u.x.data(), u.h.data(), batch, seq, 3, heads, head_dim, true);
    d.add_inplace(u.h.data(), u.x.data() + 2, static_cast<size_t>(qkv - 2));
    d.heads_permute(u.x.data(), u.h.data(), batch, seq, 3, heads, head_dim, false);  // x = the inverse of h
    d.fill(u.dp.data() + seq * dim / 2, static_cast<size_t>(seq * dim / 2), 1e-3f);  // v >= 0, as AdamW keeps it
    double step[kStepScale + 1] = {};  // the slots the update reads (kernels/step_rule.hpp)
    step[kStepLr] = 1e-2;
    step[kStepBias1] = 0.19;
    step[kStepBias2] = 0.0975;
    step[kStepFinite] = 1.0;
    step[kStepScale] = 0.5;
    scalars[&d].write(d, kStepLr, step, kStepScale + 1);
    d.adamw_step(u.w.data(), u.dw.data(), u.dp.data(), u.dp.data() + seq * dim / 2, static_cast<size_t>(seq * dim / 2),
                 scalars[&d].on(d), 0.9f, 0.95f, 1e-8f, 0.1f);
  });
  compare("gelu_forward", "y", q.y, c.y);
  compare("gelu_backward", "dx", q.y2, c.y2);
  compare("heads_permute + add_inplace", "heads", q.h, c.h);
  compare("heads_permute", "sequence", q.x, c.x);
  compare("adamw_step", "param", q.w, c.w);
  compare("adamw_step", "m and v", q.dp, c.dp);
}

void check_conv(Device& gpu) {
  Device& cpu = cpu_device();
  for (ConvShape s : {ConvShape{4, 1, 28, 28, 6, 5, 2, 1}, ConvShape{3, 6, 14, 14, 16, 5, 0, 1},
                      ConvShape{2, 8, 9, 9, 8, 3, 1, 2}, ConvShape{0, 6, 14, 14, 16, 5, 0, 1},
                      ConvShape{1, 3, 7, 5, 4, 3, 3, 1}}) {
    const std::string shape = dims({s.batch, s.in_channels, s.height, s.width}) + " -> " +
                              dims({s.out_channels, s.kernel, s.pad, s.stride});
    const int64_t nx = int64_t{s.batch} * s.in_channels * s.height * s.width;
    const int64_t nw = int64_t{s.out_channels} * s.in_channels * s.kernel * s.kernel;
    const int64_t ny = int64_t{s.batch} * s.out_channels * s.out_h() * s.out_w();
    const auto x = random_floats(static_cast<size_t>(nx), 4), w = random_floats(static_cast<size_t>(nw), 5);
    const auto dy = random_floats(static_cast<size_t>(ny), 6);
    Tensor xc = on(cpu, x, {std::max<int64_t>(nx, 1)}), wc = on(cpu, w, {nw}), dyc = on(cpu, dy, {std::max<int64_t>(ny, 1)});
    Tensor xg = on(gpu, x, {std::max<int64_t>(nx, 1)}), wg = on(gpu, w, {nw}), dyg = on(gpu, dy, {std::max<int64_t>(ny, 1)});
    Tensor yc(cpu, {std::max<int64_t>(ny, 1)}), yg(gpu, {std::max<int64_t>(ny, 1)});
    Tensor dwc(cpu, {nw}), dwg(gpu, {nw}), dxc(cpu, {std::max<int64_t>(nx, 1)}), dxg(gpu, {std::max<int64_t>(nx, 1)});
    dwg.fill(7.0f);  // must be overwritten, even with no samples
    cpu.conv2d_forward(s, xc.data(), wc.data(), yc.data());
    gpu.conv2d_forward(s, xg.data(), wg.data(), yg.data());
    cpu.conv2d_backward(s, xc.data(), wc.data(), dyc.data(), dwc.data(), dxc.data());
    gpu.conv2d_backward(s, xg.data(), wg.data(), dyg.data(), dwg.data(), dxg.data());
    GPU_CHECK_CLOSE("conv2d", shape, "y", yg.to_host(), yc.to_host(), 1e-5);
    GPU_CHECK_CLOSE("conv2d", shape, "dw", dwg.to_host(), dwc.to_host(), 1e-4);
    GPU_CHECK_CLOSE("conv2d", shape, "dx", dxg.to_host(), dxc.to_host(), 1e-5);
  }
}

void check_maxpool(Device& gpu) {
  Device& cpu = cpu_device();
  for (auto [n, c, h, w, k, st] : {std::tuple{4, 6, 28, 28, 2, 2}, {3, 16, 10, 10, 2, 2}, {2, 3, 9, 7, 3, 2}}) {
    const int oh = (h - k) / st + 1, ow = (w - k) / st + 1;
    const int64_t nx = int64_t{n} * c * h * w, ny = int64_t{n} * c * oh * ow;
    const auto x = random_floats(static_cast<size_t>(nx), 7), dy = random_floats(static_cast<size_t>(ny), 8);
    Tensor xc = on(cpu, x, {nx}), xg = on(gpu, x, {nx}), dyc = on(cpu, dy, {ny}), dyg = on(gpu, dy, {ny});
    Tensor yc(cpu, {ny}), yg(gpu, {ny}), ac(cpu, {ny}), ag(gpu, {ny}), dxc(cpu, {nx}), dxg(gpu, {nx});
    auto idx = [](Tensor& t) { return reinterpret_cast<int32_t*>(t.data()); };
    cpu.maxpool_forward(xc.data(), n, c, h, w, k, st, yc.data(), idx(ac));
    gpu.maxpool_forward(xg.data(), n, c, h, w, k, st, yg.data(), idx(ag));
    cpu.fill(dxc.data(), static_cast<size_t>(nx), 0.0f);
    cpu.maxpool_backward(xc.data(), yc.data(), dyc.data(), idx(ac), n, c, h, w, k, st, dxc.data());
    gpu.maxpool_backward(xg.data(), yg.data(), dyg.data(), idx(ag), n, c, h, w, k, st, dxg.data());
    const std::string shape = dims({n, c, h, w}) + " k" + std::to_string(k) + " s" + std::to_string(st);
    GPU_CHECK_CLOSE("maxpool", shape, "y", yg.to_host(), yc.to_host(), 0.0);
    GPU_CHECK_CLOSE("maxpool", shape, "dx", dxg.to_host(), dxc.to_host(), 1e-6);
  }
}

void check_host_crossings(Device& gpu) {
  Device& cpu = cpu_device();
  // The loss takes device labels; the answer comes back to the host.
  for (int rows : {0, 1, 64, 1000}) {
    const auto logits = random_floats(static_cast<size_t>(rows) * 10 + 1, 9, -4.0f, 4.0f);
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int i = 0; i < rows; ++i) labels[static_cast<size_t>(i)] = (i * 7) % 10;
    Tensor labels_g(gpu, {std::max(rows, 1)});  // int32s in float storage
    gpu.copy_bytes_from_host(labels_g.data(), labels.data(), labels.size() * sizeof(int32_t));
    Tensor lc = on(cpu, logits, {rows * 10 + 1}), lg = on(gpu, logits, {rows * 10 + 1});
    Tensor dc(cpu, {rows * 10 + 1}), dg(gpu, {rows * 10 + 1});
    LossTotals totals_c, totals_g;
    cpu.softmax_xent_into(lc.data(), labels.data(), rows, 10, 10, dc.data(), totals_c.on(cpu), false);
    gpu.softmax_xent_into(lg.data(), DeviceInput::labels_of(labels_g), rows, 10, 10, dg.data(), totals_g.on(gpu), false);
    const LossResult rc = totals_c.read(), rg = totals_g.read();
    const std::string shape = std::to_string(rows) + "x10";
    GPU_CHECK_CLOSE("softmax_xent", shape, "loss", std::vector<double>{rg.loss_sum},
                    std::vector<double>{rc.loss_sum}, 1e-6);
    GPU_CHECK("softmax_xent", shape, "correct", rg.correct == rc.correct);
    GPU_CHECK_CLOSE("softmax_xent", shape, "dlogits", dg.to_host(), dc.to_host(), 1e-6);
  }
  // Batch-norm sums come back as host doubles.
  const auto x = random_floats(8 * 5 * 49, 10);
  Tensor xc = on(cpu, x, {8 * 5 * 49}), xg = on(gpu, x, {8 * 5 * 49});
  std::vector<double> sc(10), sg(10);
  cpu.batchnorm_sums(xc.data(), 8, 5, 49, sc.data());
  gpu.batchnorm_sums(xg.data(), 8, 5, 49, sg.data());
  GPU_CHECK_CLOSE("batchnorm_sums", "8x5x49", "sums", sg, sc, 1e-9);
  // Bytes staged in pinned memory, uploaded and normalised on arrival.
  const size_t n = 3 * 784 + 5;
  auto* staged = static_cast<uint8_t*>(gpu.allocate_host(n));
  for (size_t i = 0; i < n; ++i) staged[i] = static_cast<uint8_t>((i * 37) % 256);
  Tensor yc(cpu, {static_cast<int64_t>(n)}), yg(gpu, {static_cast<int64_t>(n)});
  cpu.upload_normalized(yc.data(), staged, n, 1.0f / (255.0f * 0.353f), -0.286f / 0.353f);
  gpu.upload_normalized(yg.data(), staged, n, 1.0f / (255.0f * 0.353f), -0.286f / 0.353f);
  GPU_CHECK_CLOSE("upload_normalized", std::to_string(n), "values", yg.to_host(), yc.to_host(), 1e-6);
  gpu.deallocate_host(staged, n);
  // The pool: a freed tensor's block is reused, and the accounting returns to where it was.
  const size_t before = gpu.bytes_in_use();
  { Tensor t(gpu, {1 << 20}); GPU_CHECK("pool", "4 MiB", "in use grows", gpu.bytes_in_use() >= before + (4u << 20)); }
  GPU_CHECK("pool", "4 MiB", "in use back", gpu.bytes_in_use() == before);
}

// A batch through each way to the GPU (engine/train/device_input.hpp) against the
// CPU's, and the test set's evaluation sums.
void check_device_input(Device& gpu) {
  Device& cpu = cpu_device();
  auto bits = [](const Tensor& t) {
    const std::vector<float> h = t.to_host();
    std::vector<uint32_t> b(h.size());
    if (!h.empty()) std::memcpy(b.data(), h.data(), h.size() * sizeof(float));
    return b;
  };
  for (const int64_t targets : {1, 3}) {
    const testing::ByteRowsDataset data(300, {1, 28, 28}, targets, 10);
    DeviceInput held(gpu, data, "always"), reference(cpu, data, "never");
    GPU_CHECK("device_input", "byte rows", "held on the GPU", held.resident());
    for (const int64_t count : {0, 1, 64, 500}) {
      std::vector<int64_t> idx(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) idx[static_cast<size_t>(i)] = (i * 131 + 7) % data.size();
      Tensor xg, lg, xc, lc;
      held.fill(idx.data(), count, xg, lg);
      reference.fill(idx.data(), count, xc, lc);
      const std::string shape = std::to_string(count) + " of 784 bytes, " + std::to_string(targets) + " labels";
      GPU_CHECK("device_input", shape, "samples bit for bit", bits(xg) == bits(xc));
      GPU_CHECK("device_input", shape, "labels", bits(lg) == bits(lc));
    }
  }
  // A text's windows: strided rows, overlapping (the training set's start every
  // byte), their labels the next bytes.
  struct TempFile {  // removed however the checks end
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("tandem-gpu-text-" + std::to_string(::getpid()) + ".txt");
    ~TempFile() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } corpus;
  {
    std::ofstream out(corpus.path, std::ios::binary);
    for (int i = 0; i < 5000; ++i) out.put(static_cast<char>((i * 131 + (i >> 8) * 7) & 0xff));
  }
  DataConfig text;
  text.name = "text";
  text.files = {corpus.path.string()};
  text.seq_len = 64;
  for (const bool train : {true, false}) {
    const auto windows = make_dataset(text, train);
    DeviceInput held(gpu, *windows, "always"), reference(cpu, *windows, "never");
    std::vector<int64_t> idx(40);
    for (int64_t i = 0; i < 40; ++i) idx[static_cast<size_t>(i)] = (i * 97 + 5) % windows->size();
    Tensor xg, lg, xc, lc;
    held.fill(idx.data(), 40, xg, lg);
    reference.fill(idx.data(), 40, xc, lc);
    const std::string shape = std::string(train ? "train" : "validation") + " windows of 64";
    GPU_CHECK("device_input", shape, "tokens bit for bit", bits(xg) == bits(xc));
    GPU_CHECK("device_input", shape, "next tokens", bits(lg) == bits(lc));
  }
  // Staged floats (synthetic data has no rows): uploaded exactly.
  const auto synthetic = make_synthetic({3, 5, 5}, 4, 100, 2);
  DeviceInput staged(gpu, *synthetic, "auto"), reference(cpu, *synthetic, "never");
  GPU_CHECK("device_input", "synthetic", "staged", !staged.resident());
  std::vector<int64_t> idx{3, 99, 0, 3, 50};
  Tensor xg, lg, xc, lc;
  staged.fill(idx.data(), 5, xg, lg);
  reference.fill(idx.data(), 5, xc, lc);
  GPU_CHECK("device_input", "synthetic 5", "samples bit for bit", bits(xg) == bits(xc));
  GPU_CHECK("device_input", "synthetic 5", "labels", bits(lg) == bits(lc));
}

// One training step of a model on both devices from the same weights and batch.
void check_model(Device& gpu, const std::string& experiment, const std::vector<std::string>& overrides,
                 const std::string& label, int64_t batch) {
  ExperimentConfig cfg = load_experiment(experiment, overrides);
  auto data = make_dataset(cfg.data, true);
  GlobalSampler sampler(data->size(), batch, cfg.seed);
  struct Side {
    Model model;
    Sgd sgd;
    TrainStep step;
    BatchLoader loader;
    Side(Device& d, const ExperimentConfig& c, const Dataset& data, const GlobalSampler& s)
        : model(d, c.model, c.seed), sgd(d, model.param_count(), c.optimizer), step(model, sgd), loader(data, s, d) {}
  };
  Side c(cpu_device(), cfg, *data, sampler), g(gpu, cfg, *data, sampler);
  GPU_CHECK_CLOSE(label, "init", "parameters", g.model.params().to_host(), c.model.params().to_host(), 0.0);
  StepContext ctx;
  ctx.seed = 99;
  for (int64_t t = 0; t < 3; ++t) {
    const std::string shape = "batch " + std::to_string(batch) + " step " + std::to_string(t);
    const LossResult rc = c.step.compute(c.loader.load(t, 0, batch), c.loader.labels(), ctx);
    const LossResult rg = g.step.compute(g.loader.load(t, 0, batch), g.loader.labels(), ctx);
    GPU_CHECK_CLOSE(label, shape, "loss", std::vector<double>{rg.loss_sum}, std::vector<double>{rc.loss_sum}, 1e-4);
    GPU_CHECK_CLOSE(label, shape, "gradients", g.model.grads().to_host(), c.model.grads().to_host(), 1e-3);
    c.step.update(batch, cfg.optimizer.lr);
    g.step.update(batch, cfg.optimizer.lr);
    GPU_CHECK_CLOSE(label, shape, "parameters", g.model.params().to_host(), c.model.params().to_host(), 1e-4);
  }
  // A worker a plan gives no samples (issue 19, item 1): an empty forward and backward
  // (k = 0 GEMMs, empty convolutions), a zero gradient, and the update of the global
  // batch the others computed, as on the CPU.
  const LossResult rc = c.step.compute(c.loader.load(3, 0, 0), c.loader.labels(), ctx);
  const LossResult rg = g.step.compute(g.loader.load(3, 0, 0), g.loader.labels(), ctx);
  GPU_CHECK(label, "local batch 0", "no loss, nothing right", rc.loss_sum == 0.0 && rg.loss_sum == 0.0 &&
                                                                 rc.correct == 0 && rg.correct == 0);
  GPU_CHECK_CLOSE(label, "local batch 0", "gradients", g.model.grads().to_host(), c.model.grads().to_host(), 0.0);
  c.step.update(batch, cfg.optimizer.lr);
  g.step.update(batch, cfg.optimizer.lr);
  GPU_CHECK_CLOSE(label, "local batch 0", "parameters", g.model.params().to_host(), c.model.params().to_host(), 1e-4);
}

// One fused step on three sides: q captured and replayed on the GPU, e op by op on the
// GPU (bit for bit q's), c on the CPU (q's to float rounding).
void compare_fused(const std::string& shape, const FusedResult& rq, const FusedResult& re, const FusedResult& rc,
                   Model& q, Model& e, Model& c) {
  GPU_CHECK("fused", shape, "graph replay's loss bit for bit", rq.loss.loss_sum == re.loss.loss_sum);
  GPU_CHECK_CLOSE("fused", shape, "loss", std::vector<double>{rq.loss.loss_sum}, std::vector<double>{rc.loss.loss_sum},
                  1e-4);
  GPU_CHECK_CLOSE("fused", shape, "replayed parameters bit for bit", q.params().to_host(), e.params().to_host(), 0.0);
  GPU_CHECK_CLOSE("fused", shape, "parameters", q.params().to_host(), c.params().to_host(), 1e-4);
}

// A small GPT's fused step (the experiment's default: no dropout, so capturable) on
// the GPU captured and replayed, against the same op by op on the GPU (bit for bit)
// and on the CPU (float rounding). Batched attention GEMMs, layer norm and the causal
// softmax in a graph: their reductions' scratch is stream-ordered (cudaMallocAsync).
void check_fused_gpt(Device& gpu) {
  ModelSpec spec;
  spec.name = "gpt";
  spec.input = {32};
  spec.classes = 64;
  spec.layers = {{"embedding", {{"n_embd", 64}, {"seq_len", 32}}, "test:1"}};
  for (int l = 0; l < 2; ++l) spec.layers.push_back({"transformer_block", {{"n_head", 4}, {"n_layer", 2}}, "test:2"});
  spec.layers.push_back({"layernorm", {}, "test:3"});
  spec.layers.push_back({"lm_head", {{"tied", 1}}, "test:4"});
  OptimizerConfig cfg;
  cfg.name = "adamw";
  cfg.lr = 1e-3;
  cfg.clip_grad_norm = 1.0;
  struct Side {
    Model model;
    std::unique_ptr<Optimizer> opt;
    TrainStep step;
    Tensor x, labels;
    Side(Device& d, const ModelSpec& s, const OptimizerConfig& c, bool graphs, const std::vector<float>& tokens,
         const std::vector<int32_t>& next)
        : model(d, s, 5), opt(make_optimizer(d, model, c)), step(model, *opt), x(on(d, tokens, {16, 32})),
          labels(d, {16 * 32}) {
      step.set_graphs(graphs);
      std::vector<float> bits(next.size());
      std::memcpy(bits.data(), next.data(), next.size() * sizeof(int32_t));
      labels.from_host(bits.data(), bits.size());  // int32 in a float tensor's storage, as DeviceInput keeps them
    }
  };
  std::vector<float> tokens(16 * 32);
  std::vector<int32_t> next(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<float>((i * 13 + 5) % 64);
    next[i] = static_cast<int32_t>((i * 13 + 18) % 64);
  }
  Side c(cpu_device(), spec, cfg, false, tokens, next), e(gpu, spec, cfg, false, tokens, next),
      q(gpu, spec, cfg, true, tokens, next);
  GPU_CHECK("fused", "gpt", "captured", q.step.graphs());
  StepContext ctx;
  for (int t = 0; t < 6; ++t) {
    const std::string shape = "gpt step " + std::to_string(t);
    const double lr = 1e-3 / (1.0 + 0.1 * t);
    const FusedResult rc = c.step.fused(c.x, DeviceInput::labels_of(c.labels), ctx, lr);
    const FusedResult re = e.step.fused(e.x, DeviceInput::labels_of(e.labels), ctx, lr);
    const FusedResult rq = q.step.fused(q.x, DeviceInput::labels_of(q.labels), ctx, lr);
    compare_fused(shape, rq, re, rc, q.model, e.model, c.model);
  }
  // Op by op while its buffers grow, then captured: the last steps are replays.
  GPU_CHECK("fused", "gpt", "replays", q.step.graph_counts().replayed >= 3);
}

// One worker training an experiment's model on a device from its own loader: fused
// steps captured in graphs or not (`graphs`), computes replayed from graphs or not
// (`compute_graphs`).
struct TrainingSide {
  Model model;
  std::unique_ptr<Optimizer> opt;
  TrainStep step;
  BatchLoader loader;
  TrainingSide(Device& d, const ExperimentConfig& c, const Dataset& data, const GlobalSampler& s, bool graphs,
               bool compute_graphs = false)
      : model(d, c.model, c.seed), opt(make_optimizer(d, model, c.optimizer)), step(model, *opt, c.accumulate),
        loader(data, s, d) {
    step.set_graphs(graphs);
    step.set_compute_graphs(compute_graphs);
  }
};

// The fused step's device ops (kernels/step_rule.hpp) against the CPU's, then the
// fused step itself: captured in CUDA graphs and replayed, it must train bit for bit
// what the same step queued op by op trains on the GPU, and what the CPU trains to
// float rounding; a step with a NaN is skipped on the device.
void check_fused(Device& gpu) {
  Device& cpu = cpu_device();
  const auto slots = [](Device& dev, StepScalars& s) {  // every slot, waiting for the device
    std::vector<double> v(kStepSlots);
    dev.read_doubles(v.data(), s.on(dev), kStepSlots);
    return v;
  };
  const auto g = random_floats(1000, 8);
  Tensor gg = on(gpu, g, {1000});
  StepScalars sg, sc;
  double* dg = sg.on(gpu);
  gpu.sum_squares_into(gg.data(), 1000, dg + kStepGradSq);
  const double host_sq = gpu.sum_squares(gg.data(), 1000);
  double known[kStepHostSlots] = {};
  known[kStepLr] = 0.1;
  known[kStepPredictions] = 64.0;
  known[kStepBiasIfSkipped1] = 0.5;
  known[kStepBiasIfSkipped2] = 0.25;
  known[kStepBiasIfTaken1] = 0.75;
  known[kStepBiasIfTaken2] = 0.375;
  known[kStepPending] = 1.0;  // the step before (finite 0 in a fresh block) was skipped: the first pair
  sg.write(gpu, kStepLr, known, kStepHostSlots);
  sc.write(cpu, kStepLr, known, kStepHostSlots);
  StepScalars totals_g, totals_c;  // its first two slots stand in for the loss totals
  const double totals[] = {12.5, 40.0};
  totals_g.write(gpu, 0, totals, 2);
  totals_c.write(cpu, 0, totals, 2);
  const StepRule rule{0.01};
  gpu.decide_step(dg, totals_g.on(gpu), rule);
  std::vector<double> vg = slots(gpu, sg);
  GPU_CHECK("sum_squares_into", "1000", "the host's sum_squares", vg[kStepGradSq] == host_sq);
  sc.write(cpu, kStepGradSq, &vg[kStepGradSq], 1);
  cpu.decide_step(sc.on(cpu), totals_c.on(cpu), rule);
  GPU_CHECK_CLOSE("decide_step", "clipped", "slots", vg, slots(cpu, sc), 1e-15);
  GPU_CHECK("decide_step", "clipped", "finite", vg[kStepFinite] == 1.0);
  GPU_CHECK("decide_step", "clipped", "bias corrections of a skipped step before",
            vg[kStepBias1] == 0.5 && vg[kStepBias2] == 0.25);
  // A skipped step changes nothing.
  const double inf = INFINITY;
  sg.write(gpu, kStepGradSq, &inf, 1);
  gpu.decide_step(dg, totals_g.on(gpu), rule);  // the step before (the one above) was taken
  vg = slots(gpu, sg);
  GPU_CHECK("decide_step", "Inf gradient", "not finite", vg[kStepFinite] == 0.0);
  GPU_CHECK("decide_step", "Inf gradient", "bias corrections of a taken step before",
            vg[kStepBias1] == 0.75 && vg[kStepBias2] == 0.375);
  Tensor p = on(gpu, g, {1000}), v(gpu, {1000});
  v.fill(0.5f);
  gpu.sgd_step(p.data(), gg.data(), v.data(), 1000, dg, 0.9f, 0.01f, false);
  GPU_CHECK_CLOSE("sgd_step", "skipped", "param", p.to_host(), g, 0.0);
  GPU_CHECK_CLOSE("sgd_step", "skipped", "velocity", v.to_host(), std::vector<float>(1000, 0.5f), 0.0);

  const std::string root = TANDEM_SOURCE_DIR;
  for (const char* optimizer : {"sgd", "adamw"}) {
    // SGD with dropout: its masks, keyed by the seed the fused step writes to device
    // memory, must be the CPU's bit for bit, replays included.
    ExperimentConfig cfg = load_experiment(root + "/scripts/experiments/quickstart.lua",
                                           {std::string("optimizer=") + optimizer, "clip_grad_norm=0.5",
                                            std::string("model_args.dropout=") + (optimizer[0] == 's' ? "0.2" : "0")});
    auto data = make_dataset(cfg.data, true);
    GlobalSampler sampler(data->size(), 64, cfg.seed);
    using Side = TrainingSide;
    Side c(cpu, cfg, *data, sampler, false), e(gpu, cfg, *data, sampler, false), q(gpu, cfg, *data, sampler, true);
    GPU_CHECK(optimizer, "fused", "a GPU captures the MLP's step", q.step.graphs() && !e.step.graphs());
    StepContext ctx;
    for (int64_t t = 0; t < 10; ++t) {
      const int64_t batch = t % 2 ? 40 : 64;
      const bool poison = t == 7;
      const std::string shape = std::string(optimizer) + " batch " + std::to_string(batch) + " step " +
                                std::to_string(t);
      ctx.seed = 99 + (static_cast<uint64_t>(t) << 40);  // both halves of the seed change
      const double lr = cfg.optimizer.lr / (1.0 + 0.1 * static_cast<double>(t));
      const FusedResult rc = c.step.fused(c.loader.load(t, 0, batch), c.loader.labels(), ctx, lr, poison);
      const FusedResult re = e.step.fused(e.loader.load(t, 0, batch), e.loader.labels(), ctx, lr, poison);
      const FusedResult rq = q.step.fused(q.loader.load(t, 0, batch), q.loader.labels(), ctx, lr, poison);
      GPU_CHECK("fused", shape, "finite as on the CPU", rc.finite == !poison && re.finite == !poison &&
                                                             rq.finite == !poison);
      compare_fused(shape, rq, re, rc, q.model, e.model, c.model);
    }
    const GraphCounts& n = q.step.graph_counts();
    std::printf("%s: %lld replays of %lld captured graphs, %lld steps op by op\n", optimizer,
                static_cast<long long>(n.replayed), static_cast<long long>(n.captured),
                static_cast<long long>(n.eager));
    GPU_CHECK("fused", optimizer, "graphs captured and replayed", n.captured >= 1 && n.replayed >= 4);
    GPU_CHECK("fused", optimizer, "the skipped step not counted", q.opt->steps() == 9 && e.opt->steps() == 9);
  }
  check_fused_gpt(gpu);
}

// The step op by op with its compute replayed from graphs (several workers, a policy:
// TrainStep::set_compute_graphs): two local batches in turn at two positions in the
// global batch, dropout on. Forward, loss and backward replayed must give the loss
// and the gradients of the same compute queued op by op, bit for bit, and so the
// same parameters after each update.
void check_compute_graphs(Device& gpu) {
  const std::string root = TANDEM_SOURCE_DIR;
  for (const char* accumulate : {"accumulate=1", "accumulate=2"}) {
    ExperimentConfig cfg =
        load_experiment(root + "/scripts/experiments/quickstart.lua", {"model_args.dropout=0.2", accumulate});
    auto data = make_dataset(cfg.data, true);
    GlobalSampler sampler(data->size(), 104, cfg.seed);
    TrainingSide e(gpu, cfg, *data, sampler, true, false), q(gpu, cfg, *data, sampler, true, true);
    GPU_CHECK("compute graphs", accumulate, "on for one side only", q.step.compute_graphs() && !e.step.compute_graphs());
    for (int64_t t = 0; t < 10; ++t) {
      const bool second = t % 2;
      const int64_t batch = second ? 40 : 64, offset = second ? 64 : 0;
      const std::string shape =
          std::string(accumulate) + " batch " + std::to_string(batch) + " step " + std::to_string(t);
      StepContext ctx;
      ctx.seed = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(t + 1);  // both halves change
      ctx.first_sample = offset;
      const LossResult re = e.step.compute(e.loader.load(t, offset, batch), e.loader.labels(), ctx);
      const LossResult rq = q.step.compute(q.loader.load(t, offset, batch), q.loader.labels(), ctx);
      GPU_CHECK("compute graphs", shape, "loss bit for bit", rq.loss_sum == re.loss_sum && rq.correct == re.correct);
      GPU_CHECK_CLOSE("compute graphs", shape, "gradients bit for bit", q.model.grads().to_host(),
                      e.model.grads().to_host(), 0.0);
      e.step.update(104, cfg.optimizer.lr);
      q.step.update(104, cfg.optimizer.lr);
      GPU_CHECK_CLOSE("compute graphs", shape, "parameters bit for bit", q.model.params().to_host(),
                      e.model.params().to_host(), 0.0);
    }
    const GraphCounts& n = q.step.graph_counts();
    std::printf("compute graphs, %s: %lld replays of %lld captured graphs, %lld op by op\n", accumulate,
                static_cast<long long>(n.replayed), static_cast<long long>(n.captured),
                static_cast<long long>(n.eager));
    GPU_CHECK("compute graphs", accumulate, "both inputs captured and replayed", n.captured >= 2 && n.replayed >= 4);
  }
}

}  // namespace

int main() {
  return gpu_test::run("cuda device", [](cudaStream_t) {
    const std::unique_ptr<Device> gpu = make_cuda_device(CudaOptions{});
    std::printf("device %s\n", gpu->name().c_str());
    check_gemm(*gpu);
    check_sequence_ops(*gpu);
    check_conv(*gpu);
    check_maxpool(*gpu);
    check_host_crossings(*gpu);
    check_device_input(*gpu);
    check_fused(*gpu);
    check_compute_graphs(*gpu);
    const std::string root = TANDEM_SOURCE_DIR;
    check_model(*gpu, root + "/scripts/experiments/quickstart.lua", {"model_args.dropout=0.2"}, "mlp", 64);
    check_model(*gpu, root + "/scripts/experiments/lenet.lua", {}, "lenet", 32);
    check_model(*gpu, root + "/scripts/experiments/lenet.lua", {"model_args.batchnorm=true"}, "lenet-bn", 16);
    check_model(*gpu, root + "/scripts/experiments/resnet.lua", {}, "resnet", 8);
  });
}

#else
int main() { return tandem::gpu_test::skip_without_cuda(); }
#endif
