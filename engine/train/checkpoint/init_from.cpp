#include "engine/train/checkpoint/init_from.hpp"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/core/mapped_file.hpp"
#include "engine/core/tensor.hpp"
#include "engine/train/record/safetensors.hpp"

namespace tandem {

namespace {

const char* const kHint =
    "init_from reads tandem's params.safetensors (save_params = true) and Hugging Face's GPT-2 model.safetensors "
    "for the same model size: check the model_args (n_layer, n_head, n_embd), data.vocab and data.seq_len";

// The file, mapped read-only, with its header parsed.
class SafetensorsFile {
public:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    int64_t begin = 0, end = 0;  // byte offsets from data()
  };

  explicit SafetensorsFile(const std::string& path)
      : path_(path), file_(path, "init_from: '" + path + "'", "point init_from at a .safetensors file") {
    const int64_t bytes = file_.size();
    TANDEM_CHECK_HINT(bytes >= 8, kHint, "init_from: '", path, "' is ", bytes,
                      " bytes, too short for a safetensors file");
    const uint8_t* base = file_.data();
    uint64_t header_len = 0;
    std::memcpy(&header_len, base, 8);
    TANDEM_CHECK_HINT(header_len <= static_cast<uint64_t>(bytes - 8), "the file is truncated or not safetensors",
                      "init_from: '", path, "' declares a ", header_len, "-byte header in a ", bytes, "-byte file");
    data_ = base + 8 + header_len;
    const int64_t data_bytes = bytes - 8 - static_cast<int64_t>(header_len);
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(base + 8, base + 8 + header_len);
    } catch (const std::exception& e) {
      TANDEM_FAIL_HINT("the file is not safetensors, or is damaged", "init_from: '", path,
                       "': its header is not JSON: ", e.what());
    }
    TANDEM_CHECK_HINT(header.is_object(), "the file is not safetensors", "init_from: '", path,
                      "': its header is not a JSON object");
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const nlohmann::json& t = it.value();
      Entry e;
      // Whole, non-negative numbers only: a float or a negative value in a hostile
      // header is refused before any arithmetic on it.
      const auto naturals = [&](const nlohmann::json& v, const char* what) {
        TANDEM_CHECK_HINT(v.is_array(), "the file is not safetensors, or is damaged", "init_from: '", path,
                          "': tensor '", it.key(), "' has no ", what, " list");
        std::vector<int64_t> out;
        for (const nlohmann::json& x : v) {
          TANDEM_CHECK_HINT(x.is_number_unsigned() && x.get<uint64_t>() <= (uint64_t{1} << 62),
                            "the file is not safetensors, or is damaged", "init_from: '", path, "': tensor '",
                            it.key(), "' has ", what, " value ", x.dump(), " (whole numbers from 0 to 2^62)");
          out.push_back(static_cast<int64_t>(x.get<uint64_t>()));
        }
        return out;
      };
      TANDEM_CHECK_HINT(t.is_object() && t.contains("dtype") && t["dtype"].is_string() && t.contains("shape") &&
                            t.contains("data_offsets"),
                        "the file is not safetensors, or is damaged", "init_from: '", path, "': tensor '", it.key(),
                        "' has no dtype, shape and data_offsets");
      e.dtype = t["dtype"].get<std::string>();
      e.shape = naturals(t["shape"], "shape");
      const std::vector<int64_t> offsets = naturals(t["data_offsets"], "data_offsets");
      TANDEM_CHECK_HINT(offsets.size() == 2, "the file is not safetensors, or is damaged", "init_from: '", path,
                        "': tensor '", it.key(), "' has ", offsets.size(), " data_offsets, not 2");
      e.begin = offsets[0];
      e.end = offsets[1];
      int64_t count = 1;
      bool overflow = false;
      for (int64_t d : e.shape) overflow |= __builtin_mul_overflow(count, d, &count);
      int64_t tensor_bytes = 0;
      overflow |= __builtin_mul_overflow(count, element_bytes(it.key(), e.dtype), &tensor_bytes);
      TANDEM_CHECK_HINT(!overflow && e.begin <= e.end && e.end <= data_bytes && e.end - e.begin == tensor_bytes,
                        "the file is truncated or damaged", "init_from: '", path, "': tensor '", it.key(),
                        "' has data_offsets [", e.begin, ", ", e.end, ") for ", count, " ", e.dtype,
                        " values, outside the file's ", data_bytes, " bytes of data or the wrong size");
      entries_[it.key()] = std::move(e);
    }
  }
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const {
    const auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }
  // Whether two tensors hold the same values in the same dtype and shape (their bytes).
  bool same(const Entry& a, const Entry& b) const {
    return a.dtype == b.dtype && a.shape == b.shape &&
           std::memcmp(data_ + a.begin, data_ + b.begin, static_cast<size_t>(a.end - a.begin)) == 0;
  }
  // The tensor's values as floats.
  std::vector<float> floats(const std::string& name, const Entry& e) const {
    const uint8_t* p = data_ + e.begin;
    const size_t n = static_cast<size_t>((e.end - e.begin) / element_bytes(name, e.dtype));
    std::vector<float> out(n);
    if (e.dtype == "F32") {
      std::memcpy(out.data(), p, n * 4);
    } else if (e.dtype == "BF16") {
      for (size_t i = 0; i < n; ++i) {
        const uint32_t bits = static_cast<uint32_t>(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    } else if (e.dtype == "F16") {
      for (size_t i = 0; i < n; ++i) out[i] = half_to_float(static_cast<uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
    } else {
      TANDEM_FAIL_HINT(kHint, "init_from: '", path_, "': tensor '", name, "' is ", e.dtype,
                       "; weights are read from F32, F16 or BF16");
    }
    return out;
  }

private:
  int64_t element_bytes(const std::string& name, const std::string& dtype) const {
    if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
    if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
    if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
    if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
    TANDEM_FAIL_HINT("the file is not safetensors, or is damaged", "init_from: '", path_, "': tensor '", name,
                     "' has unknown dtype '", dtype, "'");
  }
  static float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
      bits = sign | 0x7f800000u | (mant << 13);  // inf, nan
    } else if (exp != 0) {
      bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 113;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }

  std::string path_;
  MappedFile file_;  // released however the constructor ends (a damaged file throws)
  const uint8_t* data_ = nullptr;
  std::map<std::string, Entry> entries_;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Hugging Face's Conv1D layers: stored [in, out].
bool conv1d_weight(const std::string& name) {
  return ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_proj.weight") ||
         ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_proj.weight");
}

}  // namespace

void init_from_safetensors(const std::string& path, bool strict, const ModelSpec& spec, Model& model) {
  std::vector<float> params = model.params().to_host();
  std::string why;
  const std::vector<SafetensorsEntry> expected = safetensors_entries(spec, model, params, &why);
  TANDEM_CHECK_HINT(!expected.empty(), "use a model that save_params can name (models/*.lua)", "init_from: model '",
                    spec.name, "' has no tensor names to load by: ", why);
  const SafetensorsFile file(path);
  // Hugging Face's layout: the GPT's tensors without "transformer." (GPT2Model) or
  // with it (GPT2LMHeadModel), its Conv1D weights [in, out].
  bool hf = false;
  for (const auto& [name, e] : file.entries())
    if (ends_with(name, "attn.c_attn.weight") && e.shape.size() == 2 && e.shape[1] == 3 * e.shape[0]) hf = true;
  const bool gpt = !spec.layers.empty() && spec.layers[0].type == "embedding";

  std::set<std::string> used;
  std::vector<std::string> missing;
  std::vector<double> state = model.layer_state();
  size_t state_at = 0;
  int64_t loaded = 0;
  for (const SafetensorsEntry& want : expected) {
    const int64_t count = shape_numel(want.shape);
    if (want.dtype != "F32") continue;  // num_batches_tracked: a count, not a weight
    std::string name = want.name;
    const SafetensorsFile::Entry* e = file.find(name);
    if (!e && gpt && name.rfind("transformer.", 0) == 0) {
      name = want.name.substr(12);
      e = file.find(name);
    }
    if (!e) {
      missing.push_back(want.name + " " + shape_str(want.shape));
      if (want.flat_offset < 0) state_at += static_cast<size_t>(count);
      continue;
    }
    used.insert(name);
    const bool transpose = hf && conv1d_weight(name) && want.shape.size() == 2;
    std::vector<int64_t> file_shape = e->shape;
    if (transpose && file_shape.size() == 2) std::swap(file_shape[0], file_shape[1]);
    // A longer position embedding is cut to the model's context.
    const bool crop = ends_with(want.name, "wpe.weight") && file_shape.size() == 2 && want.shape.size() == 2 &&
                      file_shape[1] == want.shape[1] && file_shape[0] > want.shape[0];
    if (file_shape != want.shape && !crop)
      TANDEM_FAIL_HINT(kHint, "init_from: '", path, "': tensor '", name, "' is ", shape_str(e->shape),
                       transpose ? " (Hugging Face's Conv1D [in, out])" : "", " where model '", spec.name,
                       "' has ", want.name, " ", shape_str(want.shape),
                       transpose ? " (stored [in, out]: " + shape_str({want.shape[1], want.shape[0]}) + ")" : "");
    const std::vector<float> values = file.floats(name, *e);
    if (crop)
      log::info("init_from: {} holds {} positions; the model's context is {}: the first {} are used", name,
                file_shape[0], want.shape[0], want.shape[0]);
    float* dst = want.flat_offset >= 0 ? params.data() + want.flat_offset : nullptr;
    std::vector<float> staged;
    if (!dst) {  // layer state (batch norm's running statistics), in the model's order
      staged.resize(static_cast<size_t>(count));
      dst = staged.data();
    }
    if (transpose) {
      const int64_t rows = want.shape[0], cols = want.shape[1];  // file: [cols, rows]
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = values[static_cast<size_t>(c * rows + r)];
    } else {
      std::memcpy(dst, values.data(), static_cast<size_t>(count) * sizeof(float));  // a crop keeps the first rows
    }
    if (want.flat_offset < 0) {
      TANDEM_CHECK(state_at + staged.size() <= state.size(), "init_from: layer state past the model's ",
                   state.size(), " values (a bug in tandem's safetensors naming)");
      std::copy(staged.begin(), staged.end(), state.begin() + static_cast<long>(state_at));
      state_at += staged.size();
    }
    ++loaded;
  }

  // What the file holds beyond the model: the attention's mask buffers are not
  // weights; a tied head's copy of wte is wte.
  std::vector<std::string> extra;
  for (const auto& [name, e] : file.entries()) {
    if (used.count(name) || ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
        ends_with(name, "num_batches_tracked"))
      continue;
    if (gpt && name == "lm_head.weight" && model.layers().back()->param_count() == 0) {
      const SafetensorsFile::Entry* wte = file.find("wte.weight");
      if (!wte) wte = file.find("transformer.wte.weight");
      if (wte && file.same(e, *wte)) continue;
    }
    extra.push_back(name + " " + shape_str(e.shape));
  }
  if (strict) {
    TANDEM_CHECK_HINT(missing.empty(), std::string(kHint) + "; init_from_strict = false keeps the model's own "
                      "initialisation for what the file lacks", "init_from: '", path, "' has no tensor ",
                      missing.front(), " of model '", spec.name, "' (", missing.size(), " missing in all)");
    TANDEM_CHECK_HINT(extra.empty(), std::string(kHint) + "; init_from_strict = false passes over tensors the model "
                      "lacks", "init_from: '", path, "' holds ", extra.front(), ", which model '", spec.name,
                      "' has no place for (", extra.size(), " such tensors)");
  }
  TANDEM_CHECK_HINT(loaded > 0, kHint, "init_from: '", path, "' holds none of model '", spec.name, "''s tensors");
  TANDEM_CHECK(state_at == state.size(), "init_from: ", state_at, " values of layer state named, the model holds ",
               state.size(), " (a bug in tandem's safetensors naming)");
  model.device().copy_from_host(model.params().data(), params.data(), params.size());
  if (!state.empty()) model.load_layer_state(state);
  log::info("init_from: {} tensors from {}{}{}{}", loaded, path, hf ? " (Hugging Face's GPT-2 layout)" : "",
            missing.empty() ? "" : fmt::format("; {} left at their initialisation (first: {})", missing.size(),
                                               missing.front()),
            extra.empty() ? "" : fmt::format("; {} in the file not used (first: {})", extra.size(), extra.front()));
}

}  // namespace tandem
