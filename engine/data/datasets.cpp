#include "engine/data/datasets.hpp"

#include "engine/core/error.hpp"
#include "engine/data/fashion_mnist.hpp"
#include "engine/data/synthetic.hpp"

namespace tandem {

std::unique_ptr<Dataset> make_dataset(const DataConfig& cfg, bool train) {
  if (cfg.name == "fashion-mnist") return load_fashion_mnist(cfg.dir, train);
  if (cfg.name == "synthetic")
    return make_synthetic(cfg.shape, cfg.classes, train ? cfg.train_size : cfg.test_size, cfg.seed, train ? 0 : 1);
  TANDEM_FAIL_HINT("use data.name = 'fashion-mnist' or 'synthetic'", "unknown data set '", cfg.name, "'");
}

}  // namespace tandem

namespace tandem {

void Dataset::gather_bytes(const int64_t*, int64_t, uint8_t*, int32_t*) const {
  TANDEM_FAIL("data set ", name(), " has no byte form: gather() its samples as floats (a bug in tandem's loader)");
}

}  // namespace tandem
