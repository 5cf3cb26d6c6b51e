#pragma once
// CIFAR-10, the binary version (cifar-10-binary.tar.gz from the CIFAR page, unpacked:
// cifar-10-batches-bin/): data_batch_1.bin ... data_batch_5.bin (50,000 training
// images) and test_batch.bin (10,000), each a run of 3,073-byte records: the label
// (0-9), then the 32x32 image's red, green and blue planes, row by row. Nothing
// ships with tandem: data.dir names the folder.
//
// Samples are {3, 32, 32}, normalised per channel by the training set's mean and
// standard deviation (torchvision's usual constants). With data.augment (the
// default), training samples get the standard augmentation: a random 32x32 crop of
// the image padded by 4 pixels (the padding black, as torchvision pads before it
// normalises) and a horizontal flip half the time, drawn from data.seed, the epoch
// and the sample's index (Dataset::gather_drawn): any plan trains on the same
// augmented samples. The test set is never augmented.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/data_config.hpp"
#include "engine/data/dataset.hpp"

namespace tandem {

constexpr int kCifarSide = 32;
constexpr int kCifarChannels = 3;
constexpr int kCifarClasses = 10;
constexpr int64_t kCifarImageBytes = kCifarChannels * kCifarSide * kCifarSide;
constexpr int64_t kCifarRecordBytes = 1 + kCifarImageBytes;
constexpr int kCifarPad = 4;
constexpr std::array<float, 3> kCifarMean = {0.4914f, 0.4822f, 0.4465f};
constexpr std::array<float, 3> kCifarStd = {0.2470f, 0.2435f, 0.2616f};

// The files of the training set (train) or the test set under dir.
std::vector<std::string> cifar10_files(const std::string& dir, bool train);
// Checks they are there, readable, and whole records, without reading them; throws
// naming data.dir and saying where to get the data.
void check_cifar10_files(const std::string& dir);
std::unique_ptr<Dataset> load_cifar10(const DataConfig& cfg, bool train);
// How many samples load_cifar10 holds, from the files' sizes (nothing read).
int64_t cifar10_size(const std::string& dir, bool train);

// One sample's crop and flip (the augmentation of sample `index` in `epoch`).
struct CifarDraw {
  int dx = kCifarPad, dy = kCifarPad;  // the crop's corner in the padded image, 0..8
  bool flip = false;
};
CifarDraw cifar10_draw(uint64_t seed, int64_t epoch, int64_t index);

}  // namespace tandem
