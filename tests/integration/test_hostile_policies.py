#!/usr/bin/env python3
"""Hostile policies and console commands (DESIGN.md habit 7: policy code is untrusted
code). Every way out of the policy's sandbox that the issue lists is tried, in step()
and in init(), and each run must show:

  - the run's outcome: exit 0 with the summary written, or, for an init() that fails
    in the launcher, the documented refusal (non-zero, "policy ... failed to start
    (KIND)", within a generous bound, no rank started);
  - the failure logged by rank 0 with its kind and cause ("policy P at iteration T
    (KIND, n in a row): ..."), one per escape;
  - no command executed and no file touched: every escape aims at a marker file in
    the case's own folder, which must stay empty but for a canary that must survive;
  - nothing left running: no process of the run (its ranks, mpirun, its policy worker
    processes) once the command has returned, and the job's CPU time (the children's
    rusage around the command) bounded by a benign reference run's;
  - rank 0's peak RSS (summary.json's rank0_peak_rss_mb) within the reference's + 200 MB.

Runs, grouped to keep the suite short (each job starts mpirun):
  reference     a benign policy, the yardstick for CPU time and rank 0's RSS;
  step_escapes  one escape per decision (keyed on the decision's number, from the
                stats history: training goes on past a late call, so not every
                iteration is decided), max_failures high so the policy is
                never dropped: commands, files, native code, binary chunks, debug,
                the GC, finalizers, crashes, budget bypasses, memory; init() tries
                the command escapes under pcall and step() reports what it saw. A
                memory failure must be one failure: the policy's next calls work
                (after_memory_*, and every decision after the escapes);
  init_*        an init() that escapes unprotected: refused in the launcher;
  budget_huge   policy.budget_ms = 1e308 with a looping policy: refused by validation
                (naming policy.budget_ms) or bounded;
  console       a long job: a hot swap to a file that loops at load (through swap()
                and through policy.watch: the new file is blamed, the old policy
                keeps deciding), then hostile console commands (os.exit, an endless
                loop, a 1 GB string, io, ffi, a table past the cap and a command
                after it, a 140 MB line), each answered with its error while the run
                goes on, then stop().

usage: test_hostile_policies.py TANDEM_BINARY SCRATCH_DIR
"""
import atexit
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time

from console_client import socket_command

TANDEM, SCRATCH = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
WORKER = os.path.join(os.path.dirname(TANDEM), "tandem-policy-worker")
RSS_ROOM_MB = 200
# Generous for a loaded 2-core machine: mpirun's start alone took over a minute there.
RUN_TIMEOUT_S = 420
REFUSE_WITHIN_S = 120
START_S = 240
failures = []
started = []  # process groups of jobs in flight: whatever ends this script ends them


@atexit.register
def end_started():
    for pgid in started:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def problem(case, msg):
    failures.append(case)
    print(f"FAIL {case}: {msg}")


# ---- running a case -------------------------------------------------------------

def case_dir(case):
    d = os.path.join(SCRATCH, case)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "markers"))
    os.makedirs(os.path.join(d, "bin"))
    # The canary: an escape that removes or truncates files would take it.
    with open(os.path.join(d, "markers", "canary"), "w") as f:
        f.write("canary\n")
    # The policy worker under a name of this case's own (TANDEM_POLICY_WORKER), so
    # that a worker left behind is told from other jobs' on a shared machine.
    os.symlink(WORKER, os.path.join(d, "bin", "tandem-policy-worker"))
    return d


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def experiment(d, policy_file, iterations, extra=""):
    return write(os.path.join(d, "experiment.lua"), f"""local e = dofile('scripts/experiments/quickstart.lua')
e.workers = 2
e.device = 'cpu'
e.model_args = {{ hidden = {{ 32 }} }}
e.stop = {{ epochs = 1000, max_iterations = {iterations} }}
e.eval_every = 100000
e.console = false
e.log_level = 'info'
-- init_budget_ms: these policies load and init in a few ms of CPU (goodput's take
-- under 5); the default, budget_ms + 2000, had each runaway load or init burn 2 to
-- 4.5 s of CPU before it was stopped.
e.policy = {{ file = '{policy_file}', budget_ms = 200, init_budget_ms = 300, memory_mb = 16, max_failures = 1000,
             watch = false, history = 1000 }}
-- 30 ms an iteration: a call killed at its deadline (2 x 200 + 100 ms of CPU) leaves
-- a dozen or so iterations undecided, not hundreds.
e.emulation = {{ comm_delay_ms = {{ 30, 30 }} }}
{extra}
return e
""")


