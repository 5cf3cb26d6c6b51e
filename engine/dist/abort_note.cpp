#include "engine/dist/abort_note.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/core/host_name.hpp"

namespace tandem {

void note_abort(int rank, const std::string& why) {
  const char* dir = std::getenv(kAbortNoteVar);
  if (!dir || !*dir) return;
  const std::string text =
      nlohmann::json{{"rank", rank}, {"host", host_name()}, {"why", why}}.dump(-1, ' ', false,
                                                                       nlohmann::json::error_handler_t::replace) +
      "\n";
  // A file of this rank's own: appends of several hosts to one file on a shared file
  // system (NFS) may overwrite each other.
  const std::string path = std::string(dir) + "/rank-" + std::to_string(rank) + ".json";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

}  // namespace tandem
