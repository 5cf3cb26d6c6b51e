// The `lpsolve` Lua module: a general MILP builder over Debian's lp_solve 5.5 (API in
// lpsolve.hpp and at the end of this comment).
//
// Design decisions:
//  - Plain C-style code: nothing throws, and no C++ object with a destructor is alive
//    where a Lua error can be raised (the one lock_guard covers lp_solve calls only),
//    so luaL_error is safe and no lua_guard is needed (DESIGN.md, habit 5). Lua errors
//    are raised from our own frames only, never inside an lp_solve callback, so none
//    unwinds through lp_solve. Buffers are malloc'd and owned by the model (__gc).
//  - A model is a userdata holding the lprec. Its methods are closures over the
//    metatable, so `self` is checked by one pointer comparison.
//  - Rows go in through lp_solve's row entry mode (fast), which must be off to add a
//    column, set the objective, write the model or solve: lp_solve 5.5.2.5 corrupts its
//    heap when set_obj_fnex runs in row mode, and solve() fails to leave row mode by
//    itself (see l_solve). Each of those calls switches it off first. Row mode can only
//    be switched on before the first solve; later rows go in column mode (slower).
//  - lp_solve crashes on a row or objective that names a column twice, so repeated
//    columns are merged here (coefficients summed), as in x + x = 2x.
//  - set_timeout takes whole seconds of the wall clock. The time limit is enforced
//    instead through put_abortfunc, in CPU time of the solving thread (like a policy's
//    budget, DESIGN.md habit 13: a loaded machine does not time a solve out): lp_solve
//    calls the abort function every simplex iteration and B&B node (some 3 million
//    times a second on a knapsack), so even 0.5 ms is kept to within tens of
//    microseconds; the CPU clock, a system call, is read only once enough wall time
//    has passed for the limit to be reached (ThreadCpuDeadline). Inside a budgeted
//    call the budget's deadline (call_deadline.hpp) stops the solve too. An abort with
//    an incumbent comes back from lp_solve as SUBOPTIMAL (status 'suboptimal', values
//    given), without one as USERABORT (status 'timeout').
//  - After a solve that was cut short (time limit, lp_solve failure) the model goes on
//    as a copy_lp copy: re-solving an lprec aborted early crashes lp_solve (renew()).
//  - lp_solve reports OPTIMAL with an objective of 1e30 when a variable that is in no
//    constraint can improve the objective without limit; that comes back 'unbounded'.
//  - Infinite bounds and right-hand sides (math.huge) map to lp_solve's infinity
//    (get_infinite, 1e30); any magnitude of 1e30 or more counts as infinite.
//
// Lua API:
//   lp.model() -> model; lp.inf; lp.version
//   m:var{lo=0, hi=inf, int=false, name=nil} -> column index
//   m:constraint(cols, coefs, op, rhs [, name]) -> row index   (op: '<=', '>=', '==', '=')
//   m:objective(cols, coefs [, 'min'|'max'])
//   m:solve{time_limit_s = 10} -> {status, ok, message, code, objective?, values?,
//                                  iterations, nodes, ms, cpu_ms}
//     (time_limit_s: seconds of CPU; ms: the solve's wall time, cpu_ms: its CPU time)
//   m:var_count(), m:constraint_count(), m:set_bounds(col, lo, hi), m:set_int(col, bool),
//   m:set_rhs(row, value), m:set_coef(row, col, value), m:write_lp() -> string, m:free()
#include "bindings/lpsolve.hpp"

#include "bindings/call_deadline.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

// Last: lp_lib.h defines TRUE, FALSE, LE, GE, EQ, ... as macros (DESIGN.md, Pitfalls).
#include <lp_lib.h>

