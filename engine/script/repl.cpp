#include "engine/core/log.hpp"
#include "engine/script/repl.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.hpp"
#include "engine/script/experiment_loader.hpp"
#include "engine/train/worker_stats_fields.hpp"

namespace tandem {

namespace {

// A sockaddr for `path` that fits: a long run directory path is reached through
// /proc/self/fd/N of an open descriptor of the directory (sun_path holds 108 bytes).
struct SocketAddress {
  sockaddr_un addr{};
  int dir_fd = -1;
  explicit SocketAddress(const std::string& path) {
    addr.sun_family = AF_UNIX;
    std::string p = path;
    if (p.size() >= sizeof addr.sun_path) {
      const std::filesystem::path full(path);
      dir_fd = ::open(full.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      TANDEM_CHECK(dir_fd >= 0, "cannot open the run directory ", full.parent_path().string(), ": ",
                   std::strerror(errno));
      p = "/proc/self/fd/" + std::to_string(dir_fd) + "/" + full.filename().string();
    }
    std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  }
  ~SocketAddress() {
    if (dir_fd >= 0) ::close(dir_fd);
  }
};

void send_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away: nothing to tell it
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void push_console_worker(lua_State* L, const WorkerStats& w) {
  lua_createtable(L, 0, 12);
  for (const StatsField& f : kWorkerStatsFields) {
    if (!(f.shown & kShownInConsole)) continue;
    if (f.kind == StatsKind::text)
      set_string(L, f.name, std::string(stats_text(w, f)));
    else
      set_number(L, f.name, stats_number(w, f) + (f.one_based_in_lua ? 1 : 0));
  }
}

void push_console_columns(lua_State* L) {
  std::vector<const StatsField*> printed;
  for (const StatsField& f : kWorkerStatsFields)
    if ((f.shown & kShownInConsole) && f.console_column > 0) printed.push_back(&f);
  std::sort(printed.begin(), printed.end(),
            [](const StatsField* a, const StatsField* b) { return a->console_column < b->console_column; });
  lua_createtable(L, static_cast<int>(printed.size()), 0);
  int n = 0;
  for (const StatsField* f : printed) {
    lua_createtable(L, 3, 1);
    lua_pushstring(L, f->name);
    lua_rawseti(L, -2, 1);
    lua_pushstring(L, f->console_header);
    lua_rawseti(L, -2, 2);
    if (f->console_format) {
      lua_pushstring(L, f->console_format);
      lua_rawseti(L, -2, 3);
    }
    set_number(L, "column", f->console_column);
    lua_rawseti(L, -2, ++n);
  }
}

int connect_console(const std::string& socket_path) {
  SocketAddress a(socket_path);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&a.addr), sizeof a.addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

ReplConsole::ReplConsole(const std::string& run_dir, PolicyHost* policy, double budget_ms, double memory_mb)
    : path_(run_dir + "/repl.sock"), policy_(policy), budget_ms_(budget_ms), lua_(memory_mb, "the console command") {
  // The Lua side first: a broken library fails the run before anything listens. The
  // state is whitelisted like a policy's (no io, os.exit, debug.sethook, ffi...):
  // the engine table's built-ins are the only way a command acts on the run.
  lua_State* L = lua_.get();
  lua_pushlightuserdata(L, this);
  lua_pushcclosure(L, &lua_guard<l_print>, 1);
  lua_setglobal(L, "print");
  require_module(L, "tandem.repl");  // M
  lua_getfield(L, -1, "install");
  lua_createtable(L, 0, 11);  // engine
  const std::pair<const char*, lua_CFunction> fns[] = {
      {"workers", &lua_guard<l_workers>}, {"columns", &lua_guard<l_columns>}, {"plan", &lua_guard<l_plan>},
      {"history", &lua_guard<l_history>}, {"status", &lua_guard<l_status>},   {"policy", &lua_guard<l_policy>},
      {"swap", &lua_guard<l_swap>},       {"set", &lua_guard<l_set>},         {"emulate", &lua_guard<l_emulate>},
      {"request", &lua_guard<l_request>}};
  for (const auto& [name, fn] : fns) {
    lua_pushlightuserdata(L, this);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, -2, name);
  }
  protected_call(L, 1, 0, "installing the console's built-ins (scripts/tandem/repl.lua)");
  lua_getfield(L, -1, "show");  // kept: a command cannot redirect how values are printed
  show_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);

