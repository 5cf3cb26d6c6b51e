#include "engine/script/repl_client.hpp"

#include <poll.h>
#include <readline/readline.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "engine/script/console_prompt.hpp"
#include "engine/script/console_screen.hpp"
#include "engine/script/repl.hpp"

namespace tandem {

namespace {

const char* const kPrompt = "tandem> ";

// The readline callback has no user data: the client's state lives here (one client
// per process).
struct Client {
  int fd = -1;
  FILE* out = stdout;    // the terminal (stdout may be the captured job output)
  bool waiting = false;  // a command was sent, its answer not yet complete
  bool done = false;
  // A send failed: the run closed its console (it ends). What it sent before closing
  // (the run's last words) is still in the socket: read to its end, not detached.
  bool closed = false;
  std::string pending;   // answer bytes not yet printed
  int log_fd = -1;       // the job's captured output, printed above the prompt
  std::string log;       // its bytes not yet printed (an unfinished line)
} g;

void ask_completions() {
  const std::string request = std::string(1, kCompletionRequest) + "\n";
  if (::send(g.fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) g.closed = true;
}

// Takes the prompt and the line off the screen (Ctrl-D, the run's end), so that no
// dead prompt stays there.
void erase_prompt() {
  rl_set_prompt("");
  rl_replace_line("", 0);
  rl_redisplay();
}

void on_line(char* line) {
  if (!line) {  // the end of input that is not a terminal (a terminal's Ctrl-D: prompt_setup)
    g.done = true;
    erase_prompt();
    return;
  }
  std::string text(line);
  std::free(line);
  if (text.find_first_not_of(" \t") == std::string::npos) return;
  prompt_remember(text);
  text += '\n';
  if (::send(g.fd, text.data(), text.size(), MSG_NOSIGNAL) < 0) {
    g.closed = true;
    return;
  }
  g.waiting = true;
  // No prompt until the answer is in. The handler stays installed, so the terminal
  // stays in readline's mode: a Ctrl-D typed meanwhile still reaches readline
  // (removing the handler would give the line discipline back its EOF handling).
  rl_set_prompt("");
}

// Reads what the server sent; prints every complete answer (NUL-terminated).
// Returns false when the server closed the connection.
bool read_server() {
  char buf[8192];
  const ssize_t n = ::recv(g.fd, buf, sizeof buf, 0);
  if (n <= 0) return false;
  g.pending.append(buf, static_cast<size_t>(n));
  for (size_t z; (z = g.pending.find('\0')) != std::string::npos;) {
    const std::string answer = g.pending.substr(0, z);
    g.pending.erase(0, z + 1);
    if (!answer.empty() && answer[0] == kCompletionRequest) {  // the names Tab completes
      prompt_set_completions(answer.substr(1));
      continue;
    }
    if (!g.waiting) {  // a late answer (a swap's result) while at the prompt
      prompt_print_above(answer, true);
      continue;
    }
    std::fwrite(answer.data(), 1, answer.size(), g.out);
    std::fflush(g.out);
    g.waiting = false;
    ask_completions();  // the command may have made globals
    rl_set_prompt(kPrompt);
    rl_on_new_line();
    rl_redisplay();
  }
  return true;
}

// Prints the job's output: above the prompt while there is one, plainly once the
// prompt is gone.
void show_log(const std::string& text, bool above_prompt) {
  if (above_prompt) {
    prompt_print_above(text, true);
    return;
  }
  std::fwrite(text.data(), 1, text.size(), g.out);
  std::fflush(g.out);
}

// The job's output: whole lines (a line that never ends is shown in pieces of 4 KB).
// Stops reading at the pipe's end.
void read_log(bool above_prompt) {
  char buf[16384];
  const ssize_t n = ::read(g.log_fd, buf, sizeof buf);
  if (n <= 0) {
    g.log_fd = -1;
    if (!g.log.empty()) show_log(g.log + "\n", above_prompt);
    g.log.clear();
    return;
  }
  g.log.append(buf, static_cast<size_t>(n));
  const size_t nl = g.log.rfind('\n');
  size_t cut = nl == std::string::npos ? 0 : nl + 1;
  if (cut == 0 && g.log.size() >= 4096) cut = g.log.size();
  if (cut == 0) return;
  show_log(g.log.substr(0, cut), above_prompt);
  g.log.erase(0, cut);
}

// The console closed because the run is ending, and its last lines (the summary)
// are still being written: show them until the job has ended. Giving the terminal
// back earlier would cut a line being written in two (its start in the pipe, its
// rest straight on the terminal) and put the two halves out of order.
void drain_log(const std::function<bool()>& job_alive) {
  while (g.log_fd >= 0) {
    const bool alive = job_alive && job_alive();
    pollfd p{g.log_fd, POLLIN, 0};
    // Once the job has ended every line it wrote is in the pipe: read until it is
    // empty (a child that outlives the job keeps it open; release_captured_output's
    // copy takes what such a child writes later).
    if (::poll(&p, 1, alive ? 100 : 0) > 0 && (p.revents & (POLLIN | POLLHUP))) {
      read_log(/*above_prompt=*/false);
      continue;
    }
    if (!alive) break;
  }
}

void run_prompt(const std::function<bool()>& job_alive) {
  g.waiting = true;  // the greeting
  rl_callback_handler_install("", on_line);
  bool open = true;
  while (!g.done) {
    if (g.closed) {  // the run's console closed under a send: its last words, then as below
      while (read_server()) {
      }
      open = false;
      erase_prompt();
      if (!g.pending.empty()) std::fwrite(g.pending.data(), 1, g.pending.size(), g.out);
      break;
    }
    pollfd polls[3] = {{g.fd, POLLIN, 0},
                       {STDIN_FILENO, static_cast<short>(g.waiting ? 0 : POLLIN), 0},
                       {g.log_fd, POLLIN, 0}};
    if (::poll(polls, g.log_fd >= 0 ? 3 : 2, 200) < 0) continue;
    if (g.log_fd >= 0 && (polls[2].revents & (POLLIN | POLLHUP))) read_log(/*above_prompt=*/true);
    if (polls[0].revents & (POLLIN | POLLHUP)) {
      if (!read_server()) {
        open = false;
        erase_prompt();
        if (!g.pending.empty()) std::fwrite(g.pending.data(), 1, g.pending.size(), g.out);
        break;
      }
    }
    if (!g.waiting && (polls[1].revents & (POLLIN | POLLHUP))) rl_callback_read_char();
  }
  rl_callback_handler_remove();
  if (!open) drain_log(job_alive);
  if (!g.log.empty()) std::fwrite(g.log.data(), 1, g.log.size(), g.out);
  if (open)
    std::fprintf(g.out, "[detached; the run goes on%s]\n",
                 g.log_fd >= 0 ? ": its log follows here; Ctrl-C stops it, tandem attach RUN_DIR opens a prompt again"
                               : "");
  else
    std::fputs("\n[the run's console closed]\n", g.out);
  std::fflush(g.out);
}

}  // namespace

int attach_console(const std::string& run_dir, const std::function<bool()>& job_alive) {
  const std::string path = run_dir + "/repl.sock";
  // tandem run --repl: the job's log comes through the prompt (a job of several
  // workers had it taken before mpirun started; one worker's is taken here).
  if (job_alive) capture_output_for_console();
  for (;;) {
    if (std::filesystem::exists(path) && (g.fd = connect_console(path)) >= 0) break;
    if (!job_alive || !job_alive()) {
      release_captured_output();
      std::fprintf(stderr, "tandem attach: no console at %s (is the run still going, and is it yours?)\n", path.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  g.log_fd = captured_output_fd();
  const int out_fd = ::dup(terminal_fd());
  g.out = out_fd >= 0 ? ::fdopen(out_fd, "w") : nullptr;
  if (!g.out) g.out = stdout;
  prompt_setup(g.out, [] { g.done = true; });  // the names to complete are asked for after the greeting
  run_prompt(job_alive);
  ::close(g.fd);
  release_captured_output();
  rl_outstream = stdout;
  if (g.out != stdout) std::fclose(g.out);
  g.out = stdout;
  return 0;
}

}  // namespace tandem
