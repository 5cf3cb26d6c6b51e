#include "engine/script/capped_state.hpp"

#include <cstdio>
#include <cstdlib>

#include "engine/core/clock.hpp"
#include "engine/script/budget.hpp"
#include "engine/script/lua_state.hpp"
#include "engine/script/lua_whitelist.hpp"

namespace tandem {

const char* ScriptFailure::kind_name(Kind kind) {
  switch (kind) {
    case Timeout: return "timeout";
    case Memory: return "memory";
    case Garbage: return "rejected";
    case Crash: return "crash";
    case Hung: return "hung";
    default: return "error";
  }
}

const char* ScriptFailure::kind_name() const { return kind_name(kind_); }

// realloc with a cap. Refusing makes Lua raise "not enough memory" in the call that
// asked. enforce is off outside call()'s protected part (see the header).
struct CappedState::Allocator {
  size_t used = 0, cap = 0;
  bool refused = false;
  bool enforce = true;  // the set-up is protected too
  static void* alloc(void* ud, void* ptr, size_t old_size, size_t new_size) {
    auto* a = static_cast<Allocator*>(ud);
    if (new_size == 0) {
      std::free(ptr);
      a->used -= old_size;
      return nullptr;
    }
    if (a->enforce && new_size > old_size && a->used - old_size + new_size > a->cap) {
      a->refused = true;
      return nullptr;
    }
    void* p = std::realloc(ptr, new_size);
    if (p) a->used = a->used - old_size + new_size;
    return p;
  }
};

CappedState::CappedState(double memory_mb, const std::string& owner)
    : alloc_(std::make_unique<Allocator>()), cap_mb_(memory_mb), owner_(owner) {
  alloc_->cap = static_cast<size_t>(memory_mb * 1024.0 * 1024.0);
  L_ = lua_newstate(&Allocator::alloc, alloc_.get());
  if (!L_) throw ScriptFailure(ScriptFailure::Memory, "could not create a Lua state for " + owner + ": out of memory");
  // Set up under protection: with a small cap even opening the libraries can fail,
  // and an unprotected error would end the process.
  if (lua_cpcall(L_, open_whitelisted_libraries, nullptr) != 0) {
    const std::string why = lua_value_text(L_, -1);
    const bool memory = alloc_->refused;
    lua_close(L_);
    L_ = nullptr;
    char cap[32];
    std::snprintf(cap, sizeof cap, "%g", memory_mb);
    if (memory)
      throw ScriptFailure(ScriptFailure::Memory, "could not set up a Lua state for " + owner + " within " + cap +
                                                     " MB (" + why + "); raise policy.memory_mb");
    throw ScriptFailure(ScriptFailure::Error, "could not set up the Lua environment for " + owner + ": " + why +
                                                  "\n  what to do: check scripts/tandem/whitelist.lua under " +
                                                  tandem_root());
  }
  alloc_->enforce = false;  // capped again inside every call
}

CappedState::~CappedState() {
  if (L_) lua_close(L_);
}

double CappedState::memory_mb() const { return static_cast<double>(alloc_->used) / (1024.0 * 1024.0); }

namespace {

// The protected part of a call: from here on the memory cap holds. Upvalue: the
// allocator's enforce flag; arguments: the function and its arguments.
int enter_capped(lua_State* L) {
  *static_cast<bool*>(lua_touserdata(L, lua_upvalueindex(1))) = true;
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

int collect_garbage(lua_State* L) {
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}

}  // namespace

// LuaJIT collects when the heap reaches twice what the last collection left, and does
// no emergency collection when the allocator refuses: a state whose live data passed
// half its cap, or whose call met the cap, would otherwise fail every later call
// with its own garbage. A full collection after such a call (uncapped; protected,
// should a finalizer raise) leaves the next call the room the live data does not use.
void CappedState::collect_if_crowded() {
  alloc_->enforce = false;
  if (alloc_->refused || alloc_->used > alloc_->cap / 2) lua_cpcall(L_, collect_garbage, nullptr);
  alloc_->refused = false;
}

void CappedState::call(int nargs, int nresults, const std::string& what, double budget_ms,
                       const char* budget_source) {
  struct Uncap {
    bool& enforce;
    ~Uncap() { enforce = false; }
  } uncap{alloc_->enforce};
  alloc_->enforce = false;
  lua_pushlightuserdata(L_, &alloc_->enforce);
  lua_pushcclosure(L_, enter_capped, 1);
  lua_insert(L_, -(nargs + 2));  // below the function and its arguments
  alloc_->refused = false;
  char interrupted[400];
  std::snprintf(interrupted, sizeof interrupted,
                "interrupted: %s ran past its time budget of %.1f ms of CPU (%s)", owner_.c_str(), budget_ms,
                budget_source);
  const std::string interrupted_text = interrupted;
  const double start = now_ms();
  CallBudget budget(L_, budget_ms, interrupted_text);
  try {
    protected_call(L_, nargs + 1, nresults, what);
  } catch (const std::exception& e) {
    last_call_ms_ = now_ms() - start;
    last_call_cpu_ms_ = budget.cpu_used_ms();
    const ScriptFailure::Kind kind = budget.expired() ? ScriptFailure::Timeout
                                     : alloc_->refused  ? ScriptFailure::Memory
                                                        : ScriptFailure::Error;
    collect_if_crowded();
    std::string message = e.what();
    if (kind == ScriptFailure::Memory)
      message += "\n  what to do: " + owner_ + " may hold at most policy.memory_mb = " +
                 std::to_string(static_cast<int>(cap_mb_)) + " MB; look for a table or string that grows without "
                 "bound, or raise the cap";
    throw ScriptFailure(kind, message);
  }
  last_call_ms_ = now_ms() - start;
  last_call_cpu_ms_ = budget.cpu_used_ms();
  collect_if_crowded();
}

}  // namespace tandem
