#!/usr/bin/env bash
# Trains an experiment into a fresh run directory and checks the run left every file
# it promises and reached the accuracy asked for.
# usage: run_and_check.sh TANDEM EXPERIMENT MIN_TEST_ACCURACY RUN_DIR [override ...]
set -euo pipefail
tandem=$1 experiment=$2 min_acc=$3 dir=$4
shift 4
rm -rf "$dir"
# The CPU is the reference; TANDEM_TEST_DEVICE=cuda runs the same checks on a GPU,
# and a run asking for a GPU where there is none is skipped (77), not failed.
device=${TANDEM_TEST_DEVICE:-cpu}
for a in "$@"; do [[ $a == device=* ]] && device=${a#device=}; done
if [[ $device == cuda ]] && ! "$tandem" version | grep '^gpu: ' | grep -qv '^gpu: none'; then
  echo "skipped: $("$tandem" version | grep '^gpu: ' | head -1)"
  exit 77
fi
"$tandem" run "$experiment" --out "$dir" device="$device" "$@"
for f in config.json log.txt trace.jsonl summary.json; do
  [[ -s "$dir/$f" ]] || { echo "FAIL: run directory lacks $f"; exit 1; }
done
field() { sed -n "s/^ *\"$1\": *\([^,]*\),\{0,1\}$/\1/p" "$dir/summary.json"; }
acc=$(field test_accuracy)
for key in samples_per_s wall_s time_to_target_s; do
  [[ -n "$(field $key)" ]] || { echo "FAIL: summary.json lacks $key"; exit 1; }
done
echo "test_accuracy=$acc (need >= $min_acc), time_to_target_s=$(field time_to_target_s), wall_s=$(field wall_s)"
awk -v a="$acc" -v m="$min_acc" 'BEGIN { exit !(a + 0 >= m + 0) }' || { echo "FAIL: accuracy $acc below $min_acc"; exit 1; }