  // The socket: owner only, from the moment it exists (umask around bind, then chmod).
  ::unlink(path_.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TANDEM_CHECK(listen_fd_ >= 0, "cannot create the console socket: ", std::strerror(errno));
  SocketAddress a(path_);
  const mode_t old = ::umask(0177);
  const int rc = ::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a.addr), sizeof a.addr);
  ::umask(old);
  TANDEM_CHECK_HINT(rc == 0, "check the run directory is writable", "cannot create the console socket ", path_, ": ",
                    std::strerror(errno));
  ::chmod(path_.c_str(), 0600);
  TANDEM_CHECK(::listen(listen_fd_, 8) == 0, "cannot listen on the console socket ", path_, ": ", std::strerror(errno));
  TANDEM_CHECK(::pipe2(wake_, O_CLOEXEC) == 0, "cannot make the console's wake-up pipe: ", std::strerror(errno));
  thread_ = std::thread([this] { accept_loop(); });
}

ReplConsole::~ReplConsole() { finished("the training process ended"); }

void ReplConsole::finished(const std::string& how) {
  if (stop_.exchange(true)) return;
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (int c : clients_) {
    send_all(c, std::string("\n[") + how + "]\n" + '\0');
    ::close(c);
  }
  clients_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::unlink(path_.c_str());
  for (int& fd : wake_)
    if (fd >= 0) ::close(fd), fd = -1;
}

void ReplConsole::accept_loop() {
  std::map<int, std::string> partial;  // each client's unfinished line
  std::vector<int> fds;
  while (!stop_) {
    std::vector<pollfd> polls{{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      fds = clients_;
    }
    for (int c : fds) polls.push_back({c, POLLIN, 0});
    if (::poll(polls.data(), polls.size(), 500) < 0 && errno != EINTR) break;
    if (stop_) break;
    if (polls[0].revents & POLLIN) {
      const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        std::lock_guard<std::mutex> lock(mu_);
        clients_.push_back(c);
        send_all(c, "tandem console: " + status() + ". help() lists the commands; Ctrl-D detaches.\n" + '\0');
      }
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      const short ev = polls[i + 2].revents;
      if (!ev) continue;
      char buf[4096];
      const ssize_t n = (ev & POLLIN) ? ::recv(fds[i], buf, sizeof buf, 0) : 0;
      std::lock_guard<std::mutex> lock(mu_);
      if (n <= 0) {  // detached
        drop_client(fds[i], "");
        partial.erase(fds[i]);
        continue;
      }
      if (!take_input(fds[i], partial[fds[i]], buf, static_cast<size_t>(n))) partial.erase(fds[i]);
    }
  }
}

// Under mu_. Appends what a client sent and queues its complete lines; false when the
// client was disconnected (a line past kMaxLine).
bool ReplConsole::take_input(int client, std::string& line, const char* data, size_t n) {
  line.append(data, n);
  for (size_t nl; (nl = line.find('\n')) != std::string::npos;) {
    if (nl > kMaxLine) break;
    if (queue_.size() >= kMaxQueued) {
      send_all(client, "console: " + std::to_string(kMaxQueued) + " commands are already waiting; this one is "
                       "dropped\n" + '\0');
    } else {
      queue_.push_back({client, line.substr(0, nl)});
    }
    line.erase(0, nl + 1);
  }
  cv_.notify_all();
  if (line.size() <= kMaxLine) return true;
  drop_client(client, "console: a command may be at most 64 KB (" + std::to_string(kMaxLine) +
                          " bytes); this one is longer, so this client is disconnected (the run is untouched)\n");
  return false;
}

