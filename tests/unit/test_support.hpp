#pragma once
// Helpers the Boost.Test files share: the message of an expected tandem::Error, how
// far two parameter sets are apart, and a scratch folder removed when the test
// ends. Include after <boost/test/unit_test.hpp>.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

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

// The largest difference between two parameter sets over the largest magnitude in
// `a` (at least `floor`): how far two trainings that should agree ended apart.
inline double scaled_difference(const std::vector<float>& a, const std::vector<float>& b, double floor) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  double diff = 0.0, scale = floor;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(a[i])));
  }
  return diff / scale;
}

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
