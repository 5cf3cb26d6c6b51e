#pragma once
// The training loop of one worker. Every rank runs it; rank 0 also records the run,
// runs the policy and serves the console. The loop reads as one iteration's data
// flow (DESIGN.md):
//
//   for (t = first; t < total;) {
//     boundary.open(t, plan);                    // rank 0: the console's commands
//     StepResult r = relaxed ? segment(t)       // a relaxed-sync segment, or
//                            : bsp.run(plan, t) // compute + gradient sync
//     Control c = boundary.exchange(r, plan);    // stats out, decisions in
//     if (boundary.apply(c, t = r.done, plan)) break;  // evaluate, checkpoint, swap, stop
//   }
//
// The Trainer builds the parts (data, model, optimizer, emulation, the run
// directory, a resumed state) and owns them; bsp_step.hpp runs one bsp iteration,
// relaxed_segment.hpp a relaxed segment, boundary.hpp what lies between.
#include <functional>
#include <memory>
#include <string>

#include "engine/dist/comm.hpp"
#include "engine/train/config.hpp"
#include "engine/train/console.hpp"
#include "engine/train/device_choice.hpp"
#include "engine/train/plan_policy.hpp"
#include "engine/train/record/run_recorder.hpp"

namespace tandem {

// Makes rank 0's live console (the REPL) once the run directory exists.
using ConsoleFactory = std::function<std::unique_ptr<Console>(const std::string& run_dir)>;

// Runs the experiment to its stop condition on this rank's device (choose_device,
// chosen before the transport so a GPU rank's Comm can be NCCL). The summary is
// complete on rank 0. policy: rank 0's plan policy when the experiment has one
// (cfg.policy.file), else null; the other ranks pass null and receive its plans
// with the gradients. console: rank 0's console factory, or empty for none.
RunSummary train(const ExperimentConfig& cfg, Comm& comm, const DeviceChoice& device, PlanPolicy* policy = nullptr,
                 const ConsoleFactory& console = {});

}  // namespace tandem