// Under mu_.
void ReplConsole::drop_client(int client, const std::string& last_words) {
  if (!last_words.empty()) send_all(client, last_words + '\0');
  ::close(client);
  clients_.erase(std::remove(clients_.begin(), clients_.end(), client), clients_.end());
  // A client that sent its commands and left (echo 'stop()' | tandem attach) still
  // has them run; one disconnected for an over-long line has its dropped.
  if (!last_words.empty())
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), [&](const Command& c) { return c.client == client; }),
                 queue_.end());
}

// Under mu_.
std::string ReplConsole::status() const {
  if (!served_) return "starting";
  const std::string done = iteration_ < 0 ? "no iteration done yet (" + std::to_string(total_) + " to run)"
                                          : "iteration " + std::to_string(iteration_) + " done (" +
                                                std::to_string(iteration_ + 1) + " of " + std::to_string(total_) + ")";
  return done + ", " + log::counted(workers_, "worker") + (paused_ ? ", paused" : "");
}

void ReplConsole::reply(int client, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(clients_.begin(), clients_.end(), client) == clients_.end()) return;  // detached meanwhile
  send_all(client, text + '\0');
}

void ReplConsole::serve(const ConsoleView& view, ConsoleRequests& requests) {
  std::deque<Command> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    served_ = true;
    iteration_ = view.iteration;
    total_ = view.total;
    workers_ = view.workers;
    paused_ = view.paused;
    todo.swap(queue_);
  }
  view_ = &view;
  requests_ = &requests;
  for (const Command& c : todo) run_command(c);
  answer_swaps();
  view_ = nullptr;
  requests_ = nullptr;
}

void ReplConsole::serve_paused(const ConsoleView& view, ConsoleRequests& requests) {
  while (!requests.resume && !requests.stop && !stop_) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return !queue_.empty(); });
    }
    serve(view, requests);
  }
}

