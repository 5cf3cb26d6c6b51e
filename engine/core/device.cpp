// What every device shares unless it knows better: host staging is plain host
// memory, an upload is a copy (the CUDA device overrides these with pinned memory
// and a copy engine), and there is no graph capture.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/core/device.hpp"
#include "engine/core/error.hpp"

namespace tandem {

void* Device::allocate_host(size_t bytes) {
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) TANDEM_FAIL_HINT("reduce the batch size or free memory on this machine", "out of host memory staging ", bytes,
                           " bytes of input for ", name());
  return p;
}

void Device::deallocate_host(void* p, size_t) { std::free(p); }

void Device::upload_normalized(float* dst, const uint8_t* src, size_t count, float scale, float shift) {
  if (kind() == DeviceKind::cpu) {  // host memory: normalise in place, no copy
    for (size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]) * scale + shift;
    return;
  }
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(src[i]) * scale + shift;
  copy_from_host(dst, host.data(), count);
}

int Device::read_doubles_later(const double* src, int count) {
  TANDEM_CHECK(count >= 0 && count <= kMaxWrite, "read_doubles_later of ", count, " values (at most ", kMaxWrite, ")");
  const int ticket = later_next_;
  later_next_ = (later_next_ + 1) % kLaterReads;
  read_doubles(later_[ticket].values, src, count);
  later_[ticket].count = count;
  return ticket;
}

void Device::collect(int ticket, double* dst) {
  TANDEM_CHECK(ticket >= 0 && ticket < kLaterReads, "collect of ticket ", ticket, " (a bug in tandem)");
  std::memcpy(dst, later_[ticket].values, static_cast<size_t>(later_[ticket].count) * sizeof(double));
}

namespace {
[[noreturn]] void no_capture(const Device& dev, const char* what) {
  TANDEM_FAIL("the ", dev.name(), " device cannot capture graphs, and was asked to ", what,
              " (a bug in tandem: callers ask can_capture() first)");
}
}  // namespace

void Device::begin_capture() { no_capture(*this, "begin a capture"); }
int Device::end_capture() { no_capture(*this, "end a capture"); }
void Device::replay(int) { no_capture(*this, "replay a graph"); }
void Device::drop_graph(int) { no_capture(*this, "drop a graph"); }

}  // namespace tandem
