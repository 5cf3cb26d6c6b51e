#pragma once
// Moves a batch of samples from a data set into device tensors: the samples, and
// their labels as int32 in device memory (a float tensor's storage: the loss op
// reads them there). The way is chosen once, when the input is made:
//
//  - Resident. A data set stored as rows of bytes (Dataset::ByteRows: Fashion-MNIST,
//    the text corpus) is held whole in the device's memory, with its byte-to-value
//    table. A batch then costs one small upload (its indices) and one gather kernel
//    on the device: no host gather, no sample upload, and the host is free as soon
//    as it queued them. On the CPU the device's memory is the host's, so the data
//    set's own rows are used and nothing is copied.
//  - Staged, on a GPU, for the rest (synthetic data, or a data set too big to hold):
//    gathered on the host into pinned memory (as bytes where the data set has a byte
//    form: a quarter of the traffic, normalised by a kernel on arrival) and uploaded
//    on the device's copy engine, overlapping whatever the device still computes.
//  - Direct, on the CPU for a data set without rows: gathered straight into the
//    tensors.
//
// data.on_device picks: 'auto' holds the data set on the device when it has rows and
// they take at most an eighth of the device's memory and half of what is free;
// 'always' holds it or fails saying why; 'never' stages (a GPU) or gathers directly
// (the CPU). The resident and the direct ways give bit for bit the data set's own
// gather(); staged bytes are normalised as byte * scale + shift on the GPU, which
// can differ in the last bit.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.hpp"
#include "engine/data/dataset.hpp"

namespace tandem {

class DeviceInput {
public:
  // on_device: 'auto', 'always' or 'never' (above).
  DeviceInput(Device& dev, const Dataset& data, const std::string& on_device = "auto");
  ~DeviceInput();
  DeviceInput(const DeviceInput&) = delete;
  DeviceInput& operator=(const DeviceInput&) = delete;

  // Makes x hold samples indices[0..count) of the data set ([count, ...sample shape])
  // and labels their labels: count * targets_per_sample() int32, sample by sample.
  // epoch: the epoch the batch is drawn in (Dataset::gather_drawn: augmentation).
  void fill(const int64_t* indices, int64_t count, Tensor& x, Tensor& labels, int64_t epoch = 0);
  // The int32 labels a fill() wrote into `labels` (device memory).
  static const int32_t* labels_of(const Tensor& labels) { return reinterpret_cast<const int32_t*>(labels.data()); }

  const Dataset& data() const { return data_; }
  bool resident() const { return resident_; }
  // The bytes a resident data set holds (one copy of a text: its labels are its
  // samples a byte on); 0 when not resident.
  size_t resident_bytes() const { return resident_bytes_; }
  // How batches reach the device, for the run's log: "held on the device (47.0 MB,
  // gathered there by index)".
  std::string describe() const;

private:
  void make_resident(const Dataset::ByteRows& rows);
  // Two staging buffers per kind, used in turn: a fill may start while the upload of
  // the previous one is still in flight (a prefetch the plan then overtook). So the
  // caller must wait for the device (a loss read, a synchronize) between fill n and
  // fill n + 2: the training step and the evaluation each read their loss after
  // every batch.
  struct Staging {
    void* p[2] = {nullptr, nullptr};
    size_t bytes[2] = {0, 0};
    int turn = 0;
  };
  void* staging(Staging& s, size_t bytes);
  void check_indices(const int64_t* indices, int64_t count) const;

  Device& dev_;
  const Dataset& data_;
  Staging samples_staging_, labels_staging_, indices_staging_;
  // Resident: the rows, their labels and the table in the device's memory (on the
  // CPU, pointers into the data set's own), and the indices of the batch in flight.
  bool resident_ = false;
  Tensor rows_, label_rows_, table_, indices_;
  ByteRowTable table_rows_;  // the rows where the device reads them
  size_t resident_bytes_ = 0;
};

}  // namespace tandem