def env_for(d):
    env = dict(os.environ)
    env["TANDEM_POLICY_WORKER"] = os.path.join(d, "bin", "tandem-policy-worker")
    return env


def cpu_s(before, after):
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def processes_of(d):
    """Processes whose command line names the case's folder (its ranks, mpirun, its
    policy workers started through the case's own worker name)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if d in cmd:
            # state, ppid, utime + stime (clock ticks)
            found.append((int(pid), stat[0], int(stat[1]), int(stat[11]) + int(stat[12]), cmd[:200]))
    return found


def check_nothing_left(case, d):
    # mpirun's teardown may lag its exit by a moment.
    end = time.time() + 10
    left = processes_of(d)
    while left and time.time() < end:
        time.sleep(0.2)
        left = [p for p in processes_of(d) if p[1] != "Z"]
    if left:
        time.sleep(1.0)
        again = {p[0]: p for p in processes_of(d)}
        spinning = [f"{p[0]} (ppid {p[2]}, state {p[1]}, +{(again[p[0]][3] - p[3])} ticks in 1 s): {p[4]}"
                    for p in left if p[0] in again]
        problem(case, "processes of the run are left behind:\n  " + "\n  ".join(spinning or map(str, left)))
        for p in left:
            try:
                os.kill(p[0], signal.SIGKILL)
            except OSError:
                pass
        return False
    return True


def check_markers(case, d):
    markers = sorted(os.listdir(os.path.join(d, "markers")))
    if markers != ["canary"]:
        problem(case, f"the markers folder holds {markers}, not just the canary: a command ran or a file was touched")
        return False
    return True


class Job:
    """tandem run, in a process group of its own (a time-out ends all of it)."""

    def __init__(self, case, d, args):
        self.case, self.d = case, d
        self.before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.start = time.monotonic()
        self.p = subprocess.Popen([TANDEM, "run"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=env_for(d), start_new_session=True)
        started.append(self.p.pid)

    def finish(self, timeout):
        try:
            out, _ = self.p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            out, _ = self.p.communicate()
            self.timed_out = True
        else:
            self.timed_out = False
        started.remove(self.p.pid)
        self.wall = time.monotonic() - self.start
        self.cpu = cpu_s(self.before, resource.getrusage(resource.RUSAGE_CHILDREN))
        self.rc = self.p.returncode
        self.out = out.decode(errors="replace")
        return self


def run(case, d, args, timeout=RUN_TIMEOUT_S):
    return Job(case, d, args).finish(timeout)


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


STAMP = re.compile(r"^(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\d{3} \[r(\d+)\] ")


def log_entries(text):
    """Rank 0's log entries (a message with its continuation lines)."""
    entries, cur = [], None
    for line in text.splitlines():
        m = STAMP.match(line)
        if m:
            cur = [line] if m.group(1) == "0" else None
            if cur is not None:
                entries.append(cur)
        elif cur is not None:
            cur.append(line)
    return ["\n".join(e) for e in entries]


FAILURE = re.compile(r"policy (\S+) at iteration (\d+) \((\w+), (\d+) in a row\): ")


def policy_failures(text):
    """{iteration: (kind, message)} of the policy's failures in rank 0's log."""
    out = {}
    for e in log_entries(text):
        m = FAILURE.search(e)
        if m:
            out[int(m.group(2))] = (m.group(3), e[m.end():])
    return out


