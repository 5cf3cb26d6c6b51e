// The tandem command line: run, sim, profile, attach, report, test, version
// (engine/cli/commands.hpp). Kept to main() alone, so that the commands compile in
// the engine's batches with the headers they share.
#include <string>
#include <vector>

#include "engine/cli/commands.hpp"
#include "engine/cli/usage.hpp"
#include "engine/core/error.hpp"
#include "engine/core/log.hpp"

int main(int argc, char** argv) {
  try {
    tandem::log::init(0, "info");
    return tandem::cli::dispatch(std::vector<std::string>(argv + 1, argv + argc), &argc, &argv);
  } catch (const tandem::Error& e) {
    tandem::log::error("{}", e.what());
    return tandem::cli::kExitFailure;
  } catch (const std::exception& e) {
    tandem::log::error("unexpected error: {}", e.what());
    return tandem::cli::kExitFailure;
  }
}