void ReplConsole::answer_swaps() {
  for (auto it = swaps_.begin(); it != swaps_.end();) {
    if (it->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    const SwapResult r = it->result.get();
    reply(it->client, "[" + it->what + (r.ok ? " done] " : " failed] ") + r.message + "\n");
    it = swaps_.erase(it);
  }
}

namespace {

bool is_identifier(const char* s, size_t n) {
  if (n == 0 || n > 64 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (size_t i = 0; i < n; ++i)
    if (!std::isalnum(static_cast<unsigned char>(s[i])) && s[i] != '_') return false;
  return true;
}

// The string keys of the table at `index` (raw reads: no metamethod runs), each with
// "(" when a function and "." when a table, after `prefix`; one level into tables
// when `deeper`.
void table_names(lua_State* L, int index, const std::string& prefix, bool deeper, std::vector<std::string>& out) {
  index = index < 0 ? lua_gettop(L) + index + 1 : index;
  lua_pushnil(L);
  while (lua_next(L, index) && out.size() < kMaxCompletions) {
    size_t n = 0;
    const char* k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &n) : nullptr;
    if (k && is_identifier(k, n)) {
      const std::string name = prefix + std::string(k, n);
      const int type = lua_type(L, -1);
      out.push_back(name + (type == LUA_TFUNCTION ? "(" : type == LUA_TTABLE && deeper ? "." : ""));
      if (type == LUA_TTABLE && deeper) table_names(L, -1, name + ".", false, out);
    }
    lua_pop(L, 1);
  }
}

}  // namespace

// The names Tab completes: the console state's globals (the built-ins among them),
// one level into its tables, and the policy's parameter names.
std::string ReplConsole::completions() {
  lua_State* L = lua_.get();
  std::vector<std::string> names;
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  table_names(L, -1, "", true, names);
  lua_pop(L, 1);
  if (policy_) {
    const nlohmann::json params = nlohmann::json::parse(policy_->params_json(), nullptr, false);
    if (params.is_object())
      for (const auto& [key, value] : params.items())
        if (is_identifier(key.data(), key.size())) names.push_back(key);
    std::istringstream lines(policy_->params_in_force());
    for (std::string line; std::getline(lines, line);) {
      const std::string key = line.substr(0, line.find('\t'));
      if (is_identifier(key.data(), key.size())) names.push_back(key);
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.size() > kMaxCompletions) names.resize(kMaxCompletions);
  std::string text(1, kCompletionRequest);
  for (const std::string& n : names) text += n + "\n";
  return text;
}

void ReplConsole::run_command(const Command& c) {
  if (c.text.size() == 1 && c.text[0] == kCompletionRequest) {
    reply(c.client, completions());
    return;
  }
  lua_State* L = lua_.get();
  client_ = c.client;
  output_.clear();
  const int top = lua_gettop(L);
  try {
    // An expression prints its values (as Lua 5.3's REPL does); otherwise a statement.
    const std::string expr = "return " + c.text;
    if (luaL_loadbuffer(L, expr.data(), expr.size(), "=console") != 0) {
      lua_pop(L, 1);
      if (luaL_loadbuffer(L, c.text.data(), c.text.size(), "=console") != 0) {
        const std::string msg = lua_tostring(L, -1);
        lua_pop(L, 1);
        throw Error(msg, "console", "check the command's syntax");
      }
    }
    lua_.call(0, LUA_MULTRET, "running the console command '" + c.text.substr(0, 200) + "'", budget_ms_);
    const int results = lua_gettop(L) - top;
    if (results > 0) {  // repl.show(...) prints them, under the same budget and cap
      lua_rawgeti(L, LUA_REGISTRYINDEX, show_ref_);
      lua_insert(L, top + 1);
      lua_.call(results, 0, "printing the command's values", budget_ms_);
    }
  } catch (const std::exception& e) {
    output_ += std::string(e.what()) + "\n(the run is untouched)\n";
  }
  lua_settop(L, top);
  reply(c.client, output_);
  client_ = -1;
}

ReplConsole& ReplConsole::self(lua_State* L) {
  return *static_cast<ReplConsole*>(lua_touserdata(L, lua_upvalueindex(1)));
}

int ReplConsole::l_print(lua_State* L) {
  ReplConsole& r = self(L);
  const int n = lua_gettop(L);
  lua_getglobal(L, "tostring");
  for (int i = 1; i <= n; ++i) {
    lua_pushvalue(L, -1);
    lua_pushvalue(L, i);
    lua_call(L, 1, 1);
    const char* s = lua_tostring(L, -1);
    r.output_ += (i > 1 ? "\t" : "") + std::string(s ? s : "");
    lua_pop(L, 1);
  }
  r.output_ += "\n";
  return 0;
}

int ReplConsole::l_status(lua_State* L) {
  const ConsoleView& v = *self(L).view_;
  lua_createtable(L, 0, 8);
  set_number(L, "iteration", static_cast<double>(v.iteration));  // the last completed (console.hpp)
  set_number(L, "completed", static_cast<double>(v.iteration + 1));
  set_number(L, "total", static_cast<double>(v.total));
  set_number(L, "workers", v.workers);
  set_number(L, "global_batch", static_cast<double>(v.global_batch));
  set_number(L, "wall_s", v.wall_s);
  if (v.test_accuracy >= 0) set_number(L, "test_accuracy", v.test_accuracy);
  lua_pushboolean(L, v.paused);
  lua_setfield(L, -2, "paused");
  return 1;
}

int ReplConsole::l_workers(lua_State* L) {
  const ConsoleView& v = *self(L).view_;
  lua_createtable(L, v.workers, 0);
  if (!v.reports) return 1;
  int n = 0;
  for (const WorkerStats& w : *v.reports) {
    if (!w.valid) continue;
    push_console_worker(L, w);
    lua_rawseti(L, -2, ++n);
  }
  return 1;
}

int ReplConsole::l_columns(lua_State* L) {
  push_console_columns(L);
  return 1;
}

int ReplConsole::l_plan(lua_State* L) {
  const ConsoleView& v = *self(L).view_;
  lua_createtable(L, 0, 4);
  if (!v.plan) return 1;
  push_int_array(L, v.plan->local_batch);
  lua_setfield(L, -2, "local_batch");
  set_string(L, "mode", sync_mode_name(v.plan->sync.mode));
  set_string(L, "sync", v.plan->sync.str());
  set_string(L, "text", v.plan->str());
  return 1;
}

int ReplConsole::l_history(lua_State* L) {
  const ConsoleView& v = *self(L).view_;
  const int want = static_cast<int>(luaL_optinteger(L, 1, 10));
  lua_newtable(L);
  if (!v.history) return 1;
  const size_t n = std::min(v.history->size(), static_cast<size_t>(std::max(want, 0)));
  int k = 0;
  for (size_t i = v.history->size() - n; i < v.history->size(); ++i) {
    const HistoryRow& h = (*v.history)[i];
    lua_createtable(L, 0, 6);
    set_number(L, "iteration", static_cast<double>(h.iteration));
    set_number(L, "step_ms", h.step_ms);
    set_number(L, "loss", h.loss);
    set_number(L, "wall_s", h.wall_s);
    std::string plan = "[";
    for (size_t j = 0; j < h.local_batch.size(); ++j) plan += (j ? ", " : "") + std::to_string(h.local_batch[j]);
    set_string(L, "plan", plan + "]");
    if (!h.sync.empty()) set_string(L, "sync", h.sync);
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

namespace {

// Every parameter the policy's init() read, sorted: {name, value (as text),
// default = true when it took its default}; then those given in policy.params that
// it did not report (none, unless its worker died before reporting).
void push_params_in_force(lua_State* L, const PolicyHost& policy) {
  const nlohmann::json given = nlohmann::json::parse(policy.params_json(), nullptr, false);
  std::map<std::string, std::pair<std::string, bool>> shown;  // name -> (value, default)
  std::istringstream lines(policy.params_in_force());
  for (std::string line; std::getline(lines, line);) {
    const size_t tab = line.find('\t');
    const std::string name = line.substr(0, tab);
    if (tab != std::string::npos) shown[name] = {line.substr(tab + 1), true};
  }
  if (given.is_object())
    for (const auto& [key, value] : given.items()) shown[key] = {value.dump(), false};
  lua_createtable(L, static_cast<int>(shown.size()), 0);
  int n = 0;
  for (const auto& [name, value] : shown) {
    lua_createtable(L, 0, 3);
    set_string(L, "name", name);
    set_string(L, "value", value.first);
    lua_pushboolean(L, value.second);
    lua_setfield(L, -2, "default");
    lua_rawseti(L, -2, ++n);
  }
}

}  // namespace

int ReplConsole::l_policy(lua_State* L) {
  ReplConsole& r = self(L);
  if (!r.policy_) {
    lua_pushnil(L);
    return 1;
  }
  const PolicyHost::Totals t = r.policy_->totals();
  lua_createtable(L, 0, 8);
  set_string(L, "name", r.policy_->policy_name());
  set_string(L, "file", r.policy_->policy_file());
  push_params_in_force(L, *r.policy_);
  lua_setfield(L, -2, "params");
  set_number(L, "failures", static_cast<double>(t.failures));
  set_number(L, "rejected", static_cast<double>(t.rejected));
  set_number(L, "swaps", static_cast<double>(t.swaps));
  lua_pushboolean(L, t.disabled);
  lua_setfield(L, -2, "disabled");
  return 1;
}

int ReplConsole::l_swap(lua_State* L) {
  ReplConsole& r = self(L);
  std::string path = luaL_checkstring(L, 1);
  TANDEM_CHECK_HINT(r.policy_, "start the run with policy.file=... to have a policy to swap",
                    "this run has no policy: swap() replaces the running one");
  if (path.find('/') == std::string::npos && path.find(".lua") == std::string::npos)
    path = tandem_root() + "/scripts/policies/" + path + ".lua";
  TANDEM_CHECK_HINT(std::filesystem::exists(path), "give a policy name under scripts/policies/ or a path to a .lua file",
                    "no policy file ", path);
  r.swaps_.push_back({r.client_, "swap to " + path, r.policy_->swap(path)});
  lua_pushstring(L, ("swap to " + path + " requested: the policy host loads and dry-runs it at its next decision").c_str());
  return 1;
}

int ReplConsole::l_set(lua_State* L) {
  ReplConsole& r = self(L);
  const std::string key = luaL_checkstring(L, 1);
  luaL_checkany(L, 2);
  TANDEM_CHECK_HINT(r.policy_, "start the run with policy.file=...", "this run has no policy whose parameters to set");
  nlohmann::json params = nlohmann::json::parse(r.policy_->params_json(), nullptr, false);
  if (!params.is_object()) params = nlohmann::json::object();
  params[key] = lua_to_json(L, 2, key);
  const std::string file = r.policy_->policy_file();
  r.swaps_.push_back({r.client_, "set " + key + " = " + params[key].dump(), r.policy_->swap(file, params.dump())});
  lua_pushstring(L, ("set " + key + " = " + params[key].dump() +
                     " requested: the policy is re-initialised with it (its state handed over) at its next decision")
                        .c_str());
  return 1;
}

int ReplConsole::l_emulate(lua_State* L) {
  ReplConsole& r = self(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  ConsoleEvent e;
  lua_getfield(L, 1, "worker");
  lua_getfield(L, 1, "speed");
  lua_getfield(L, 1, "iterations");
  TANDEM_CHECK_HINT(lua_isnumber(L, -3) && lua_isnumber(L, -2), "write emulate{worker = 2, speed = 0.3, iterations = 50}",
                    "emulate{} needs a worker (0-based rank) and a speed");
  // Checked as numbers before any cast: a fraction, NaN or 1e300 is refused, not cut.
  const double worker = lua_tonumber(L, -3), iterations = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0.0;
  e.speed = lua_tonumber(L, -2);
  lua_pop(L, 3);
  TANDEM_CHECK_HINT(worker == std::floor(worker) && worker >= 0 && worker < r.view_->workers,
                    "workers are numbered 0..N-1", "no worker ", worker, " in a run of ", r.view_->workers);
  TANDEM_CHECK_HINT(iterations == std::floor(iterations) && iterations >= 0 && iterations <= 1e15,
                    "iterations = 50 lasts 50 iterations; 0 (or none) lasts to the end",
                    "iterations must be a whole number >= 0, got ", iterations);
  e.worker = static_cast<int>(worker);
  e.iterations = static_cast<int64_t>(iterations);
  TANDEM_CHECK_HINT(std::isfinite(e.speed) && e.speed > 0 && e.speed <= 100, "speed multiplies the worker's speed: 0.3 is a 3x slowdown",
                    "speed ", e.speed, " out of range (0, 100]");
  r.requests_->events.push_back(e);
  return 0;
}

int ReplConsole::l_request(lua_State* L) {
  ReplConsole& r = self(L);
  const std::string what = luaL_checkstring(L, 1);
  if (what == "stop")
    r.requests_->stop = true;
  else if (what == "pause")
    r.requests_->pause = true;
  else if (what == "resume")
    r.requests_->resume = true;
  else if (what == "checkpoint")
    r.requests_->checkpoint = true;
  else
    TANDEM_FAIL("unknown console request '", what, "'");
  return 0;
}

}  // namespace tandem
