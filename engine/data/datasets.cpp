#include "engine/data/datasets.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/core/error.hpp"
#include "engine/data/cifar10.hpp"
#include "engine/data/fashion_mnist.hpp"
#include "engine/data/synthetic.hpp"
#include "engine/data/text_corpus.hpp"
#include "engine/data/token_files.hpp"

namespace tandem {

std::unique_ptr<Dataset> make_dataset(const DataConfig& cfg, bool train) {
  if (cfg.name == "fashion-mnist") return load_fashion_mnist(cfg.dir, train);
  if (cfg.name == "cifar10") return load_cifar10(cfg, train);
  if (cfg.name == "synthetic")
    return make_synthetic(cfg.shape, cfg.classes, train ? cfg.train_size : cfg.test_size, cfg.seed, train ? 0 : 1);
  if (cfg.name == "text") return make_text_dataset(cfg, train);
  if (cfg.name == "tokens") return make_token_dataset(cfg, train);
  TANDEM_FAIL_HINT("use data.name = 'fashion-mnist', 'cifar10', 'synthetic', 'text' or 'tokens'", "unknown data set '",
                   cfg.name, "'");
}

int64_t dataset_size(const DataConfig& cfg, bool train) {
  if (cfg.name == "fashion-mnist") return fashion_mnist_size(cfg.dir, train);
  if (cfg.name == "synthetic") return train ? cfg.train_size : cfg.test_size;
  if (cfg.name == "cifar10") return cifar10_size(cfg.dir, train);
  return make_dataset(cfg, train)->size();
}

void check_dataset_files(const DataConfig& cfg) {
  if (cfg.name == "text") {
    for (const std::string& f : text_corpus_files(cfg.files))
      if (!std::ifstream(f, std::ios::binary))
        TANDEM_FAIL_HINT("check the file's permissions, or point data.files at readable text files", "data.files: '",
                         f, "' cannot be read");
    return;
  }
  if (cfg.name == "tokens") return check_token_files(cfg);
  if (cfg.name == "cifar10") return check_cifar10_files(cfg.dir);
  if (cfg.name != "fashion-mnist") return;  // synthetic data is generated
  const std::vector<std::string> files = fashion_mnist_files(cfg.dir);
  std::string names;
  for (const std::string& f : files) names += (names.empty() ? "" : ", ") + f.substr(f.find_last_of('/') + 1);
  const std::string hint = "install the data set with `apt-get install dataset-fashion-mnist`, or point data.dir=... "
                           "at a folder holding " + names;
  std::error_code ec;
  if (!std::filesystem::is_directory(cfg.dir, ec))
    TANDEM_FAIL_HINT(hint, "data.dir = '", cfg.dir, "' is not a folder: fashion-mnist reads its IDX files from there");
  for (const std::string& f : files) {
    if (!std::filesystem::exists(f, ec))
      TANDEM_FAIL_HINT(hint, "data file '", f, "' does not exist (data.dir = '", cfg.dir, "')");
    if (!std::ifstream(f, std::ios::binary))
      TANDEM_FAIL_HINT("check the file's permissions, or " + hint, "data file '", f,
                       "' cannot be read (data.dir = '", cfg.dir, "')");
  }
}

}  // namespace tandem

namespace tandem {

void Dataset::gather_bytes(const int64_t*, int64_t, uint8_t*, int32_t*) const {
  TANDEM_FAIL("data set ", name(), " has no byte form: gather() its samples as floats (a bug in tandem's loader)");
}

}  // namespace tandem
