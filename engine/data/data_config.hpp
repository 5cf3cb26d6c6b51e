#pragma once
// The data set's settings, owned by data so that the readers need nothing from
// training; engine/train/config.hpp holds one inside ExperimentConfig, and
// scripts/tandem/experiment.lua documents each key.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.hpp"

namespace tandem {

struct DataConfig {
  std::string name = "fashion-mnist";  // fashion-mnist | cifar10 | synthetic | text | tokens
  std::string dir = "/usr/share/datasets/fashion-mnist";
  // synthetic only: shape of one sample, number of classes, train/test sizes.
  Shape shape = {1, 28, 28};
  int classes = 10;
  int64_t train_size = 60000;
  int64_t test_size = 10000;
  uint64_t seed = 7;
  // text only (engine/data/text_corpus.hpp): the files read as one byte stream (a
  // folder: its text files, by name), the window of one sample, and the fraction of
  // the stream, at its end, held out for validation.
  std::vector<std::string> files = {"/usr/share/games/fortunes"};
  int seq_len = 128;
  double validation = 0.1;
  // tokens only (engine/data/token_files.hpp): the splits' files or globs (data.train,
  // and data.validation given as files), the vocabulary every token must be below,
  // the files' format, and the most validation windows one evaluation reads (0: all).
  // seq_len above is the window of one sample.
  std::vector<std::string> train;
  std::vector<std::string> validation_files;
  int vocab = 50257;
  std::string format = "auto";
  int64_t validation_windows = 512;
  // cifar10 only (engine/data/cifar10.hpp): random crops and flips of the training
  // images, drawn from seed above.
  bool augment = true;
  // Whether the data set is held in the device's memory and gathered there by index:
  // 'auto', 'always' or 'never' (engine/train/device_input.hpp).
  std::string on_device = "auto";
};

}  // namespace tandem
