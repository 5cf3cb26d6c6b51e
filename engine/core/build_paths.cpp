#include "engine/core/build_paths.hpp"

namespace tandem {

const char* configured_source_dir() { return TANDEM_SOURCE_DIR; }
const char* configured_policy_worker() { return TANDEM_POLICY_WORKER; }

}  // namespace tandem
