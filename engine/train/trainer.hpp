#pragma once
// The training loop of one worker. Every rank runs it; rank 0 also records the run.
// One iteration, as data flows (DESIGN.md):
//   plan -> this rank's slice of the global batch -> forward/backward (SUM loss)
//   -> emulated stretch -> arrival point (stats of the previous iteration go to
//   rank 0, which answers with its decision) -> gradient all-reduce (SUM)
//   -> optimizer step dividing by the global batch.
#include <functional>
#include <memory>
#include <string>

#include "engine/dist/comm.hpp"
#include "engine/train/plan_policy.hpp"
#include "engine/train/config.hpp"
#include "engine/train/console.hpp"
#include "engine/train/device_choice.hpp"
#include "engine/train/record/run_recorder.hpp"

namespace tandem {

// Runs the experiment to its stop condition on this rank's device (choose_device,
// chosen before the transport so a GPU rank's Comm can be NCCL). The summary is
// complete on rank 0. policy: rank 0's plan policy when the experiment has one
// (cfg.policy.file), else null; the other ranks pass null and receive its plans
// with the gradients.
// The experiment's sync settings (sync = {...}) as a plan's; one rank: bsp.
SyncPlan initial_sync(const ExperimentConfig& cfg, int world);

// Makes rank 0's live console (the REPL) once the run directory exists.
using ConsoleFactory = std::function<std::unique_ptr<Console>(const std::string& run_dir)>;

// console: rank 0's console factory, or empty for none.
RunSummary train(const ExperimentConfig& cfg, Comm& comm, const DeviceChoice& device, PlanPolicy* policy = nullptr,
                 const ConsoleFactory& console = {});

}  // namespace tandem
