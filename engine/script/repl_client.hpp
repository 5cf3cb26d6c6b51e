#pragma once
// The console's client: `tandem attach RUN_DIR` and the terminal of `tandem run
// --repl`. Line editing and history through GNU readline (its callback interface,
// so the client also notices when the run ends while waiting for input).
#include <functional>
#include <string>

namespace tandem {

// Connects to run_dir/repl.sock (waiting for it to appear while job_alive() says
// the job is still starting; an empty job_alive does not wait) and runs the prompt
// until Ctrl-D (detach) or the run's end. Returns 0, or 1 when it could not connect.
int attach_console(const std::string& run_dir, const std::function<bool()>& job_alive);

}  // namespace tandem
