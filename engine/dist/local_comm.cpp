#include "engine/dist/local_comm.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace tandem {

void LocalComm::abort(const std::string& why) {
  spdlog::critical("aborting: {}", why);
  spdlog::default_logger()->flush();
  std::exit(1);
}

}  // namespace tandem
