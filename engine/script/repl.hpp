#pragma once
// The live console of a running job (train/console.hpp): a Unix socket in the run
// directory (repl.sock, readable and writable by the owner only; no TCP listener),
// which `tandem attach RUN_DIR` and `tandem run --repl` connect to. Any number of
// clients may attach and detach; a thread accepts them and queues their lines.
//
// A line is Lua, run on rank 0 at the next iteration boundary in the console's own
// Lua state (never concurrently with the loop), a CappedState (capped_state.hpp):
// the policies' whitelist, their memory cap, and their time budget on every
// command (policy.budget_ms of this thread's CPU time, with a wall-clock backstop of
// seconds: budget.hpp). A line may be at most kMaxLine bytes: a client that sends more is told so
// and disconnected, so no client can make rank 0 buffer without bound. An
// expression's values are printed; a command that errors prints its traceback and
// changes nothing. The built-ins (scripts/tandem/repl.lua) read the run's state and
// ask for changes: swap and set go through the policy host's hot-swap path; stop,
// pause and emulate reach every rank with the next Control message (control.hpp).
//
// Protocol: the client sends one line per command; every answer (and the greeting)
// ends with a NUL byte. When the run ends the server sends its last words and closes.
// A line that is kCompletionRequest alone asks for the names Tab completes: the
// answer is that byte, then one name a line (the console's globals, functions with
// "(", one level into its tables, and the policy's parameter names), at most
// kMaxCompletions of them.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/script/capped_state.hpp"
#include "engine/script/lua_state.hpp"
#include "engine/script/policy_host.hpp"
#include "engine/train/console.hpp"

namespace tandem {

constexpr char kCompletionRequest = '\x01';
constexpr size_t kMaxCompletions = 4096;

// A connected socket to the console at socket_path (run_dir/repl.sock), or -1.
int connect_console(const std::string& socket_path);

// What the console's engine.workers() and engine.columns() push: one worker's row
// (its fields shown in the console, worker_stats_fields.hpp), and the columns
// workers() prints, in order, as {key, header, format?, column = n} each.
void push_console_worker(lua_State* L, const WorkerStats& w);
void push_console_columns(lua_State* L);

class ReplConsole final : public Console {
public:
  // policy: the run's policy host (null without a policy); budget_ms and memory_mb:
  // each command's time budget and the console state's memory cap (the policy's).
  ReplConsole(const std::string& run_dir, PolicyHost* policy, double budget_ms, double memory_mb);
  ~ReplConsole() override;

  void serve(const ConsoleView& view, ConsoleRequests& requests) override;
  void serve_paused(const ConsoleView& view, ConsoleRequests& requests) override;
  void finished(const std::string& how) override;

  const std::string& socket_path() const { return path_; }

private:
  struct Command {
    int client;
    std::string text;
  };
  struct PendingSwap {
    int client;
    std::string what;
    std::future<SwapResult> result;
  };
  static constexpr size_t kMaxLine = 64 * 1024;  // one command's bytes
  static constexpr size_t kMaxQueued = 256;      // commands waiting for the next boundary
  void accept_loop();
  bool take_input(int client, std::string& line, const char* data, size_t n);
  void drop_client(int client, const std::string& last_words);
  void run_command(const Command& c);
  void reply(int client, const std::string& text);
  void answer_swaps();
  std::string completions();
  // The engine table's functions (Lua C functions; the console is their upvalue).
  static int l_workers(lua_State* L);
  static int l_columns(lua_State* L);
  static int l_plan(lua_State* L);
  static int l_history(lua_State* L);
  static int l_status(lua_State* L);
  static int l_policy(lua_State* L);
  static int l_swap(lua_State* L);
  static int l_set(lua_State* L);
  static int l_emulate(lua_State* L);
  static int l_request(lua_State* L);
  static int l_print(lua_State* L);
  static ReplConsole& self(lua_State* L);

  std::string path_;
  PolicyHost* policy_;
  double budget_ms_;
  CappedState lua_;
  int show_ref_ = LUA_NOREF;  // repl.show
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> queue_;
  std::vector<int> clients_;
  // The greeting's state (the last boundary's), formatted only when a client attaches.
  std::string status() const;
  bool served_ = false;  // a boundary has come
  int64_t iteration_ = -1, total_ = 0;
  int workers_ = 0;
  bool paused_ = false;
  // While a command runs: what it may read and ask, who asked, what it printed.
  const ConsoleView* view_ = nullptr;
  ConsoleRequests* requests_ = nullptr;
  int client_ = -1;
  std::string output_;
  std::vector<PendingSwap> swaps_;
};

}  // namespace tandem
