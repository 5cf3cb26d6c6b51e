#include "engine/train/record/run_dir.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.hpp"

namespace tandem {

std::string make_run_dir(const std::string& requested, const std::string& experiment_name) {
  namespace fs = std::filesystem;
  fs::path dir = requested;
  if (dir.empty()) {
    std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    dir = fs::path("runs") / (experiment_name + "-" + stamp);
    // Two runs started in the same second get distinct directories.
    for (int i = 2; fs::exists(dir); ++i) dir = fs::path("runs") / (experiment_name + "-" + stamp + "-" + std::to_string(i));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    TANDEM_FAIL_HINT("choose a writable place with --out DIR", "cannot create run directory '", dir.string(),
                     "': ", ec.message());
  return dir.string();
}

void check_no_earlier_run(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return;
  std::error_code ec;
  for (const char* name : {"config.json", "summary.json", "trace.jsonl", "log.txt", "checkpoints"}) {
    if (!fs::exists(fs::path(dir) / name, ec)) continue;
    TANDEM_FAIL_HINT("give another --out DIR, add --overwrite to replace that run, or continue it with "
                     "tandem run --resume " + dir,
                     "the run directory '", dir, "' holds an earlier run (", name, "); a new run would overwrite it");
  }
}

void write_binary_file(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) TANDEM_FAIL_HINT("check free disk space and permissions", "cannot write '", path, "'");
}

void write_text_file(const std::string& path, const std::string& text) {
  write_binary_file(path, text.data(), text.size());
}

}  // namespace tandem

namespace tandem {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TANDEM_FAIL("cannot read '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace tandem
