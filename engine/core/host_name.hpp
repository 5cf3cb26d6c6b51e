#pragma once
// This machine's name, as the logs, traces, TensorBoard files and GPU placement name
// it: one definition, so every record of a run agrees on it.
#include <string>

namespace tandem {

// gethostname(), or "localhost" where it fails or is empty.
std::string host_name();

}  // namespace tandem
