#pragma once
// Fashion-MNIST from Debian's dataset-fashion-mnist (gzipped IDX files): 60,000
// training and 10,000 test images of 28x28, 10 classes. Pixels stay uint8 in memory
// (47 MB for the training set instead of 188 MB as floats) and are normalised as
// they are gathered into a batch.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/dataset.hpp"

namespace tandem {

// Mean and standard deviation of the training images' pixels scaled to [0, 1]: the
// normalisation (x - mean) / std keeps inputs near zero mean, unit variance.
constexpr float kFashionMnistMean = 0.2860f;
constexpr float kFashionMnistStd = 0.3530f;

std::unique_ptr<Dataset> load_fashion_mnist(const std::string& dir, bool train);
// How many samples load_fashion_mnist(dir, train) holds, from the labels file alone
// (60 KB, where the images are 47 MB to decompress).
int64_t fashion_mnist_size(const std::string& dir, bool train);

// The files load_fashion_mnist reads from dir: training images and labels, then the
// test set's.
std::vector<std::string> fashion_mnist_files(const std::string& dir);

}  // namespace tandem
