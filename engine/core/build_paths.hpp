#pragma once
// Where this build's source tree and policy worker were when CMake configured it.
// build_paths.cpp is the one file compiled with them (CMakeLists.txt), so every other
// object is the same wherever the tree lives (compiler-cache hits across checkouts)
// and may share a unity batch (CMake leaves a file with definitions of its own out).
namespace tandem {

const char* configured_source_dir();     // the tree holding scripts/ and models/
const char* configured_policy_worker();  // <build>/tandem-policy-worker

}  // namespace tandem
