#!/usr/bin/env bash
# How long a newcomer waits: the README's two commands from a fresh clone with no
# compiler cache, this checkout's commit against a baseline commit, side by side on
# this machine (these machines differ several times over from day to day, so every
# figure is printed as minutes here and as a ratio against the baseline).
#
#   1. `make quickstart`: from the clone to the quickstart's first progress line;
#   2. `make test`: from the clone to ctest's end, build included (and the suite's
#      own time, ctest's "Total Test time");
#   3. one engine .cpp file changed (touched), then the tandem binary rebuilt.
#
# The new commit runs first; the baseline's runs are cut off once the ratio is proved
# (at 10x the new quickstart time, 4x the new make test time), as the issue allows.
# Packages must already be installed (`tools/install-deps.sh python3-torch`); ccache
# is switched off (CCACHE_DISABLE=1) whether installed or not. Each clone gets an empty
# data cache of its own (TANDEM_CACHE_DIR), as a new machine has.
#
# usage: tools/bench/build_time.sh [--baseline REV|none] [--new REV] [--only quickstart|test|rebuild]
#                                  [--work DIR] [--jobs N]
# --baseline none: the new commit's figures only (a baseline measured earlier that
# day gives the ratio by hand).
# Prints one line per figure; writes WORK/build_time.json.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
baseline=afd6390
new=HEAD
only=all
work=${TMPDIR:-/tmp}/tandem-build-time
jobs=$(nproc 2>/dev/null || echo 2)
while [[ $# -gt 0 ]]; do
  case $1 in
    --baseline) baseline=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n 2,21p "$0"; exit 0 ;;
    *) echo "build_time.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
export CCACHE_DISABLE=1 JOBS=$jobs
rm -rf "$work"; mkdir -p "$work"
new_sha=$(git -C "$repo" rev-parse --short "$new")
base_sha=none
[[ $baseline == none ]] || base_sha=$(git -C "$repo" rev-parse --short "$baseline")
echo "build_time: new $new_sha against baseline $base_sha, $jobs jobs, $(nproc) cores, ccache off, work $work"

clone() {  # clone REV DIR: a fresh clone at REV
  git clone -q --no-hardlinks "$repo" "$2"
  git -C "$2" checkout -q "$1"
}

# seconds from now until LOG has a progress line or the command ends (or LIMIT passes)
timed_until_progress() {  # DIR LIMIT_S LOG -> prints seconds, or "cut" past the limit
  local dir=$1 limit=$2 log=$3 start now
  start=$(date +%s.%N)
  # a session of its own, so that the whole make and the training it starts can be ended
  setsid bash -c 'cd "$1" && TANDEM_CACHE_DIR="$1.cache" exec timeout --kill-after=10 "$2" make quickstart' _ "$dir" "$limit" >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if grep -qE '\[r0\] info \[[0-9:]+/' "$log"; then
      now=$(date +%s.%N)
      echo "$now - $start" | bc
      kill -- -"$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return
    fi
    sleep 0.5
  done
  wait "$pid" 2>/dev/null && rc=0 || rc=$?
  if grep -qE '\[r0\] info \[[0-9:]+/' "$log"; then
    now=$(date +%s.%N); echo "$now - $start" | bc
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then echo cut
  else echo "build_time: make quickstart failed in $dir (exit $rc); see $log" >&2; echo failed
  fi
}

timed_make_test() {  # DIR LIMIT_S LOG -> prints seconds, or "cut"
  local dir=$1 limit=$2 log=$3 start rc=0
  start=$(date +%s.%N)
  # An empty data cache of its own (engine/data/inflated_cache.hpp): the suite fills it
  # as a new machine's first run would.
  ( cd "$dir" && TANDEM_CACHE_DIR="$dir.cache" timeout --kill-after=10 "$limit" make test ) >"$log" 2>&1 || rc=$?
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then echo cut; return; fi
  [[ $rc -eq 0 ]] || echo "build_time: make test in $dir exited $rc (failed tests still count the time); see $log" >&2
  echo "$(date +%s.%N) - $start" | bc
}

