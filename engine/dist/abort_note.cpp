#include "engine/dist/abort_note.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

namespace tandem {

void note_abort(int rank, const std::string& why) {
  const char* path = std::getenv(kAbortNoteVar);
  if (!path || !*path) return;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  // One write of one line to an O_APPEND file: lines of several ranks do not mix.
  const std::string line =
      nlohmann::json{{"rank", rank}, {"host", host}, {"why", why}}.dump(-1, ' ', false,
                                                                       nlohmann::json::error_handler_t::replace) +
      "\n";
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, line.data(), line.size());
  ::close(fd);
}

}  // namespace tandem