namespace tandem {
namespace {

constexpr double kDefaultTimeLimitS = 10.0;

struct Model {
  lprec* lp;
  // The row being added (or the objective): column indices and coefficients, reused
  // from call to call.
  int* idx;
  REAL* val;
  int cap;
  // Per column (1-based): 1 + its position in the row being merged, 0 when absent.
  // All zero between calls.
  int* slot;
  int slot_cap;
  // The abort function's view of the current solve: its time limit (on the solve's
  // stack, null between solves).
  tandem::ThreadCpuDeadline* limit;
  int timed_out;
  // The last solve was cut short: the lprec must be replaced by a copy before any other
  // use (see renew()).
  int stale;
  // write_lp's text, owned here so that nothing leaks if pushing it raises.
  char* text;
  size_t text_size, text_cap;
  bool text_failed;
};

int __WINAPI abort_when_due(lprec*, void* handle) {
  Model* m = static_cast<Model*>(handle);
  if (m->limit == nullptr) return FALSE;
  const double now = tandem::now_ms();
  if (!m->limit->passed(now) && !tandem::call_deadline_passed(now)) return FALSE;
  m->timed_out = 1;
  return TRUE;
}

// make_lp (copy_lp too) re-initialises lp_solve's process-wide BLAS function table,
// after trying to dlopen an external "libmyBLAS.so" (some 15 us, every model), and
// delete_lp reads that table: states on different threads (the policy host's) must
// not do so at once. No Lua call happens under the lock.
std::mutex lifecycle_mutex;

lprec* new_lprec(lprec* copy_of) {
  std::lock_guard<std::mutex> lock(lifecycle_mutex);
  return copy_of != nullptr ? copy_lp(copy_of) : make_lp(0, 0);
}

void delete_lprec(lprec* lp) {
  std::lock_guard<std::mutex> lock(lifecycle_mutex);
  delete_lp(lp);
}

void prepare(lprec* lp, Model* m) {
  set_verbose(lp, NEUTRAL);
  put_abortfunc(lp, abort_when_due, m);
}

// lp_solve 5.5.2.5 leaves an lprec whose solve was aborted early (at the first or
// second abort check) in a state where the next solve dereferences NULL in coldual.
// copy_lp copies the model without the solver's state, so after a solve that was cut
// short the model continues as a fresh copy (losing only the warm-start basis).
void renew(lua_State* L, Model* m) {
  lprec* fresh = new_lprec(m->lp);
  if (fresh == nullptr) luaL_error(L, "lpsolve: out of memory while copying a model after an interrupted solve");
  delete_lprec(m->lp);
  m->lp = fresh;
  prepare(fresh, m);
  m->stale = 0;
}

// A short description of the Lua value at idx for "got ..." in messages.
void describe(lua_State* L, int idx, char* out, size_t size) {
  switch (lua_type(L, idx)) {
    case LUA_TNONE:
    case LUA_TNIL: std::snprintf(out, size, "nil"); break;
    case LUA_TBOOLEAN: std::snprintf(out, size, "%s", lua_toboolean(L, idx) ? "true" : "false"); break;
    case LUA_TNUMBER: {
      const double v = lua_tonumber(L, idx);
      if (std::isnan(v))
        std::snprintf(out, size, "nan");
      else
        std::snprintf(out, size, "%.14g", v);
      break;
    }
    case LUA_TSTRING: {
      size_t len = 0;
      const char* s = lua_tolstring(L, idx, &len);
      if (len <= 40)
        std::snprintf(out, size, "'%s'", s);
      else
        std::snprintf(out, size, "'%.40s...'", s);
      break;
    }
    default: std::snprintf(out, size, "a %s", luaL_typename(L, idx)); break;
  }
}

// Raises "lpsolve model:<method>: <what> must be <expected>, got <value at idx>".
int fail_arg(lua_State* L, const char* method, const char* what, const char* expected, int idx) {
  char got[96];
  describe(L, idx, got, sizeof got);
  return luaL_error(L, "lpsolve model:%s: %s must be %s, got %s", method, what, expected, got);
}

// The model at stack index 1 (self), or a Lua error naming the method.
Model* check_self(lua_State* L, const char* method) {
  Model* m = static_cast<Model*>(lua_touserdata(L, 1));
  if (m != nullptr && lua_getmetatable(L, 1)) {
    const int same = lua_rawequal(L, -1, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (same) {
      if (m->lp == nullptr) {
        luaL_error(
            L, "lpsolve model:%s: the model was freed (model:free() was called); make a new one with lpsolve.model()",
            method);
      }
      if (m->stale) renew(L, m);
      return m;
    }
  }
  char got[96];
  describe(L, 1, got, sizeof got);
  luaL_error(L, "lpsolve model:%s: call it on a model with ':' (m:%s(...)), got %s as self", method, method, got);
  return nullptr;
}

void leave_row_mode(Model* m) {
  if (is_add_rowmode(m->lp)) set_add_rowmode(m->lp, FALSE);
}

void reserve_row(lua_State* L, Model* m, int n) {
  if (n <= m->cap) return;
  int cap = m->cap < 16 ? 16 : m->cap;
  while (cap < n) cap *= 2;
  int* idx = static_cast<int*>(std::realloc(m->idx, sizeof(int) * cap));
  if (idx != nullptr) m->idx = idx;
  REAL* val = static_cast<REAL*>(std::realloc(m->val, sizeof(REAL) * cap));
  if (val != nullptr) m->val = val;
  if (idx == nullptr || val == nullptr) luaL_error(L, "lpsolve: out of memory for a row of %d entries", n);
  m->cap = cap;
}

void reserve_slots(lua_State* L, Model* m, int columns) {
  if (columns + 1 <= m->slot_cap) return;
  int cap = m->slot_cap < 64 ? 64 : m->slot_cap;
  while (cap < columns + 1) cap *= 2;
  int* slot = static_cast<int*>(std::realloc(m->slot, sizeof(int) * cap));
  if (slot == nullptr) luaL_error(L, "lpsolve: out of memory for %d columns", columns);
  std::memset(slot + m->slot_cap, 0, sizeof(int) * (cap - m->slot_cap));
  m->slot = slot;
  m->slot_cap = cap;
}

// A number argument or field that may be infinite, mapped onto lp_solve's infinity.
// NaN, and the infinity that `forbid` names (+1 or -1; 0 for none), are errors.
double check_bound(lua_State* L, const char* method, const char* what, int idx, int forbid) {
  if (lua_type(L, idx) != LUA_TNUMBER) fail_arg(L, method, what, "a number", idx);
  const double v = lua_tonumber(L, idx);
  if (std::isnan(v)) fail_arg(L, method, what, "a number (not NaN)", idx);
  if (v >= DEF_INFINITE) {
    if (forbid > 0) fail_arg(L, method, what, "below +infinity", idx);
    return DEF_INFINITE;
  }
  if (v <= -DEF_INFINITE) {
    if (forbid < 0) fail_arg(L, method, what, "above -infinity", idx);
    return -DEF_INFINITE;
  }
  return v;
}

// A column (or row) index argument in 1..count.
int check_index(lua_State* L, const char* method, const char* what, int idx, int count, const char* kind) {
  const bool is_number = lua_type(L, idx) == LUA_TNUMBER;
  const double v = is_number ? lua_tonumber(L, idx) : 0.0;
  if (!is_number || !(v >= 1 && v <= count) || v != std::floor(v)) {
    char expected[96];
    if (count > 0)
      std::snprintf(expected, sizeof expected, "a %s index in 1..%d", kind, count);
    else
      std::snprintf(expected, sizeof expected, "a %s index, but the model has no %ss yet", kind, kind);
    fail_arg(L, method, what, expected, idx);
  }
  return static_cast<int>(v);
}

// Reads the cols and coefs arrays at stack indices cols_at and cols_at + 1 (arguments
// 1 and 2 of the method) into m->idx / m->val, merging repeated columns. Returns the
// number of distinct columns. Every check comes before the merge, which cannot fail.
int read_row(lua_State* L, Model* m, const char* method, int cols_at) {
  const int coefs_at = cols_at + 1;
  if (!lua_istable(L, cols_at)) fail_arg(L, method, "argument 1 (cols)", "an array of column indices", cols_at);
  if (!lua_istable(L, coefs_at)) fail_arg(L, method, "argument 2 (coefs)", "an array of numbers", coefs_at);
  const int n = static_cast<int>(lua_objlen(L, cols_at));
  const int n_coefs = static_cast<int>(lua_objlen(L, coefs_at));
  if (n != n_coefs) {
    luaL_error(L, "lpsolve model:%s: argument 2 (coefs) must have as many entries as argument 1 (cols) (%d), got %d",
               method, n, n_coefs);
  }
  const int columns = get_Ncolumns(m->lp);
  reserve_row(L, m, n < 1 ? 1 : n);
  reserve_slots(L, m, columns);
  char what[64];
  for (int i = 0; i < n; ++i) {
    lua_rawgeti(L, cols_at, i + 1);
    lua_rawgeti(L, coefs_at, i + 1);
    std::snprintf(what, sizeof what, "argument 1 (cols) entry %d", i + 1);
    m->idx[i] = check_index(L, method, what, -2, columns, "column");
    if (lua_type(L, -1) != LUA_TNUMBER || !std::isfinite(lua_tonumber(L, -1))) {
      std::snprintf(what, sizeof what, "argument 2 (coefs) entry %d", i + 1);
      fail_arg(L, method, what, "a finite number", -1);
    }
    m->val[i] = lua_tonumber(L, -1);
    lua_pop(L, 2);
  }
  int k = 0;
  for (int i = 0; i < n; ++i) {
    const int c = m->idx[i];
    if (m->slot[c] != 0) {
      m->val[m->slot[c] - 1] += m->val[i];
    } else {
      m->slot[c] = k + 1;
      m->idx[k] = c;
      m->val[k] = m->val[i];
      ++k;
    }
  }
  for (int i = 0; i < k; ++i) m->slot[m->idx[i]] = 0;
  return k;
}

// ---------------------------------------------------------------------------------
// Methods

int l_model_new(lua_State* L) {
  Model* m = static_cast<Model*>(lua_newuserdata(L, sizeof(Model)));
  std::memset(m, 0, sizeof(Model));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_setmetatable(L, -2);  // from here on __gc releases whatever m holds
  m->lp = new_lprec(nullptr);
  if (m->lp == nullptr) return luaL_error(L, "lpsolve.model: lp_solve could not create a model (out of memory)");
  prepare(m->lp, m);
  set_minim(m->lp);
  return 1;
}

int l_var(lua_State* L) {
  static const char* const method = "var";
  Model* m = check_self(L, method);
  double lo = 0, hi = DEF_INFINITE;
  bool is_int = false;
  const char* name = nullptr;
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_istable(L, 2)) fail_arg(L, method, "argument 1 (options)", "a table {lo=, hi=, int=, name=} or nil", 2);
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) {
      const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : nullptr;
      if (key != nullptr && std::strcmp(key, "lo") == 0) {
        lo = check_bound(L, method, "field 'lo' of argument 1", -1, +1);
      } else if (key != nullptr && std::strcmp(key, "hi") == 0) {
        hi = check_bound(L, method, "field 'hi' of argument 1", -1, -1);
      } else if (key != nullptr && std::strcmp(key, "int") == 0) {
        if (lua_type(L, -1) != LUA_TBOOLEAN) fail_arg(L, method, "field 'int' of argument 1", "true or false", -1);
        is_int = lua_toboolean(L, -1) != 0;
      } else if (key != nullptr && std::strcmp(key, "name") == 0) {
        if (lua_type(L, -1) != LUA_TSTRING) fail_arg(L, method, "field 'name' of argument 1", "a string", -1);
        name = lua_tostring(L, -1);  // the table keeps it alive
      } else {
        char got[96];
        describe(L, -2, got, sizeof got);
        return luaL_error(
            L, "lpsolve model:var: argument 1 (options) has an unknown field %s (known: lo, hi, int, name)", got);
      }
      lua_pop(L, 1);
    }
  }
  if (lo > hi) {
    return luaL_error(L, "lpsolve model:var: argument 1 (options) must have lo <= hi, got lo = %f, hi = %f", lo, hi);
  }
  leave_row_mode(m);
  if (!add_columnex(m->lp, 0, nullptr, nullptr))
    return luaL_error(L, "lpsolve model:var: lp_solve could not add a column");
  const int col = get_Ncolumns(m->lp);
  if (lo != 0 || hi < DEF_INFINITE) set_bounds(m->lp, col, lo, hi);
  if (is_int) set_int(m->lp, col, TRUE);
  if (name != nullptr) set_col_name(m->lp, col, const_cast<char*>(name));
  lua_pushinteger(L, col);
  return 1;
}

