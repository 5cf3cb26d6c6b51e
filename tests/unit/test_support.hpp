#pragma once
// Helpers the Boost.Test files share: the message of an expected tandem::Error, and
// a scratch folder removed when the test ends. Include after <boost/test/unit_test.hpp>.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "engine/core/error.hpp"

namespace tandem::testing {

// The message of the tandem::Error that f throws; fails the test if none is thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  BOOST_FAIL("expected a tandem::Error");
  return {};
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#define CHECK_CONTAINS(msg, part) \
  BOOST_TEST(::tandem::testing::contains(msg, part), "message lacks '" << (part) << "':\n" << (msg))

// A scratch folder, unique to this process and test name, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("tandem-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return file(name);
  }
};

}  // namespace tandem::testing
