// tandem_kernels: validate and benchmark every kernel version against its reference.
//   tandem_kernels [--op NAME] [--repeat N] [--out FILE]
// Prints one line per (op case, version): the scaled error against the reference,
// the median time, and GB/s (against a triad moving as many bytes on this core) or
// GFLOP/s (against a large SGEMM); exits non-zero if any version is wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.hpp"
#include "tools/kernels/harness.hpp"

using namespace tandem::kernels;

namespace {

double seconds_of(const std::function<void()>& f, int repeat) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// This core's bandwidth for `bytes` of traffic: a triad moving as many bytes, so a
// kernel whose data sits in a cache is compared with streaming from that cache
// (and one that streams from memory, with memory).
double triad_gb_per_s(double bytes, int repeat) {
  const size_t n = std::max<size_t>(1024, static_cast<size_t>(bytes / 12.0));
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  const double s = seconds_of([&] {
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 0.5f * c[i];
  }, repeat);
  return 3.0 * 4.0 * static_cast<double>(n) / s / 1e9;
}

// This core's arithmetic: a large single-threaded SGEMM.
double peak_gflops() {
  const int m = 1024;
  std::vector<float> a(static_cast<size_t>(m) * m, 1.0f), b(a), c(a);
  const double s = seconds_of([&] {
    tandem::cpu::gemm(false, false, m, m, m, 1.0f, a.data(), m, b.data(), m, 0.0f, c.data(), m);
  }, 3);
  return 2.0 * m * m * static_cast<double>(m) / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only, out;
  int repeat = 21;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--op") only = argv[i + 1];
    else if (a == "--repeat") repeat = std::stoi(argv[i + 1]);
    else if (a == "--out") out = argv[i + 1];
  }
  tandem::cpu::set_blas_threads(1);
  const double bw = triad_gb_per_s(96.0 * (1 << 20), 5), flops = peak_gflops();
  std::printf("device: cpu, one core: triad from memory %.1f GB/s, sgemm %.1f GFLOP/s; memory-bound kernels are "
              "compared with a triad moving as many bytes\n", bw, flops);
  nlohmann::json result{{"device", "cpu (one core)"}, {"memory_triad_gb_per_s", bw}, {"peak_gflops", flops}};
  std::vector<OpCase> cases = cpu_cases();
  for (OpCase& c : cuda_cases()) cases.push_back(std::move(c));
  bool all_ok = true;
  for (const OpCase& c : cases) {
    if (!only.empty() && c.op != only) continue;
    const std::vector<float> want = c.reference();
    for (const Version& v : c.versions) {
      v.run();
      const double err = scaled_error(v.output(), want);
      const bool ok = err <= c.tolerance;
      all_ok = all_ok && ok;
      const double s = v.seconds ? v.seconds(repeat) : seconds_of(v.run, repeat);
      const bool memory_bound = c.flops == 0.0;
      const double rate = memory_bound ? c.bytes / s / 1e9 : c.flops / s / 1e9;
      const double peak = memory_bound ? (v.peak_gb_per_s > 0.0 ? v.peak_gb_per_s : triad_gb_per_s(c.bytes, repeat))
                                       : flops;
      std::printf("%-18s %-22s %-16s error %.1e %s  %9.1f us  %7.1f %s = %.2f of peak\n", c.op.c_str(),
                  c.shape.c_str(), v.name.c_str(), err, ok ? "ok  " : "BAD ", s * 1e6, rate,
                  memory_bound ? "GB/s" : "GFLOP/s", rate / peak);
      result["cases"].push_back({{"op", c.op}, {"shape", c.shape}, {"version", v.name}, {"scaled_error", err},
                                 {"ok", ok}, {"us", s * 1e6}, {memory_bound ? "gb_per_s" : "gflops", rate},
                                 {"fraction_of_peak", rate / peak}});
    }
  }
  if (!out.empty()) std::ofstream(out) << result.dump(2) << "\n";
  return all_ok ? 0 : 1;
}