int l_constraint(lua_State* L) {
  static const char* const method = "constraint";
  Model* m = check_self(L, method);
  const int k = read_row(L, m, method, 2);
  const char* op = lua_type(L, 4) == LUA_TSTRING ? lua_tostring(L, 4) : "";
  int type;
  if (std::strcmp(op, "<=") == 0)
    type = LE;
  else if (std::strcmp(op, ">=") == 0)
    type = GE;
  else if (std::strcmp(op, "==") == 0 || std::strcmp(op, "=") == 0)
    type = EQ;
  else
    return fail_arg(L, method, "argument 3 (op)", "'<=', '>=' or '=='", 4);
  const double rhs = check_bound(L, method, "argument 4 (rhs)", 5, 0);
  if (type == EQ && std::fabs(rhs) >= DEF_INFINITE) fail_arg(L, method, "argument 4 (rhs)", "finite for '=='", 5);
  const char* name = nullptr;
  if (!lua_isnoneornil(L, 6)) {
    if (lua_type(L, 6) != LUA_TSTRING) fail_arg(L, method, "argument 5 (name)", "a string or nil", 6);
    name = lua_tostring(L, 6);
  }
  // Refused (harmlessly) after the first solve; rows then go in column mode.
  if (!is_add_rowmode(m->lp)) set_add_rowmode(m->lp, TRUE);
  if (!add_constraintex(m->lp, k, m->val, m->idx, type, rhs)) {
    return luaL_error(L, "lpsolve model:constraint: lp_solve could not add the constraint");
  }
  const int row = get_Nrows(m->lp);
  if (name != nullptr) set_row_name(m->lp, row, const_cast<char*>(name));
  lua_pushinteger(L, row);
  return 1;
}

