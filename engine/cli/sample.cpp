#include "engine/cli/sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>

#include "engine/core/error.hpp"
#include "engine/core/log.hpp"
#include "engine/core/rng.hpp"
#include "engine/nn/model.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/train/checkpoint/init_from.hpp"

namespace tandem::cli {

namespace {

constexpr const char* kWhere = "tandem sample";

// Whether `text` is, whole, a whole number in [lo, hi] (into *v).
bool whole_number(const std::string& text, long long lo, long long hi, long long* v) {
  size_t used = 0;
  try {
    *v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return !text.empty() && used == text.size() && *v >= lo && *v <= hi;
}

// A whole number in [lo, hi] from an option's text, or an error naming the option.
long long option_int(const CommandLine& line, const std::string& name, long long fallback, long long lo,
                     long long hi) {
  if (!line.has(name)) return fallback;
  const std::string text = line[name];
  long long v = 0;
  TANDEM_CHECK_HINT(whole_number(text, lo, hi, &v),
                    "give " + name + " a whole number from " + std::to_string(lo) + " to " + std::to_string(hi),
                    kWhere, ": ", name, " '", text, "' is not a whole number in [", lo, ", ", hi, "]");
  return v;
}

double option_number(const CommandLine& line, const std::string& name, double fallback) {
  if (!line.has(name)) return fallback;
  const std::string text = line[name];
  size_t used = 0;
  double v = -1.0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  TANDEM_CHECK_HINT(used == text.size() && !text.empty() && std::isfinite(v) && v >= 0.0,
                    "give " + name + " a number of 0 or more (0: always the most likely token)", kWhere, ": ", name,
                    " '", text, "' is not a number of 0 or more");
  return v;
}

// numpy's .npy (format 1.0): float32, C order, shape [rows, cols].
void write_npy(const std::string& path, const std::vector<float>& values, size_t rows, size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const size_t unpadded = 10 + header.size() + 1;  // magic, version, length, the dict, '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  TANDEM_CHECK_HINT(out.good(), "give --logits a file in a folder you can write", kWhere, ": cannot write '", path,
                    "'");
  const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(reinterpret_cast<const char*>(magic), 8);
  const uint16_t length = static_cast<uint16_t>(header.size());
  const unsigned char le[2] = {static_cast<unsigned char>(length & 0xff), static_cast<unsigned char>(length >> 8)};
  out.write(reinterpret_cast<const char*>(le), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  TANDEM_CHECK(out.good(), kWhere, ": writing '", path, "' failed (is the disk full?)");
}

// The next token from one row of logits (its first `vocab` columns): the arg-max at
// temperature 0, else a draw from softmax(logits / temperature) over the top_k most
// likely (0: all).
int draw(const float* row, int vocab, double temperature, int top_k, Rng& rng) {
  if (temperature == 0.0) return static_cast<int>(std::max_element(row, row + vocab) - row);
  std::vector<int> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int keep = top_k > 0 ? std::min(top_k, vocab) : vocab;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int a, int b) { return row[a] > row[b]; });
  std::vector<double> p(static_cast<size_t>(keep));
  double sum = 0.0;
  for (int i = 0; i < keep; ++i) sum += p[i] = std::exp((row[order[i]] - row[order[0]]) / temperature);
  double u = static_cast<double>(rng.uniform()) * sum;
  for (int i = 0; i < keep; ++i)
    if ((u -= p[i]) < 0.0) return order[i];
  return order[keep - 1];
}

}  // namespace

std::vector<int> parse_prompt_tokens(const std::string& list, int vocab) {
  std::vector<int> tokens;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    long long v = -1;
    TANDEM_CHECK_HINT(whole_number(item, 0, vocab - 1, &v),
                      "give --prompt-tokens token ids from 0 to " + std::to_string(vocab - 1) +
                          ", separated by commas (15496,11,995)",
                      kWhere, ": --prompt-tokens item ", tokens.size() + 1, " '", item,
                      "' is not a token of the model's vocabulary of ", vocab);
    tokens.push_back(static_cast<int>(v));
    at = comma + 1;
  }
  return tokens;
}

