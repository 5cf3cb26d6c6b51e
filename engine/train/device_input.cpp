#include "engine/train/device_input.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "engine/core/error.hpp"

namespace tandem {

namespace {

size_t floats_for(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

int32_t* label_data(Tensor& labels) { return reinterpret_cast<int32_t*>(labels.data()); }

// Whether the labels lie in the samples' own memory (a text's next tokens: the same
// bytes one on), so that one copy holds both.
bool labels_inside(const ByteRowTable& rows) {
  return rows.labels >= rows.samples && rows.labels < rows.samples + rows.sample_span();
}

// The bytes from the samples' start to the labels' end, where they share memory.
size_t shared_span(const ByteRowTable& rows) {
  return static_cast<size_t>(
      std::max(rows.sample_span(), static_cast<int64_t>(rows.labels - rows.samples) + rows.label_span()));
}

// What holding the rows takes: one span where the labels share the samples' memory.
size_t held_bytes(const ByteRowTable& rows) {
  return labels_inside(rows) ? shared_span(rows) : static_cast<size_t>(rows.sample_span() + rows.label_span());
}

// Labels are device memory the loss reads unchecked on a GPU: each is checked on the
// host before it gets there (a resident data set's once, a staged batch's each time).
void check_labels(const Dataset& data, const int32_t* labels, size_t count) {
  for (size_t i = 0; i < count; ++i)
    TANDEM_CHECK_HINT(labels[i] >= 0 && labels[i] < data.classes(), "check the data set's files",
                      "label ", labels[i], " at position ", i, " of a batch from ", data.name(),
                      " is outside [0, ", data.classes(), ")");
}

}  // namespace

DeviceInput::DeviceInput(Device& dev, const Dataset& data, const std::string& on_device) : dev_(dev), data_(data) {
  TANDEM_CHECK_HINT(on_device == "auto" || on_device == "always" || on_device == "never",
                    "write data.on_device = 'auto', 'always' or 'never'", "data.on_device = '", on_device,
                    "' is not a choice");
  if (on_device == "never") return;
  const Dataset::ByteRows* rows = data.byte_rows();
  if (!rows) {
    TANDEM_CHECK_HINT(on_device != "always", "set data.on_device = 'auto'", "data set ", data.name(),
                      " cannot be held on the device: it is not stored as a row of bytes per sample (synthetic "
                      "samples are computed as they are drawn)");
    return;
  }
  TANDEM_CHECK(rows->rows == data.size() && rows->sample_bytes == shape_numel(data.sample_shape()) &&
                   rows->label_bytes == data.targets_per_sample() && rows->table && rows->sample_stride >= 0 &&
                   rows->label_stride >= 0,
               "data set ", data.name(), " describes its byte rows as ", rows->rows, " rows of ", rows->sample_bytes,
               " bytes and ", rows->label_bytes, " labels, not ", data.size(), " of ",
               shape_numel(data.sample_shape()), " and ", data.targets_per_sample(), " (a bug in the data set)");
  const size_t bytes = held_bytes(*rows);
  const size_t capacity = dev.memory_capacity(), free = dev.memory_free();
  // An eighth leaves the model, its batches and the other ranks on a shared GPU
  // their room, and half of what is free now leaves room for what else is running
  // there; the CPU's copy is the data set itself.
  const bool fits = dev.kind() == DeviceKind::cpu ||
                    ((capacity == 0 || bytes <= capacity / 8) && (free == 0 || bytes <= free / 2));
  if (!fits) {
    TANDEM_CHECK_HINT(on_device != "always", "set data.on_device = 'auto' (it stages batches through host memory)",
                      "data set ", data.name(), " takes ", bytes, " bytes, more than an eighth of ", dev.name(), "'s ",
                      capacity, " bytes or half of the ", free, " bytes free on it");
    return;
  }
  make_resident(*rows);
}

void DeviceInput::make_resident(const Dataset::ByteRows& rows) {
  TANDEM_CHECK(data_.classes() <= 256, "data set ", data_.name(), " has ", data_.classes(),
               " classes but offers its labels as bytes (a bug in the data set)");
  // Every byte is a class when there are 256 (a text's tokens): nothing to check.
  if (data_.classes() < 256)
    for (int64_t s = 0; s < rows.rows; ++s)
      for (int64_t k = 0; k < rows.label_bytes; ++k) {
        const int label = rows.labels[s * rows.label_stride + k];
        TANDEM_CHECK_HINT(label < data_.classes(), "check the data set's files", "label ", label, " at position ",
                          s * rows.label_bytes + k, " of ", data_.name(), " is outside [0, ", data_.classes(), ")");
      }
  resident_ = true;
  resident_bytes_ = held_bytes(rows);
  table_rows_ = rows;
  if (dev_.kind() == DeviceKind::cpu) return;  // the data set's own memory is the device's
  table_ = Tensor(dev_, {256});
  dev_.copy_from_host(table_.data(), rows.table, 256);
  table_rows_.table = table_.data();
  if (labels_inside(rows)) {  // a text: one copy, the labels a byte on
    const size_t span = shared_span(rows);
    rows_ = Tensor(dev_, {static_cast<int64_t>(floats_for(span))});
    dev_.copy_bytes_from_host(rows_.data(), rows.samples, span);
    table_rows_.samples = reinterpret_cast<const uint8_t*>(rows_.data());
    table_rows_.labels = table_rows_.samples + (rows.labels - rows.samples);
    return;
  }
  const size_t sample_span = static_cast<size_t>(rows.sample_span()), label_span = static_cast<size_t>(rows.label_span());
  rows_ = Tensor(dev_, {static_cast<int64_t>(floats_for(sample_span))});
  label_rows_ = Tensor(dev_, {static_cast<int64_t>(floats_for(label_span))});
  dev_.copy_bytes_from_host(rows_.data(), rows.samples, sample_span);
  dev_.copy_bytes_from_host(label_rows_.data(), rows.labels, label_span);
  table_rows_.samples = reinterpret_cast<const uint8_t*>(rows_.data());
  table_rows_.labels = reinterpret_cast<const uint8_t*>(label_rows_.data());
}

DeviceInput::~DeviceInput() {
  for (Staging* s : {&samples_staging_, &labels_staging_, &indices_staging_})
    for (int i = 0; i < 2; ++i)
      if (s->p[i]) dev_.deallocate_host(s->p[i], s->bytes[i]);
}

std::string DeviceInput::describe() const {
  if (resident_)
    return fmt::format("held on the device ({:.1f} MB{}), gathered there by index",
                       static_cast<double>(resident_bytes_) / 1e6,
                       dev_.kind() == DeviceKind::cpu ? ", the data set's own memory" : "");
  if (dev_.kind() == DeviceKind::cpu) return "gathered on the host";
  return data_.byte_form() ? "gathered on the host, uploaded as bytes through pinned memory"
                           : "gathered on the host, uploaded through pinned memory";
}

void* DeviceInput::staging(Staging& s, size_t bytes) {
  s.turn ^= 1;
  if (bytes > s.bytes[s.turn]) {
    if (s.p[s.turn]) dev_.deallocate_host(s.p[s.turn], s.bytes[s.turn]);  // waits for its upload
    s.p[s.turn] = dev_.allocate_host(bytes);
    s.bytes[s.turn] = bytes;
  }
  return s.p[s.turn];
}

void DeviceInput::check_indices(const int64_t* indices, int64_t count) const {
  for (int64_t i = 0; i < count; ++i)
    TANDEM_CHECK(indices[i] >= 0 && indices[i] < data_.size(), "sample index ", indices[i], " outside ",
                 data_.name(), " of size ", data_.size(), " (a bug in the sampler)");
}

void DeviceInput::fill(const int64_t* indices, int64_t count, Tensor& x, Tensor& labels, int64_t epoch) {
  Shape shape{count};
  shape.insert(shape.end(), data_.sample_shape().begin(), data_.sample_shape().end());
  x.ensure(dev_, shape);
  const size_t label_count = static_cast<size_t>(count * data_.targets_per_sample());
  labels.ensure(dev_, {static_cast<int64_t>(label_count)});  // int32s in float storage: the same size
  const size_t values = static_cast<size_t>(x.numel());
  if (resident_) {
    const int64_t* at = indices;
    if (dev_.kind() != DeviceKind::cpu) {
      // The GPU's gather cannot check its indices: the host does, then uploads them.
      check_indices(indices, count);
      const size_t bytes = static_cast<size_t>(count) * sizeof(int64_t);
      auto* staged = static_cast<int64_t*>(staging(indices_staging_, bytes));
      std::copy(indices, indices + count, staged);
      indices_.ensure(dev_, {static_cast<int64_t>(floats_for(bytes))});
      dev_.upload(indices_.data(), reinterpret_cast<const float*>(staged), floats_for(bytes));
      at = reinterpret_cast<const int64_t*>(indices_.data());
    }
    dev_.gather_byte_rows(table_rows_, at, count, x.data(), label_data(labels));
    return;
  }
  if (dev_.kind() == DeviceKind::cpu) {
    data_.gather_drawn(indices, count, epoch, x.data(), label_data(labels));
    check_labels(data_, label_data(labels), label_count);
    return;
  }
  auto* staged_labels = static_cast<int32_t*>(staging(labels_staging_, label_count * sizeof(int32_t)));
  if (const Dataset::ByteForm* form = data_.byte_form()) {
    auto* bytes = static_cast<uint8_t*>(staging(samples_staging_, values));
    data_.gather_bytes(indices, count, bytes, staged_labels);
    dev_.upload_normalized(x.data(), bytes, values, form->scale, form->shift);
  } else {
    auto* floats = static_cast<float*>(staging(samples_staging_, values * sizeof(float)));
    data_.gather_drawn(indices, count, epoch, floats, staged_labels);
    dev_.upload(x.data(), floats, values);
  }
  check_labels(data_, staged_labels, label_count);
  dev_.upload(labels.data(), reinterpret_cast<const float*>(staged_labels), label_count);
}

}  // namespace tandem