int l_objective(lua_State* L) {
  static const char* const method = "objective";
  Model* m = check_self(L, method);
  const int k = read_row(L, m, method, 2);
  bool maximise = false;
  if (!lua_isnoneornil(L, 4)) {
    const char* sense = lua_type(L, 4) == LUA_TSTRING ? lua_tostring(L, 4) : "";
    if (std::strcmp(sense, "max") == 0)
      maximise = true;
    else if (std::strcmp(sense, "min") != 0)
      fail_arg(L, method, "argument 3 (sense)", "'min', 'max' or nil", 4);
  }
  leave_row_mode(m);
  if (maximise)
    set_maxim(m->lp);
  else
    set_minim(m->lp);
  if (!set_obj_fnex(m->lp, k, m->val, m->idx)) {
    return luaL_error(L, "lpsolve model:objective: lp_solve could not set the objective");
  }
  return 0;
}

// An extra for warm re-solves: changing a_i in place and solving again reuses the last
// basis (about 40 us instead of 300 us for the 64-worker min-max LP).
int l_set_coef(lua_State* L) {
  static const char* const method = "set_coef";
  Model* m = check_self(L, method);
  const int row = check_index(L, method, "argument 1 (row)", 2, get_Nrows(m->lp), "constraint");
  const int col = check_index(L, method, "argument 2 (col)", 3, get_Ncolumns(m->lp), "column");
  if (lua_type(L, 4) != LUA_TNUMBER || !std::isfinite(lua_tonumber(L, 4))) {
    fail_arg(L, method, "argument 3 (value)", "a finite number", 4);
  }
  leave_row_mode(m);
  if (!set_mat(m->lp, row, col, lua_tonumber(L, 4))) return luaL_error(L, "lpsolve model:set_coef: lp_solve refused");
  return 0;
}