def policy_events(run_dir):
    """{iteration the policy decided on: event} from the trace."""
    events = {}
    with open(os.path.join(run_dir, "trace.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            p = row.get("policy")
            if row.get("event") == "iteration" and p:
                events[p.get("from_iteration", row["iteration"] - 1)] = p.get("event")
    return events


REF = {}


def check_bounds(case, job, run_dir=None):
    """Nothing left, CPU time and rank 0's RSS against the reference."""
    check_nothing_left(case, job.d)
    check_markers(case, job.d)
    if REF:
        # Scaled by the job's length (the reference's CPU seconds per second): a thread
        # left spinning through the run shows as more. Loose, for a loaded machine.
        allowed = 3 * max(REF["cpu"], REF["cpu"] / REF["wall"] * job.wall) + 20
        if job.cpu > allowed:
            problem(case, f"the job used {job.cpu:.1f} s of CPU in {job.wall:.1f} s (reference {REF['cpu']:.1f} s in "
                          f"{REF['wall']:.1f} s; allowed {allowed:.1f} s)")
    if run_dir and REF:
        rss = summary(run_dir).get("rank0_peak_rss_mb")
        if rss is None or rss > REF["rss"] + RSS_ROOM_MB:
            problem(case, f"rank 0's peak RSS {rss} MB, the reference's {REF['rss']:.0f} MB + {RSS_ROOM_MB} MB allowed")


def expect_ok(case, job, run_dir):
    if job.timed_out:
        problem(case, f"did not end within its time limit (a hang):\n{job.out[-3000:]}")
        return False
    if job.rc != 0 or not os.path.exists(os.path.join(run_dir, "summary.json")):
        problem(case, f"exited {job.rc} (summary written: {os.path.exists(os.path.join(run_dir, 'summary.json'))}):"
                      f"\n{job.out[-3000:]}")
        return False
    if "rank 0 peak RSS" not in job.out:
        problem(case, "the final log line gives no rank 0 peak RSS")
    return True


# ---- the policies ---------------------------------------------------------------

# Crafted LuaJIT bytecode (the issue's): LuaJIT's VM trusts bytecode, so a binary
# chunk must be refused before it runs.
BYTECODE = r'"\27LJ\2\10\22\0\0\1\0\1\0\2\39\0\255\127\76\0\2\0\11abcdef\0"'
LOOP = "function() while true do end end"
# The cap stopped the policy's own call (not the host's building of its arguments).
MEMORY = ("calling step(stats)", "not enough memory")
# A call after a memory failure, and every call after the escapes: it makes some
# garbage (half a MB), as any policy does, which must be collected.
AFTER = "local t = {}; for i = 1, 20000 do t[i] = i end; return nil"

# (name, Lua body, accepted kinds, key phrase): one per iteration, in order. M is the
# case's markers folder; a body's return value is step()'s answer. The kinds are what
# ends the call: error (a Lua error), timeout (the budget's hook), memory (the cap),
# crash (the worker died), hung (killed past its deadline); keep: nothing happens.
STEP_ESCAPES = [
    # 1. commands, files, native code, binary chunks, the debug library, the GC
    ("os_execute", "os.execute('touch ' .. M .. '/os_execute')", {"error"},
     "attempt to call field 'execute' (a nil value)"),
    ("os_exit", "os.exit(7)", {"error"}, "attempt to call field 'exit' (a nil value)"),
    ("os_remove", "os.remove(M .. '/canary')", {"error"}, "attempt to call field 'remove' (a nil value)"),
    ("ffi_system", "require('ffi').C.system('touch ' .. M .. '/ffi_system')", {"error"},
     "module 'ffi' is not available"),
    ("ffi_malloc", "local ffi = require('ffi'); ffi.cdef('void *malloc(size_t);'); ffi.C.malloc(2^40)", {"error"},
     "module 'ffi' is not available"),
    ("io_popen", "io.popen('touch ' .. M .. '/io_popen')", {"error"}, "attempt to index global 'io' (a nil value)"),
    ("io_open_passwd", "return { reason = io.open('/etc/passwd'):read('*a') }", {"error"},
     "attempt to index global 'io' (a nil value)"),
    ("io_open_write", "io.open(M .. '/io_open_write', 'w'):write('x')", {"error"},
     "attempt to index global 'io' (a nil value)"),
    ("package_loadlib", "package.loadlib('libc.so.6', 'system')('touch ' .. M .. '/package_loadlib')", {"error"},
     "attempt to index global 'package' (a nil value)"),
    ("loadlib_jit", "package.loadlib('libluajit-5.1.so.2', 'luaopen_jit')()", {"error"},
     "attempt to index global 'package' (a nil value)"),
    ("require_jit", "require('jit').on()", {"error"}, "module 'jit' is not available"),
    ("require_whitelist", "require('tandem.whitelist')", {"error"}, "module 'tandem.whitelist' is not available"),
    ("require_path", "require('tandem/../../../etc/passwd')", {"error"}, "is not available"),
    ("load_binary", f"assert(load({BYTECODE}))()", {"error"}, "attempt to load chunk with wrong mode"),
    ("loadstring_binary", f"assert(loadstring({BYTECODE}))()", {"error"}, "attempt to load chunk with wrong mode"),
    ("load_reader_binary", f"local sent; assert(load(function() if sent then return nil end sent = true; "
                           f"return {BYTECODE} end))()", {"error"}, "attempt to load chunk with wrong mode"),
    ("load_env", "assert(load('return 1', 'x', 't', {}))()", {"error"}, "load with an environment is not available"),
    ("string_dump", "assert(loadstring(string.dump(function() end)))()", {"error"},
     "attempt to call field 'dump' (a nil value)"),
    ("string_meta_dump", "assert(loadstring((''):dump()))()", {"error"}, "attempt to call method 'dump' (a nil value)"),
    ("debug_getregistry", "debug.getregistry()", {"error"}, "attempt to call field 'getregistry' (a nil value)"),
    ("debug_setupvalue", "debug.setupvalue(P.step, 1, nil)", {"error"},
     "attempt to call field 'setupvalue' (a nil value)"),
    ("debug_sethook", "debug.sethook(); while true do end", {"error"}, "attempt to call field 'sethook' (a nil value)"),
    ("collect", "collectgarbage('collect')", {"error"}, 'collectgarbage("collect") is not available'),
    ("collect_stop", "collectgarbage('stop')", {"error"}, 'collectgarbage("stop") is not available'),
    ("setfenv", "setfenv(1, {})", {"error"}, "attempt to call global 'setfenv' (a nil value)"),
    ("getfenv", "getfenv(0).io.open(M .. '/getfenv', 'w')", {"error"},
     "attempt to call global 'getfenv' (a nil value)"),
    ("jit_util", "jit.util.funcinfo(P.step)", {"error"}, "attempt to index global 'jit' (a nil value)"),
    ("gcinfo", "gcinfo()", {"error"}, "attempt to call global 'gcinfo' (a nil value)"),
    ("newproxy_gc", f"getmetatable(newproxy(true)).__gc = {LOOP}", {"error"},
     "attempt to call global 'newproxy' (a nil value)"),
    # 2. crashes: finalizers that raise, recursion through C, crafted bytecode (above)
    ("table_gc_raises", "setmetatable({}, {__gc = function() error('from a finalizer') end}); churn()", {"keep"}, None),
    ("lpsolve_gc", f"local m = require('lpsolve').model(); getmetatable(m).__gc = {LOOP}", {"error"},
     "attempt to index a"),
    ("lua_recursion", "local function f() return 1 + f() end; f()", {"error"}, "stack overflow"),
    ("gsub_recursion", "local function f(s) return (s:gsub('.', f)) end; f('x')", {"crash"}, "signal 11"),
    # 3. budget bypasses
    # (a handler the hook does not reach: killed past the deadline)
    ("xpcall_loops", f"xpcall({LOOP}, {LOOP})", {"timeout", "hung"}, ""),
    ("pcall_swallows", f"while true do pcall({LOOP}) end", {"timeout"}, "ran past its time budget"),
    ("coroutine_loop", f"coroutine.wrap({LOOP})()", {"timeout"}, "ran past its time budget"),
    ("c_backtracking", "string.rep('a', 40):find(string.rep('a*', 40) .. 'b')", {"hung"},
     "did not finish step(stats) within"),
    ("tostring_loops", f"error(setmetatable({{}}, {{__tostring = {LOOP}}}))", {"timeout"}, "error in error handling"),
    # (the host reads the answer's fields raw, or under the budget)
    ("plan_index_loops", f"return setmetatable({{ local_batch = {{ 32, 32 }} }}, {{__index = {LOOP}}})",
     {"keep", "timeout"}, ""),
    # 4. a finalizer that loops (not honoured on tables), memory without bound
    ("table_gc_loops", f"setmetatable({{}}, {{__gc = {LOOP}}}); churn()", {"keep"}, None),
    # Each memory failure is one failure: the call after it works again. Last, since
    # a state left full of garbage fails every call after it (see after_memory_table).
    ("memory_rep", "local s = string.rep('x', 2^30)", {"memory"}, MEMORY),
    ("after_memory_rep", AFTER, {"keep"}, None),
    ("memory_concat", "local s = 'x'; while true do s = s .. s end", {"memory"}, MEMORY),
    ("after_memory_concat", AFTER, {"keep"}, None),
    ("memory_table", "local t = {}; while true do t[#t + 1] = string.rep('x', 65536) .. #t end", {"memory"}, MEMORY),
    ("after_memory_table", AFTER, {"keep"}, None),
]
# The command escapes again in init(), under pcall: init() must go through (the run
# starts) with every one refused, in the launcher and in rank 0's worker alike.
# Iterations of the escape run (and of the reference): the escapes, then calls that
# must all succeed.
# Room for the escapes, the calm decisions after them, and the iterations no one
# decides while a call is late or killed (a dozen per such escape).
ITERATIONS = len(STEP_ESCAPES) + 14 + 90
COMMANDS = [e[0] for e in STEP_ESCAPES].index("newproxy_gc") + 1  # the escapes of group 1
INIT_ESCAPES = [(n, b) for n, b, _, _ in STEP_ESCAPES[:COMMANDS]]


def lua_list(escapes, prefix):
    rows = []
    for name, body in escapes:
        body = body.replace("M .. '/", f"M .. '/{prefix}")
        rows.append(f"  {{ '{name}', function() {body} end }},")
    return "\n".join(rows)


def escape_policy(markers):
    return f"""-- Tries one way out of the sandbox per iteration (tests/integration/test_hostile_policies.py).
local M = '{markers}'
local P = {{}}
local function churn() for i = 1, 50000 do local t = {{ i }} end end
local INIT = {{
{lua_list(INIT_ESCAPES, 'init_')}
}}
local STEP = {{
{lua_list([(n, b) for n, b, _, _ in STEP_ESCAPES], '')}
}}
local report = {{}}
function P.init(cluster)
  report = {{}}
  for _, e in ipairs(INIT) do
    local ok = pcall(e[2])
    report[#report + 1] = e[1] .. '=' .. (ok and 'ESCAPED' or 'refused')
  end
end
function P.step(stats)
  -- The decision's number (0 first): the stats history holds every decided
  -- iteration (a fresh worker gets it replayed), while iterations training ran on
  -- while a call was late or being killed are never decided.
  local n = #stats.history - 1
  if n == 0 then error('INIT-REPORT ' .. table.concat(report, ' ') .. ' END', 0) end
  local e = STEP[n]
  if e then return e[2]() end
  {AFTER}
end
return P
"""


BENIGN = """-- Keeps the plan (tests/integration/test_hostile_policies.py).
local P = {}
function P.init(cluster) end
function P.step(stats) return nil end
return P
"""


# ---- the reference --------------------------------------------------------------

def reference():
    case = "reference"
    d = case_dir(case)
    pol = write(os.path.join(d, "benign.lua"), BENIGN)
    run_dir = os.path.join(d, "run")
    job = run(case, d, [experiment(d, pol, ITERATIONS), "--out", run_dir])
    if not expect_ok(case, job, run_dir):
        fail("the benign reference run failed: nothing to compare with")
    s = summary(run_dir)
    REF.update(cpu=job.cpu, wall=job.wall, rss=s["rank0_peak_rss_mb"])
    check_bounds(case, job, run_dir)
    print(f"ok reference: {job.wall:.1f} s, {job.cpu:.1f} s of CPU, rank 0 peak RSS {REF['rss']:.0f} MB")


# ---- escapes in step() (and init() under pcall) -----------------------------------

def step_escapes():
    case = "step_escapes"
    d = case_dir(case)
    pol = write(os.path.join(d, "hostile_step.lua"), escape_policy(os.path.join(d, "markers")))
    run_dir = os.path.join(d, "run")
    job = run(case, d, [experiment(d, pol, ITERATIONS), "--out", run_dir])
    if not expect_ok(case, job, run_dir):
        check_nothing_left(case, d)
        check_markers(case, d)
        return
    log = job.out
    got = policy_failures(log)
    events = policy_events(run_dir)
    # init()'s escapes, reported by the first step.
    kind, msg = got.get(0, (None, ""))
    m = re.search(r"INIT-REPORT (.*?) END", msg)
    if not m:
        problem(case, f"no INIT-REPORT at iteration 0 (got {kind}: {msg[:300]})")
    else:
        escaped = [r for r in m.group(1).split() if not r.endswith("=refused")]
        if escaped or len(m.group(1).split()) != len(INIT_ESCAPES):
            problem(case, f"init() under pcall: {m.group(1)}")
        else:
            print(f"ok {case} init: all {len(INIT_ESCAPES)} escapes refused under pcall")
    # The decisions in order, by the iteration each was made on (late reports are no
    # decisions): escape t is decision t, after the first (init's report).
    order = sorted(f for f in set(events) | set(got) if f >= 0)
    at = lambda k: order[k] if k < len(order) else -1
    for t, (name, _, kinds, phrase) in enumerate(STEP_ESCAPES, start=1):
        f = at(t)
        kind, msg = got.get(f, ("keep" if events.get(f) in ("keep", "plan") else events.get(f), ""))
        first = msg.strip().splitlines()[0][:200] if msg.strip() else ""
        if kind not in kinds:
            problem(case, f"{name} (decision {t}, on iteration {f}): {kind}, want {' or '.join(sorted(kinds))}: "
                          f"{msg[:1500]}")
        elif phrase and not all(p in msg for p in ((phrase,) if isinstance(phrase, str) else phrase)):
            problem(case, f"{name} (decision {t}, on iteration {f}): {kind}, but the log lacks {phrase!r}: "
                          f"{msg[:1500]}")
        else:
            print(f"ok {case} {name}: {kind} {first}")
    # Crashed and killed workers were replaced; the policy was never dropped and
    # decides normally after the last escape.
    crashes = sum(1 for k, _ in got.values() if k in ("crash", "hung"))
    took_over = log.count("a fresh worker process")
    if took_over < crashes:
        problem(case, f"{crashes} crashed or killed worker(s) but {took_over} fresh one(s) took over")
    if "no longer called" in log:
        problem(case, "the policy was dropped")
    # (The last iteration's stats are decided on by no one.)
    tail = {f: got[f][0] if f in got else events.get(f) for f in order[len(STEP_ESCAPES) + 1:]}
    if len(tail) < 10:
        problem(case, f"only {len(tail)} decisions after the escapes, want at least 10 (raise ITERATIONS)")
    if any(e not in ("keep", "plan") for e in tail.values()):
        first = min(t for t, e in tail.items() if e not in ("keep", "plan"))
        problem(case, f"after the escapes the policy's decisions were {list(tail.values())}, want keep; the first "
                      f"(iteration {first}): {got.get(first, ('', ''))[1][:600]}")
    s = summary(run_dir)
    if s["iterations"] != ITERATIONS:
        problem(case, f"{s['iterations']} iterations, want {ITERATIONS}")
    check_bounds(case, job, run_dir)
    print(f"ok {case}: {job.wall:.1f} s, {job.cpu:.1f} s of CPU, {len(got)} failures logged, "
          f"{took_over} fresh worker(s), rank 0 peak RSS {s.get('rank0_peak_rss_mb', 0):.0f} MB")


# ---- init() that escapes unprotected: refused in the launcher ---------------------

INIT_REFUSALS = [
    # (case, init body or None for a top-level body, accepted kinds, key phrase)
    ("init_os_execute", "os.execute('touch ' .. M .. '/init_os_execute')", {"error"},
     "attempt to call field 'execute' (a nil value)"),
    ("init_ffi", "require('ffi').C.system('touch ' .. M .. '/init_ffi')", {"error"}, "module 'ffi' is not available"),
    ("init_io_write", "io.open(M .. '/init_io_write', 'w'):write('x')", {"error"},
     "attempt to index global 'io' (a nil value)"),
    ("init_xpcall_loops", f"xpcall({LOOP}, {LOOP})", {"timeout", "hung"}, ""),
    ("init_c_backtracking", "string.rep('a', 40):find(string.rep('a*', 40) .. 'b')", {"hung"},
     "did not finish init(cluster) within"),
    ("init_gsub_recursion", "local function f(s) return (s:gsub('.', f)) end; f('x')", {"crash"}, "signal 11"),
    ("init_memory", "local t = {}; while true do t[#t + 1] = string.rep('x', 4096) .. #t end", {"memory"},
     "not enough memory"),
    # Coroutines nested until the cap (or the budget, on a slow machine).
    ("init_coroutine_nesting", "local function f() coroutine.wrap(f)() end; f()", {"memory", "timeout"}, ""),
    ("load_loops", None, {"timeout", "hung"}, ""),
]


def init_refusals():
    for case, body, kinds, phrase in INIT_REFUSALS:
        d = case_dir(case)
        markers = os.path.join(d, "markers")
        if body is None:
            text = f"while true do end\nreturn {{ init = function() end, step = function() end }}\n"
        else:
            text = (f"local M = '{markers}'\nreturn {{ init = function(cluster) {body} end,\n"
                    f"  step = function(stats) return nil end }}\n")
        pol = write(os.path.join(d, case + ".lua"), text)
        run_dir = os.path.join(d, "run")
        job = run(case, d, [experiment(d, pol, 20), "--out", run_dir], timeout=REFUSE_WITHIN_S)
        m = re.search(r"policy (\S+) failed to start \((\w+)\): ", job.out)
        if job.timed_out:
            problem(case, f"the launcher did not refuse within {REFUSE_WITHIN_S} s (a hang):\n{job.out[-2000:]}")
        elif job.rc == 0 or not m:
            problem(case, f"exited {job.rc} without the refusal 'policy ... failed to start':\n{job.out[-2000:]}")
        elif m.group(1) != pol or m.group(2) not in kinds:
            problem(case, f"refused naming {m.group(1)} ({m.group(2)}), want {pol} ({' or '.join(sorted(kinds))}):"
                          f"\n{job.out[-2000:]}")
        elif phrase and phrase not in job.out:
            problem(case, f"the refusal lacks {phrase!r}:\n{job.out[-2000:]}")
        elif "iter " in job.out or os.path.exists(os.path.join(run_dir, "trace.jsonl")):
            problem(case, f"training started before the refusal:\n{job.out[-2000:]}")
        else:
            print(f"ok {case}: refused ({m.group(2)}) after {job.wall:.1f} s")
        check_bounds(case, job)


# ---- policy.budget_ms = 1e308 ------------------------------------------------------

def budget_huge():
    case = "budget_huge"
    d = case_dir(case)
    pol = write(os.path.join(d, "looping.lua"), "return { init = function(c) end,\n"
                                                "  step = function(s) while true do end end }\n")
    run_dir = os.path.join(d, "run")
    job = run(case, d, [experiment(d, pol, 20), "--out", run_dir, "policy.budget_ms=1e308", "policy.max_failures=3"],
              timeout=180)
    if job.timed_out:
        problem(case, f"policy.budget_ms=1e308 with a looping step(): neither refused nor bounded, killed after "
                      f"{job.wall:.0f} s (a hang):\n{job.out[-2000:]}")
    elif job.rc != 0:
        if "policy.budget_ms" not in job.out or "failed to start" in job.out:
            problem(case, f"exited {job.rc} without naming policy.budget_ms:\n{job.out[-2000:]}")
        else:
            print(f"ok {case}: refused by validation ({job.wall:.1f} s): "
                  f"{next(l for l in job.out.splitlines() if 'policy.budget_ms' in l)[:200]}")
    elif expect_ok(case, job, run_dir):
        got = policy_failures(job.out)
        if not got or "no longer called" not in job.out:
            problem(case, f"ran to the end, but the looping policy was not stopped and dropped:\n{job.out[-2000:]}")
        else:
            kind, msg = got[min(got)]
            print(f"ok {case}: bounded, the run ended in {job.wall:.1f} s; the first failure: {kind}: "
                  f"{msg.splitlines()[0][:200]}")
    check_bounds(case, job, run_dir if job.rc == 0 and not job.timed_out else None)


# ---- a long job: hot swaps to files that loop at load, then the console -----------

def wait_for_log(job_log, text, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(job_log):
            with open(job_log, errors="replace") as f:
                if text in f.read():
                    return True
        time.sleep(0.2)
    return False


def long_line(sock_path, size):
    """Sends `size` bytes without a newline; returns (what the console answered,
    whether it closed the connection, seconds taken)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock_path)
    start = time.monotonic()
    got = b""
    while not got.endswith(b"\0"):  # the greeting
        got += s.recv(65536)
    chunk, sent, closed = b"x" * (1 << 20), 0, False
    try:
        while sent < size:
            s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    except socket.timeout:
        pass  # the console stopped reading
    reply = b""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                closed = True
                break
            reply += data
            if reply.endswith(b"\0"):
                # the answer; the close should follow
                s.settimeout(10)
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return reply.decode(errors="replace"), closed, time.monotonic() - start, sent


CONSOLE_CASES = [
    # (command, what the reply must contain); each is followed by plan(), which must
    # still answer.
    ("os.exit(7)", "attempt to call field 'exit' (a nil value)"),
    ("pcall(debug.sethook); while true do end", "ran past its time budget"),
    ("debug.sethook(); while true do end", "attempt to call field 'sethook' (a nil value)"),
    ("X = string.rep('x', 2^30)", "not enough memory"),
    ("io.open('/etc/passwd')", "attempt to index global 'io' (a nil value)"),
    ("require('ffi').C.system('touch MARKERS/console_ffi')", "module 'ffi' is not available"),
    ("local t = {}; while true do t[#t + 1] = string.rep('x', 65536) .. #t end", "not enough memory"),
    # after it, a command making some garbage (half a MB) still runs
    ("local t = {}; for i = 1, 20000 do t[i] = i end; return #t * 3", "60000"),
]
CONSOLE_REPLY_S = 60  # generous: the command runs at the next iteration boundary


def console_job():
    case = "console"
    d = case_dir(case)
    pol = write(os.path.join(d, "benign.lua"), BENIGN)
    loops = write(os.path.join(d, "loops_at_load.lua"), "while true do end\nreturn {}\n")
    run_dir = os.path.join(d, "run")
    exp = experiment(d, pol, 10 ** 8, extra="e.console = true\ne.policy.watch = true")
    job = Job(case, d, [exp, "--out", run_dir])
    sock = os.path.join(run_dir, "repl.sock")
    log = os.path.join(run_dir, "log.txt")
    end = time.time() + START_S
    while not os.path.exists(sock) and job.p.poll() is None and time.time() < end:
        time.sleep(0.1)
    if not os.path.exists(sock):
        job.finish(5)
        problem(case, f"the job made no console socket:\n{job.out[-2000:]}")
        return
    # The check for processes left behind sees this job's: its ranks and policy worker.
    live = [p[4] for p in processes_of(d)]
    if sum("tandem-policy-worker" in c for c in live) != 1 or sum(" run " in c for c in live) < 2:
        problem(case, "processes_of() does not see the running job's ranks and policy worker:\n  " + "\n  ".join(live))
    # A swap through the console to a file that loops at load: the new file is blamed,
    # the old policy keeps running.
    reply = socket_command(sock, f"swap('{loops}')")
    if "requested" not in reply:
        problem(case, f"swap('{loops}') answered {reply!r}")
    want = f"policy {loops} not swapped in (loading failed, "
    if not wait_for_log(log, want, START_S) or not wait_for_log(log, "the current policy benign keeps running", 10):
        problem(case, f"no '{want}...' followed by 'the current policy benign keeps running' in the log")
    else:
        print(f"ok {case} swap to a file that loops at load: the new file blamed, benign keeps running")
    # The watched file replaced by one that loops at load (at once: a file seen half
    # written would be a second change).
    os.replace(write(pol + ".new", "-- replaced during the run\nwhile true do end\nreturn {}\n"), pol)
    want = f"policy {pol} not swapped in (loading failed, "
    if not wait_for_log(log, f"policy file {pol} changed", START_S) or not wait_for_log(log, want, START_S):
        problem(case, f"the watched file rewritten to loop at load: no '{want}...' in the log")
    else:
        print(f"ok {case} watched file rewritten to loop at load: blamed, benign keeps running")
    for line, want in CONSOLE_CASES:
        if job.p.poll() is not None:
            break
        line = line.replace("MARKERS", os.path.join(d, "markers"))
        start = time.monotonic()
        try:
            reply = socket_command(sock, line, timeout=CONSOLE_REPLY_S)
        except OSError as e:
            reply = f"(no reply: {e})"
        took = time.monotonic() - start
        try:
            after = socket_command(sock, "plan()", timeout=CONSOLE_REPLY_S)
        except OSError as e:
            after = f"(no reply: {e})"
        if want not in reply:
            problem(case, f"console {line!r}: the reply lacks {want!r}: {reply[:500]!r}")
        elif "[32, 32]" not in after:
            problem(case, f"console {line!r}: then plan() answered {after[:500]!r}")
        else:
            print(f"ok {case} console {line!r}: {reply.strip().splitlines()[0][:160]} ({took:.1f} s)")
    if job.p.poll() is None:
        reply, closed, took, sent = long_line(sock, 140 * (1 << 20))
        if "64 KB" not in reply or not closed:
            problem(case, f"a 140 MB line: answered {reply[:300]!r}, connection closed {closed}, "
                          f"{sent >> 20} MB sent in {took:.1f} s")
        else:
            print(f"ok {case} console: a 140 MB line refused after {sent >> 20} MB sent ({took:.1f} s): "
                  f"{reply.strip().splitlines()[0][:160]}")
    if job.p.poll() is not None:
        job.finish(5)
        problem(case, f"the job ended before stop(), exit {job.rc}:\n{job.out[-3000:]}")
        check_bounds(case, job)
        return
    # The run is unaffected: the console answers, the policy still decides, stop() ends it.
    if "[32, 32]" not in socket_command(sock, "plan()"):
        problem(case, "plan() no longer answers [32, 32]")
    socket_command(sock, "stop()")
    job.finish(START_S)
    if expect_ok(case, job, run_dir):
        s = summary(run_dir)
        if s["stop_reason"] != "console":
            problem(case, f"stop reason {s['stop_reason']}, not console")
        if s.get("policy", {}).get("name") != "benign":
            problem(case, f"the summary's policy is {s.get('policy')}, not benign")
        events = policy_events(run_dir)
        failed = [t for t, e in events.items() if e == "swap_failed"]
        after = [e for t, e in events.items() if failed and t > max(failed)]
        if len(failed) != 2 or not after or any(e not in ("keep", "plan") for e in after):
            problem(case, f"the trace's policy events: swaps failed at {failed}, then {sorted(set(after))}")
        print(f"ok {case}: stopped after {s['iterations']} iterations, {job.wall:.1f} s, {job.cpu:.1f} s of CPU, "
              f"rank 0 peak RSS {s.get('rank0_peak_rss_mb', 0):.0f} MB")
        check_bounds(case, job, run_dir)
    else:
        check_bounds(case, job)


os.makedirs(SCRATCH, exist_ok=True)
started_at = time.monotonic()
reference()
step_escapes()
init_refusals()
budget_huge()
console_job()
print(f"hostile policies: {time.monotonic() - started_at:.0f} s")
if failures:
    fail(f"{len(failures)} check(s) failed: {', '.join(sorted(set(failures)))}")
print("all hostile-policy checks passed")
