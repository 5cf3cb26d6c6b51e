#include "engine/script/repl_client.hpp"

#include <poll.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "engine/script/repl.hpp"

namespace tandem {

namespace {

// The readline callback has no user data: the client's state lives here (one client
// per process).
struct Client {
  int fd = -1;
  bool waiting = false;  // a command was sent, its answer not yet complete
  bool done = false;
  std::string pending;   // answer bytes not yet printed
} g;

void on_line(char* line) {
  if (!line) {  // Ctrl-D: detach
    g.done = true;
    std::printf("\n[detached; the run goes on]\n");
    return;
  }
  std::string text(line);
  std::free(line);
  if (text.find_first_not_of(" \t") == std::string::npos) return;
  add_history(text.c_str());
  text += '\n';
  if (::send(g.fd, text.data(), text.size(), MSG_NOSIGNAL) < 0) {
    g.done = true;
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
    const bool unasked = !g.waiting;  // a late answer (a swap's result) while at the prompt
    if (unasked) std::fputs("\n", stdout);
    std::fwrite(g.pending.data(), 1, z, stdout);
    std::fflush(stdout);
    g.pending.erase(0, z + 1);
    if (g.waiting || unasked) {
      g.waiting = false;
      rl_set_prompt("tandem> ");
      rl_on_new_line();
      rl_redisplay();
    }
  }
  return true;
}

}  // namespace

int attach_console(const std::string& run_dir, const std::function<bool()>& job_alive) {
  const std::string path = run_dir + "/repl.sock";
  for (;;) {
    if (std::filesystem::exists(path) && (g.fd = connect_console(path)) >= 0) break;
    if (!job_alive || !job_alive()) {
      std::fprintf(stderr, "tandem attach: no console at %s (is the run still going, and is it yours?)\n", path.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  g.waiting = true;  // the greeting
  rl_callback_handler_install("", on_line);
  bool open = true;
  while (!g.done) {
    pollfd polls[2] = {{g.fd, POLLIN, 0}, {STDIN_FILENO, static_cast<short>(g.waiting ? 0 : POLLIN), 0}};
    if (::poll(polls, 2, 200) < 0) continue;
    if (polls[0].revents & (POLLIN | POLLHUP)) {
      if (!read_server()) {
        open = false;
        if (!g.pending.empty()) std::fwrite(g.pending.data(), 1, g.pending.size(), stdout);
        break;
      }
    }
    if (!g.waiting && (polls[1].revents & (POLLIN | POLLHUP))) rl_callback_read_char();
  }
  rl_callback_handler_remove();
  ::close(g.fd);
  if (!open) std::printf("\n[the run's console closed]\n");
  return 0;
}

}  // namespace tandem