// lp_solve refuses a model without columns (NOTRUN); its only point is the empty one,
// feasible when every (empty) row holds at 0.
int solve_empty(lprec* lp) {
  const double tolerance = 1e-11;
  for (int row = 1; row <= get_Nrows(lp); ++row) {
    const double rhs = get_rh(lp, row);
    const int type = get_constr_type(lp, row);
    const bool holds = type == LE ? 0 <= rhs + tolerance : type == GE ? 0 >= rhs - tolerance : std::fabs(rhs) <= tolerance;
    if (!holds) return INFEASIBLE;
  }
  return OPTIMAL;
}

struct Outcome {
  const char* status;
  bool ok;
  const char* text;
};

Outcome classify(const Model* m, int code) {
  switch (code) {
    case OPTIMAL: return {"optimal", true, "optimal solution found"};
    case SUBOPTIMAL:
      if (m->timed_out)
        return {"suboptimal", true, "time limit reached; the best solution found so far, not proven optimal"};
      return {"suboptimal", true, "a solution was found but not proven optimal (branch and bound stopped early)"};
    case INFEASIBLE:
    case NOFEASFOUND:
      return {"infeasible", false,
              "the model is infeasible: no point satisfies all constraints, bounds and integrality"};
    case UNBOUNDED: return {"unbounded", false, "the model is unbounded: the objective can improve without limit"};
    case DEGENERATE: return {"degenerate", false, "lp_solve stopped on a degenerate problem"};
    case NUMFAILURE:
    case ACCURACYERROR:
      return {"numfailure", false, "lp_solve failed numerically (badly scaled or near-singular model?)"};
    case TIMEOUT: return {"timeout", false, "time limit reached before any solution was found"};
    case USERABORT:
      if (m->timed_out) return {"timeout", false, "time limit reached before any solution was found"};
      return {"error", false, "lp_solve was aborted"};
    case FEASFOUND:
    case PROCBREAK:
      if (get_solutioncount(m->lp) > 0) return {"suboptimal", true, "lp_solve stopped early with a feasible solution"};
      return {"error", false, "lp_solve stopped early without a solution"};
    case NOMEMORY: return {"error", false, "lp_solve ran out of memory"};
    default: return {"error", false, "lp_solve failed"};
  }
}