int sample(const CommandLine& line) {
  std::vector<std::string> overrides = line.overrides;
  if (line.has("--log-level")) overrides.push_back("log_level=" + line["--log-level"]);
  const ExperimentConfig cfg = load_experiment(line.operand, overrides);
  log::set_level(cfg.log_level);
  const ModelSpec& spec = cfg.model;
  TANDEM_CHECK_HINT(!spec.layers.empty() && spec.layers.back().type == "lm_head" && spec.input.size() == 1,
                    "sample from a language model (model = 'gpt', data of token sequences)", kWhere, ": model '",
                    spec.name, "' of ", line.operand, " is not a language model (it ends in '",
                    spec.layers.empty() ? std::string("nothing") : spec.layers.back().type, "', not 'lm_head')");
  TANDEM_CHECK_HINT(!cfg.init_from.empty(),
                    "give init_from=FILE: a run's params.safetensors (save_params = true) or Hugging Face's GPT-2 "
                    "model.safetensors",
                    kWhere, ": no weights to sample from (", line.operand, " sets no init_from)");
  TANDEM_CHECK_HINT(!(line.has("--prompt") && line.has("--prompt-tokens")), "give one of them", kWhere,
                    ": both --prompt and --prompt-tokens given");
  const int vocab = spec.classes;
  const bool bytes = vocab <= 256;

  std::vector<int> tokens;
  if (line.has("--prompt-tokens")) {
    tokens = parse_prompt_tokens(line["--prompt-tokens"], vocab);
  } else {
    TANDEM_CHECK_HINT(bytes || !line.has("--prompt"),
                      "give --prompt-tokens: GPT-2's BPE is not bundled (tiktoken or Hugging Face's tokenizer "
                      "encodes a prompt to its ids)",
                      kWhere, ": a text --prompt is its bytes, tokens of a byte vocabulary; this model's vocabulary "
                      "has ", vocab, " tokens");
    const std::string text = line.has("--prompt") ? line["--prompt"] : "\n";  // nanoGPT's default start
    for (unsigned char c : text) {
      TANDEM_CHECK(c < vocab, kWhere, ": the prompt's byte ", int(c), " is outside the vocabulary of ", vocab);
      tokens.push_back(c);
    }
  }
  TANDEM_CHECK_HINT(!tokens.empty(), "give a prompt of at least one token", kWhere, ": the prompt is empty");
  const long long count = option_int(line, "--tokens", 100, 0, 1000000);
  const int top_k = static_cast<int>(option_int(line, "--top-k", 200, 0, vocab));
  const double temperature = option_number(line, "--temperature", 0.8);
  Rng rng(static_cast<uint64_t>(option_int(line, "--seed", static_cast<long long>(cfg.seed), 0, (1LL << 62))));

  Device& dev = cpu_device();
  dev.set_blas_threads(cfg.blas_threads);
  Model model(dev, spec, cfg.seed);
  init_from_safetensors(cfg.init_from, cfg.init_from_strict, spec, model);
  const int context = static_cast<int>(spec.input[0]);
  Tensor window(dev, {1, context});
  std::vector<float> host(static_cast<size_t>(context), 0.0f);
  StepContext ctx;
  ctx.training = false;
  ctx.update_running_stats = false;
  // The logits of the window holding the last `context` tokens; *last: the row of
  // the last of them.
  auto forward = [&](size_t* last) {
    const size_t first = tokens.size() > static_cast<size_t>(context) ? tokens.size() - context : 0;
    std::fill(host.begin(), host.end(), 0.0f);
    for (size_t i = first; i < tokens.size(); ++i) host[i - first] = static_cast<float>(tokens[i]);
    window.from_host(host.data(), host.size());
    *last = tokens.size() - first - 1;
    return model.forward(window, ctx).to_host();
  };
  size_t last = 0;
  std::vector<float> logits = forward(&last);
  const size_t columns = logits.size() / static_cast<size_t>(context);  // a padded vocabulary's too

  if (line.has("--logits")) {
    TANDEM_CHECK_HINT(tokens.size() <= static_cast<size_t>(context),
                      "shorten the prompt to data.seq_len tokens, or raise data.seq_len", kWhere, ": --logits needs "
                      "the whole prompt in one window: ", tokens.size(), " tokens, the context is ", context);
    std::vector<float> rows;
    rows.reserve(tokens.size() * static_cast<size_t>(vocab));
    for (size_t p = 0; p < tokens.size(); ++p)
      rows.insert(rows.end(), logits.begin() + p * columns, logits.begin() + p * columns + vocab);
    write_npy(line["--logits"], rows, tokens.size(), static_cast<size_t>(vocab));
    log::info("{}: the logits of the prompt's {} positions, [{}, {}] float32, in {}", kWhere, tokens.size(),
              tokens.size(), vocab, line["--logits"]);
  }

  if (bytes)
    for (int t : tokens) std::fputc(t, stdout);
  for (long long i = 0; i < count; ++i) {
    if (i > 0) logits = forward(&last);
    const int next = draw(logits.data() + last * columns, vocab, temperature, top_k, rng);
    tokens.push_back(next);
    if (bytes)
      std::fputc(next, stdout);
    else
      std::printf(i == 0 ? "%d" : ",%d", next);
    std::fflush(stdout);
  }
  if (count > 0 || bytes) std::fputc('\n', stdout);
  return 0;
}

}  // namespace tandem::cli