suite_seconds() { grep -oE 'Total Test time \(real\) = +[0-9.]+' "$1" | grep -oE '[0-9.]+$' || echo "?"; }
minutes() { [[ $1 == cut || $1 == failed || $1 == "?" ]] && echo "$1" || printf '%.1f min (%.0f s)' "$(echo "$1 / 60" | bc -l)" "$1"; }
ratio() {  # baseline new limit_factor
  if [[ $1 == cut ]]; then echo "more than ${3}x (baseline cut off at ${3}x)"
  elif [[ $1 == failed || $2 == failed ]]; then echo "n/a"
  else printf '%.1fx' "$(echo "$1 / $2" | bc -l)"; fi
}

json="{\"new\": \"$new_sha\", \"baseline\": \"$base_sha\", \"cores\": $(nproc)"

if [[ $only == all || $only == quickstart || $only == rebuild ]]; then
  clone "$new" "$work/new-quickstart"
  q_new=$(timed_until_progress "$work/new-quickstart" 3600 "$work/new-quickstart.log")
  echo "make quickstart, new:      $(minutes "$q_new") to the first progress line"
  json+=", \"quickstart_new_s\": \"$q_new\""
  if [[ $only != rebuild && $baseline != none ]]; then
    clone "$baseline" "$work/base-quickstart"
    limit=$(printf '%.0f' "$(echo "$q_new * 10 + 1" | bc -l)")
    q_base=$(timed_until_progress "$work/base-quickstart" "$limit" "$work/base-quickstart.log")
    echo "make quickstart, baseline: $(minutes "$q_base"); new is $(ratio "$q_base" "$q_new" 10) sooner"
    json+=", \"quickstart_baseline_s\": \"$q_base\""
    rm -rf "$work/base-quickstart"
  fi
  # One engine file changed: its batch (a unity build) and the binary are rebuilt.
  touch "$work/new-quickstart/engine/train/plan.cpp"
  start=$(date +%s.%N)
  cmake --build "$work/new-quickstart/build" -j "$jobs" --target tandem >"$work/new-rebuild.log" 2>&1
  r_new=$(echo "$(date +%s.%N) - $start" | bc)
  echo "rebuild after one engine .cpp changed (engine/train/plan.cpp): $(printf '%.0f' "$r_new") s"
  json+=", \"rebuild_one_file_s\": \"$r_new\""
  rm -rf "$work/new-quickstart"
fi

if [[ $only == all || $only == test ]]; then
  clone "$new" "$work/new-test"
  t_new=$(timed_make_test "$work/new-test" 7200 "$work/new-test.log")
  s_new=$(suite_seconds "$work/new-test.log")
  echo "make test, new:      $(minutes "$t_new") in all, the suite's own run $(minutes "$s_new")"
  json+=", \"test_new_s\": \"$t_new\", \"suite_new_s\": \"$s_new\""
  if [[ $baseline != none ]]; then
    clone "$baseline" "$work/base-test"
    limit=$(printf '%.0f' "$(echo "$t_new * 4 + 1" | bc -l)")
    t_base=$(timed_make_test "$work/base-test" "$limit" "$work/base-test.log")
    s_base=$(suite_seconds "$work/base-test.log")
    echo "make test, baseline: $(minutes "$t_base") in all, the suite's own run $(minutes "$s_base"); new is $(ratio "$t_base" "$t_new" 4) faster"
    json+=", \"test_baseline_s\": \"$t_base\", \"suite_baseline_s\": \"$s_base\""
  fi
  # A cut suite's last tests (in namespaces or sessions of their own) may write into
  # their run folders a moment longer: the clean-up waits for them rather than abort
  # the script before its results are written.
  rm -rf "$work/new-test" "$work/base-test" "$work"/*.cache 2>/dev/null ||
    { sleep 15; rm -rf "$work/new-test" "$work/base-test" "$work"/*.cache || true; }
fi
echo "$json}" >"$work/build_time.json"
echo "build_time: results in $work/build_time.json, logs beside it"
