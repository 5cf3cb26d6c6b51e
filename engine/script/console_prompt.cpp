#include "engine/script/console_prompt.hpp"

#include <fcntl.h>
#include <readline/history.h>
#include <readline/readline.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace tandem {

namespace {

FILE* g_out = stdout;
std::vector<std::string> g_names;  // what Tab completes
std::string g_history;             // the history file ("" : none)

// readline's terminal preparation, with the interrupt character off: Ctrl-C reaches
// readline as a key (clear_line) instead of signalling the job. Deprep restores the
// terminal readline found, interrupt character included.
void prep_terminal(int meta) {
  rl_prep_terminal(meta);
  termios t{};
  const int fd = fileno(rl_instream ? rl_instream : stdin);
  if (::tcgetattr(fd, &t) != 0) return;
  t.c_cc[VINTR] = _POSIX_VDISABLE;
  ::tcsetattr(fd, TCSADRAIN, &t);
}

// Ctrl-C: the line is dropped, shown with ^C as a shell shows it, and a fresh prompt
// follows.
int clear_line(int, int) {
  rl_point = rl_end;
  rl_redisplay();
  std::fputs("^C\n", g_out);
  std::fflush(g_out);
  rl_replace_line("", 0);
  rl_point = 0;
  rl_on_new_line();
  rl_redisplay();
  return 0;
}

void (*g_leave)() = nullptr;

// Ctrl-D: on an empty line the prompt is taken off the screen and left (as a shell
// leaves); on a line with text it deletes the character under the cursor, as usual.
int leave_or_delete(int count, int key) {
  if (rl_end > 0) return rl_delete(count, key);
  rl_set_prompt("");
  rl_redisplay();
  if (g_leave) g_leave();
  return 0;
}

char* next_completion(const char* text, int state) {
  static size_t at;
  static std::string prefix;
  if (state == 0) {
    at = 0;
    prefix = text;
  }
  while (at < g_names.size()) {
    const std::string& n = g_names[at++];
    if (n.compare(0, prefix.size(), prefix) == 0) return strdup(n.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // no file names when nothing matches
  rl_completion_append_character = '\0';
  rl_completion_suppress_quote = 1;  // set('ft<Tab>: the quote stays open for the user
  return rl_completion_matches(text, next_completion);
}

// The history file's folder, owner-only when made here; false when it cannot be.
bool make_history_dir(const std::string& file) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  if (std::filesystem::is_directory(dir, ec)) return true;
  std::filesystem::create_directories(dir, ec);
  if (ec) return false;
  ::chmod(dir.c_str(), 0700);
  return true;
}

}  // namespace

std::string console_history_path() {
  const char* xdg = std::getenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  // The XDG spec ignores a relative XDG_DATA_HOME.
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/tandem/history";
  if (home && home[0]) return std::string(home) + "/.local/share/tandem/history";
  return "";
}

void prompt_setup(FILE* out, void (*leave)()) {
  g_out = out;
  g_leave = leave;
  rl_outstream = out;
  rl_readline_name = "tandem";
  rl_catch_signals = 0;  // the job's own handlers (interrupt.hpp) stay in place
  rl_prep_term_function = prep_terminal;
  rl_bind_key(3, clear_line);  // Ctrl-C
  rl_bind_key(4, leave_or_delete);  // Ctrl-D
  rl_attempted_completion_function = complete;
  rl_completer_word_break_characters = const_cast<char*>(" \t\n\"'`@$><=;|&{}()[],+-*/%^~#");
  stifle_history(kHistoryLines);
  g_history = console_history_path();
  if (!g_history.empty()) read_history(g_history.c_str());  // none yet, or unreadable: an empty history
}

void prompt_remember(const std::string& line) {
  add_history(line.c_str());
  if (g_history.empty() || !make_history_dir(g_history)) return;
  // Created owner-only before readline appends: commands may name files and hosts.
  const int fd = ::open(g_history.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;  // an unwritable home: the session keeps its history in memory
  ::close(fd);
  if (append_history(1, g_history.c_str()) == 0) history_truncate_file(g_history.c_str(), kHistoryLines);
}

void prompt_set_completions(const std::string& names) {
  g_names.clear();
  std::istringstream in(names);
  for (std::string n; std::getline(in, n);)
    if (!n.empty()) g_names.push_back(n);
}

void prompt_print_above(const std::string& text, bool prompt_shown) {
  if (!prompt_shown) {
    std::fwrite(text.data(), 1, text.size(), g_out);
    std::fflush(g_out);
    return;
  }
  // readline's idiom: take the prompt and the line off the screen, print, then have
  // readline draw both again on the line below.
  const int point = rl_point;
  char* line = rl_copy_text(0, rl_end);
  rl_save_prompt();
  rl_replace_line("", 0);
  rl_redisplay();
  std::fwrite(text.data(), 1, text.size(), g_out);
  std::fflush(g_out);
  rl_restore_prompt();
  rl_replace_line(line, 0);
  rl_point = point;
  rl_redisplay();
  std::free(line);
}

}  // namespace tandem