int l_solve(lua_State* L) {
  static const char* const method = "solve";
  Model* m = check_self(L, method);
  double limit = kDefaultTimeLimitS;
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_istable(L, 2)) fail_arg(L, method, "argument 1 (options)", "a table {time_limit_s=} or nil", 2);
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) {
      const char* key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : nullptr;
      if (key != nullptr && std::strcmp(key, "time_limit_s") == 0) {
        const double v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : NAN;
        if (!(v > 0))
          fail_arg(L, method, "field 'time_limit_s' of argument 1", "a number of seconds > 0 (math.huge: none)", -1);
        limit = v;
      } else {
        char got[96];
        describe(L, -2, got, sizeof got);
        return luaL_error(L, "lpsolve model:solve: argument 1 (options) has an unknown field %s (known: time_limit_s)",
                          got);
      }
      lua_pop(L, 1);
    }
  }
  // Not left to solve(): lp_solve_solve counts the solve before it tries to leave row
  // mode, which set_add_rowmode then refuses, and the simplex runs on the row-ordered
  // matrix and corrupts the heap.
  leave_row_mode(m);
  const double start = tandem::now_ms();
  // Inside a budgeted call (a policy's, a console command's), its budget bounds the
  // solve too (abort_when_due). Trivially destructible: nothing is left to a
  // destructor if a Lua error is raised below.
  tandem::ThreadCpuDeadline cpu_limit(std::isinf(limit) ? HUGE_VAL : 1e3 * limit);
  m->limit = &cpu_limit;
  m->timed_out = 0;
  const int columns = get_Ncolumns(m->lp);
  const int code = columns > 0 ? ::solve(m->lp) : solve_empty(m->lp);
  const double ms = tandem::now_ms() - start;
  const double cpu_ms = cpu_limit.used_ms();
  m->limit = nullptr;
  m->stale = m->timed_out || !(code == OPTIMAL || code == SUBOPTIMAL || code == INFEASIBLE || code == UNBOUNDED);
  Outcome outcome = classify(m, code);
  // lp_solve settles a column that is in no constraint at its bound outside the simplex,
  // and calls the result OPTIMAL even when that bound is infinite.
  const double objective = columns > 0 ? get_objective(m->lp) : 0.0;
  if (outcome.ok && std::fabs(objective) >= DEF_INFINITE) {
    outcome = {"unbounded", false,
               "the model is unbounded: a variable in no constraint improves the objective without limit"};
  }

  lua_createtable(L, 0, 11);
  lua_pushstring(L, outcome.status);
  lua_setfield(L, -2, "status");
  lua_pushboolean(L, outcome.ok);
  lua_setfield(L, -2, "ok");
  if (m->timed_out && cpu_ms >= 1e3 * limit) {
    lua_pushfstring(L, "%s (time limit %f s of CPU; lp_solve: %s)", outcome.text, limit, get_statustext(m->lp, code));
  } else if (m->timed_out) {
    lua_pushfstring(L, "%s (stopped at the time budget of the calling policy or command, under its time limit %f s "
                       "of CPU; lp_solve: %s)", outcome.text, limit, get_statustext(m->lp, code));
  } else {
    lua_pushfstring(L, "%s (lp_solve: %s)", outcome.text, get_statustext(m->lp, code));
  }
  lua_setfield(L, -2, "message");
  lua_pushinteger(L, code);
  lua_setfield(L, -2, "code");
  lua_pushnumber(L, static_cast<lua_Number>(get_total_iter(m->lp)));
  lua_setfield(L, -2, "iterations");
  lua_pushnumber(L, static_cast<lua_Number>(get_total_nodes(m->lp)));
  lua_setfield(L, -2, "nodes");
  lua_pushnumber(L, ms);
  lua_setfield(L, -2, "ms");
  lua_pushnumber(L, cpu_ms);
  lua_setfield(L, -2, "cpu_ms");
  if (outcome.ok) {
    REAL* values = nullptr;
    if (columns > 0 && (!get_ptr_variables(m->lp, &values) || values == nullptr)) {
      return luaL_error(L, "lpsolve model:solve: lp_solve reported '%s' but gave no values", outcome.status);
    }
    lua_pushnumber(L, objective);
    lua_setfield(L, -2, "objective");
    lua_createtable(L, columns, 0);
    for (int j = 0; j < columns; ++j) {
      lua_pushnumber(L, values[j]);
      lua_rawseti(L, -2, j + 1);
    }
    lua_setfield(L, -2, "values");
  }
  if (m->stale) renew(L, m);
  return 1;
}

