#pragma once
// The activations the fused bias+activation kernels apply. Declared at the kernels'
// level, not in the engine's Device interface, so that kernels (cpu and cuda alike)
// depend on nothing of the engine but the error sink; engine/core/device.hpp takes
// the enum from here.

namespace tandem {

enum class Activation { none, relu };

}  // namespace tandem
