#pragma once
// The console prompt's line editing (GNU readline), as users of IPython or psql
// expect it:
//  - Ctrl-C clears the line being typed; it does not stop the job (the terminal's
//    interrupt character is off while the prompt reads a line, so it arrives as a
//    key). stop() stops the job; Ctrl-D on an empty line leaves the prompt.
//  - Tab completes the built-ins, the policy's parameter names and the console's Lua
//    globals (one level into tables): names the server sends (repl.hpp's completion
//    request), refreshed after every command.
//  - History persists in $XDG_DATA_HOME/tandem/history (default
//    ~/.local/share/tandem/history), at most kHistoryLines lines, owner-only; a
//    home that cannot be written leaves the prompt working without it.
#include <cstdio>
#include <string>
#include <vector>

namespace tandem {

constexpr int kHistoryLines = 1000;

// The history file's path ("" when neither XDG_DATA_HOME nor HOME is set).
std::string console_history_path();

// Sets readline up for the prompt (keys, completion, history from the file); its
// output goes to `out`. leave() is called on Ctrl-D at an empty line.
void prompt_setup(FILE* out, void (*leave)());
// A line the user entered: into the history and its file.
void prompt_remember(const std::string& line);
// The names Tab completes (one a line, as the server sends them).
void prompt_set_completions(const std::string& names);
// Prints text above the prompt and the line being typed, which are drawn again below.
void prompt_print_above(const std::string& text, bool prompt_shown);

}  // namespace tandem
