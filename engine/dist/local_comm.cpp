#include "engine/dist/local_comm.hpp"

#include "engine/core/log.hpp"

#include <cstdlib>

namespace tandem {

void LocalComm::abort(const std::string& why) {
  log::critical("aborting: {}", why);
  log::flush();
  std::exit(1);
}

}  // namespace tandem
