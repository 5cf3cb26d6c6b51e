#include "engine/core/error.hpp"

#include <cstdio>
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

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
    } else {
      char code[8];
      std::snprintf(code, sizeof code, "\\%03o", byte);
      out += code;
    }
  }
  return out;
}

void fail(const std::string& what, const char* file, int line, const std::string& hint) {
  throw Error(what, short_path(file) + ":" + std::to_string(line), hint);
}

}  // namespace tandem
