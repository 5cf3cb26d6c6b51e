#pragma once
// Every failure in the engine is a tandem::Error carrying what failed, where (file and
// line of the check) and what the user can do about it. All checks funnel into one
// sink, fail(), so the Lua boundary can turn any of them into a Lua error with a
// traceback instead of letting a C++ exception cross a Lua frame.
#include <sstream>
#include <stdexcept>
#include <string>

namespace tandem {

class Error : public std::runtime_error {
public:
  Error(std::string what, std::string where, std::string hint);
  const std::string& what_failed() const { return what_; }
  const std::string& where() const { return where_; }
  const std::string& hint() const { return hint_; }

private:
  std::string what_, where_, hint_;
};

// The single sink: builds the Error and throws it.
[[noreturn]] void fail(const std::string& what, const char* file, int line, const std::string& hint = "");

// Text from outside (a policy's answer, a user's string) as a message quotes it:
// control bytes written as \ooo, so that an embedded NUL ('bsp\0evil') cannot cut
// the message short where it is printed as a C string.
std::string printable(const std::string& text);

namespace detail {
inline std::string concat() { return {}; }
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace tandem

// TANDEM_CHECK(cond, message parts...): the failed statement is kept in the message.
#define TANDEM_CHECK(cond, ...)                                                                  \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::tandem::fail(::tandem::detail::concat("check `" #cond "` failed: ", __VA_ARGS__), __FILE__, \
                     __LINE__);                                                                  \
  } while (0)

// TANDEM_CHECK_HINT(cond, hint, message parts...): adds what the user should do.
#define TANDEM_CHECK_HINT(cond, hint, ...)                                                       \
  do {                                                                                           \
    if (!(cond))                                                                                 \
      ::tandem::fail(::tandem::detail::concat("check `" #cond "` failed: ", __VA_ARGS__), __FILE__, \
                     __LINE__, hint);                                                            \
  } while (0)

#define TANDEM_FAIL(...) ::tandem::fail(::tandem::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
#define TANDEM_FAIL_HINT(hint, ...) \
  ::tandem::fail(::tandem::detail::concat(__VA_ARGS__), __FILE__, __LINE__, hint)