int l_var_count(lua_State* L) {
  Model* m = check_self(L, "var_count");
  lua_pushinteger(L, get_Ncolumns(m->lp));
  return 1;
}

int l_constraint_count(lua_State* L) {
  Model* m = check_self(L, "constraint_count");
  lua_pushinteger(L, get_Nrows(m->lp));
  return 1;
}

int l_set_bounds(lua_State* L) {
  static const char* const method = "set_bounds";
  Model* m = check_self(L, method);
  const int col = check_index(L, method, "argument 1 (col)", 2, get_Ncolumns(m->lp), "column");
  const double lo = check_bound(L, method, "argument 2 (lo)", 3, +1);
  const double hi = check_bound(L, method, "argument 3 (hi)", 4, -1);
  if (lo > hi) return luaL_error(L, "lpsolve model:set_bounds: must have lo <= hi, got lo = %f, hi = %f", lo, hi);
  if (!set_bounds(m->lp, col, lo, hi)) return luaL_error(L, "lpsolve model:set_bounds: lp_solve refused the bounds");
  return 0;
}

int l_set_int(lua_State* L) {
  static const char* const method = "set_int";
  Model* m = check_self(L, method);
  const int col = check_index(L, method, "argument 1 (col)", 2, get_Ncolumns(m->lp), "column");
  if (lua_type(L, 3) != LUA_TBOOLEAN) fail_arg(L, method, "argument 2 (int)", "true or false", 3);
  if (!set_int(m->lp, col, lua_toboolean(L, 3) ? TRUE : FALSE)) {
    return luaL_error(L, "lpsolve model:set_int: lp_solve refused");
  }
  return 0;
}

int l_set_rhs(lua_State* L) {
  static const char* const method = "set_rhs";
  Model* m = check_self(L, method);
  const int row = check_index(L, method, "argument 1 (row)", 2, get_Nrows(m->lp), "constraint");
  const double value = check_bound(L, method, "argument 2 (value)", 3, 0);
  if (std::fabs(value) >= DEF_INFINITE && get_constr_type(m->lp, row) == EQ) {
    fail_arg(L, method, "argument 2 (value)", "finite for an '==' constraint", 3);
  }
  if (!set_rh(m->lp, row, value)) return luaL_error(L, "lpsolve model:set_rhs: lp_solve refused");
  return 0;
}

int __WINAPI append_text(void* handle, char* text) {
  Model* m = static_cast<Model*>(handle);
  const size_t n = std::strlen(text);
  if (m->text_failed) return FALSE;
  if (m->text_size + n > m->text_cap) {
    size_t cap = m->text_cap < 1024 ? 1024 : m->text_cap;
    while (cap < m->text_size + n) cap *= 2;
    char* data = static_cast<char*>(std::realloc(m->text, cap));
    if (data == nullptr) {
      m->text_failed = true;
      return FALSE;
    }
    m->text = data;
    m->text_cap = cap;
  }
  std::memcpy(m->text + m->text_size, text, n);
  m->text_size += n;
  return TRUE;
}

