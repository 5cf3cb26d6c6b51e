#pragma once
// Builds the data set an experiment names.
#include <cstdint>
#include <memory>

#include "engine/data/data_config.hpp"
#include "engine/data/dataset.hpp"

namespace tandem {

std::unique_ptr<Dataset> make_dataset(const DataConfig& cfg, bool train);

// make_dataset(cfg, train)->size(), reading no more of the files than that needs
// (fashion-mnist: its labels, not its images), for tandem sim, which needs the count
// alone: decompressing the images was most of a simulation's time.
int64_t dataset_size(const DataConfig& cfg, bool train);

// Checks that the files the data set reads are there and readable, without reading
// them, so that a run with a missing file fails before it starts any worker. Throws a
// tandem::Error naming data.dir (data.files for text), the file and what to do.
void check_dataset_files(const DataConfig& cfg);

}  // namespace tandem
