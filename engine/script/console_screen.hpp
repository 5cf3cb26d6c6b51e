#pragma once
// One terminal, two writers: the console's prompt and the job's log. Left alone they
// interleave (a progress line lands in the middle of a half-typed command). So while
// the prompt is up, this process's stdout and stderr are a pipe: the job's log (the
// training thread's spdlog lines for one worker; mpirun's output, which a child
// started after the capture inherits, for several) goes into it, and the prompt
// (repl_client.cpp) prints what comes out above itself, readline's way. The prompt
// itself writes to the terminal (terminal_fd()). When the prompt closes, the
// terminal's own descriptors come back, and a thread copies what is still in the
// pipe (a running job's further output) to it until every writer has closed it.
namespace tandem {

// Takes stdout and stderr onto the pipe when stdin and stderr are terminals (a
// prompt there would share the screen); false, changing nothing, otherwise. Call it
// before starting a child whose output should come through the prompt.
bool capture_output_for_console();
// The pipe's read end while captured, else -1.
int captured_output_fd();
// The terminal's stdout (a copy taken at capture), or 1 when nothing is captured.
int terminal_fd();
// Gives stdout and stderr back to the terminal; the pipe's remains are copied there.
void release_captured_output();

}  // namespace tandem