int l_write_lp(lua_State* L) {
  Model* m = check_self(L, "write_lp");
  leave_row_mode(m);
  m->text_size = 0;
  m->text_failed = false;
  if (!write_lpex(m->lp, m, append_text) || m->text_failed) {
    return luaL_error(L, "lpsolve model:write_lp: lp_solve could not write the model");
  }
  lua_pushlstring(L, m->text != nullptr ? m->text : "", m->text_size);
  std::free(m->text);  // debugging output: not worth keeping between calls
  m->text = nullptr;
  m->text_size = m->text_cap = 0;
  return 1;
}

void release(Model* m) {
  if (m->lp != nullptr) delete_lprec(m->lp);
  std::free(m->idx);
  std::free(m->val);
  std::free(m->slot);
  std::free(m->text);
  m->lp = nullptr;
  m->text = nullptr;
  m->text_size = m->text_cap = 0;
  m->idx = nullptr;
  m->val = nullptr;
  m->slot = nullptr;
  m->cap = m->slot_cap = 0;
}

// model:free() and __gc: idempotent.
int l_free(lua_State* L) {
  Model* m = static_cast<Model*>(lua_touserdata(L, 1));
  if (m == nullptr || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, lua_upvalueindex(1))) {
    char got[96];
    describe(L, 1, got, sizeof got);
    return luaL_error(L, "lpsolve model:free: call it on a model with ':' (m:free()), got %s as self", got);
  }
  release(m);
  return 0;
}

int l_tostring(lua_State* L) {
  Model* m = static_cast<Model*>(lua_touserdata(L, 1));
  if (m == nullptr || m->lp == nullptr) {
    lua_pushliteral(L, "lpsolve model (freed)");
  } else {
    lua_pushfstring(L, "lpsolve model (%d vars, %d constraints)", get_Ncolumns(m->lp), get_Nrows(m->lp));
  }
  return 1;
}

int luaopen_lpsolve(lua_State* L) {
  static const luaL_Reg methods[] = {
      {"var", l_var},
      {"constraint", l_constraint},
      {"objective", l_objective},
      {"solve", l_solve},
      {"var_count", l_var_count},
      {"constraint_count", l_constraint_count},
      {"set_bounds", l_set_bounds},
      {"set_int", l_set_int},
      {"set_rhs", l_set_rhs},
      {"set_coef", l_set_coef},
      {"write_lp", l_write_lp},
      {"free", l_free},
      {nullptr, nullptr},
  };
  lua_newtable(L);  // the module
  const int module = lua_gettop(L);
  lua_newtable(L);  // the models' metatable; every method closes over it
  const int mt = lua_gettop(L);
  lua_newtable(L);
  for (const luaL_Reg* r = methods; r->name != nullptr; ++r) {
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, r->func, 1);
    lua_setfield(L, -2, r->name);
  }
  lua_setfield(L, mt, "__index");
  lua_pushvalue(L, mt);
  lua_pushcclosure(L, l_free, 1);
  lua_setfield(L, mt, "__gc");
  lua_pushcfunction(L, l_tostring);
  lua_setfield(L, mt, "__tostring");
  lua_pushliteral(L, "lpsolve model");
  lua_setfield(L, mt, "__metatable");  // getmetatable(m) from Lua cannot reach the methods

  lua_pushvalue(L, mt);
  lua_pushcclosure(L, l_model_new, 1);
  lua_setfield(L, module, "model");
  lua_pushnumber(L, DEF_INFINITE);
  lua_setfield(L, module, "inf");
  int major = 0, minor = 0, release_no = 0, build = 0;
  lp_solve_version(&major, &minor, &release_no, &build);
  lua_pushfstring(L, "%d.%d.%d.%d", major, minor, release_no, build);
  lua_setfield(L, module, "version");
  lua_settop(L, module);
  return 1;
}

}  // namespace

void open_lpsolve(lua_State* L) {
  lua_getglobal(L, "package");
  if (!lua_istable(L, -1)) {  // a state without the package library cannot require anyway
    lua_pop(L, 1);
    return;
  }
  lua_getfield(L, -1, "preload");
  if (lua_istable(L, -1)) {
    lua_pushcfunction(L, luaopen_lpsolve);
    lua_setfield(L, -2, "lpsolve");
  }
  lua_pop(L, 2);
}

}  // namespace tandem
