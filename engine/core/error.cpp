#include "engine/core/error.hpp"

#include <cstring>

namespace tandem {

namespace {
std::string format_error(const std::string& what, const std::string& where, const std::string& hint) {
  std::string s = what + " (at " + where + ")";
  if (!hint.empty()) s += "\n  what to do: " + hint;
  return s;
}

// Keep only the path from the repository root: absolute build paths are noise.
std::string short_path(const char* file) {
  const char* roots[] = {"/engine/", "/kernels/", "/bindings/", "/tests/", "/tools/"};
  for (const char* r : roots) {
    if (const char* p = std::strstr(file, r)) return p + 1;
  }
  return file;
}
}  // namespace

Error::Error(std::string what, std::string where, std::string hint)
    : std::runtime_error(format_error(what, where, hint)),
      what_(std::move(what)),
      where_(std::move(where)),
      hint_(std::move(hint)) {}

void fail(const std::string& what, const char* file, int line, const std::string& hint) {
  throw Error(what, short_path(file) + ":" + std::to_string(line), hint);
}

}  // namespace tandem
