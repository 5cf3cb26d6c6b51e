#!/usr/bin/env bash
# The command line fails early and clearly: bad experiments exit non-zero before any
# training starts, with the message a user needs.
set -uo pipefail
tandem=$1 tmp=$2
rm -rf "$tmp" && mkdir -p "$tmp"
fails=0
expect() {  # expect NAME EXPECTED_SUBSTRING COMMAND...
  local name=$1 want=$2
  shift 2
  local out
  out=$("$@" 2>&1)
  local rc=$?
  if [[ $rc -eq 0 ]]; then echo "FAIL $name: exited 0"; fails=$((fails + 1)); return; fi
  if [[ "$out" != *"$want"* ]]; then echo "FAIL $name: output lacks '$want':"; echo "$out"; fails=$((fails + 1)); return; fi
  if [[ "$out" == *"iter "* ]]; then echo "FAIL $name: training started"; fails=$((fails + 1)); return; fi
  echo "ok $name"
}
printf 'return {\n  model = "mlp",\n  global_bach = 64,\n}\n' > "$tmp/typo.lua"
printf 'return {\n  model = "mlp",\n  global_batch = 64 +,\n}\n' > "$tmp/syntax.lua"
printf 'local x = nil\nreturn { model = "mlp", global_batch = x.y }\n' > "$tmp/runtime.lua"
expect unknown_key "global_bach" "$tandem" run "$tmp/typo.lua" --out "$tmp/r1"
expect syntax_error "syntax.lua:3" "$tandem" run "$tmp/syntax.lua" --out "$tmp/r2"
expect runtime_error "runtime.lua:2" "$tandem" run "$tmp/runtime.lua" --out "$tmp/r3"
expect runtime_traceback "traceback" "$tandem" run "$tmp/runtime.lua" --out "$tmp/r3"
expect missing_file "no-such-experiment.lua" "$tandem" run "$tmp/no-such-experiment.lua"
expect unknown_override "bogus_key" "$tandem" run scripts/experiments/quickstart.lua bogus_key=3 --out "$tmp/r4"
expect bad_data_dir "dataset-fashion-mnist" "$tandem" run scripts/experiments/quickstart.lua data.dir=$tmp/nowhere --out "$tmp/r5"
printf 'return { init = function(c) end, step = function(s) return nil end' > "$tmp/badpolicy.lua"
printf 'return { init = function(c) error("needs params.speeds") end, step = function(s) end }' > "$tmp/initpolicy.lua"
expect unknown_policy "policy 'nonexist' not found" "$tandem" run scripts/experiments/quickstart.lua policy.file=nonexist --out "$tmp/r6"
expect policy_syntax "badpolicy.lua:1" "$tandem" run scripts/experiments/quickstart.lua policy.file="$tmp/badpolicy.lua" --workers 2 --out "$tmp/r7"
expect policy_init "needs params.speeds" "$tandem" run scripts/experiments/quickstart.lua policy.file="$tmp/initpolicy.lua" --out "$tmp/r8"
expect policy_bounds "no plan can satisfy the policy's bounds" "$tandem" run scripts/experiments/quickstart.lua policy.file=lbb policy.min_batch=40 --workers 2 --out "$tmp/r9"
expect unknown_command "unknown command" "$tandem" frobnicate
# tandem sample: a language model and weights, a prompt in its vocabulary (the
# command line is checked before the file is read).
: > "$tmp/x.safetensors"
expect sample_not_lm "is not a language model" "$tandem" sample scripts/experiments/quickstart.lua init_from=$tmp/x.safetensors
expect sample_no_weights "give init_from=FILE" "$tandem" sample scripts/experiments/gpt.lua
expect sample_bad_token "item 2 '300' is not a token" "$tandem" sample scripts/experiments/gpt.lua init_from=$tmp/x.safetensors --prompt-tokens 5,300
expect sample_bad_count "--tokens 'many' is not a whole number" "$tandem" sample scripts/experiments/gpt.lua init_from=$tmp/x.safetensors --tokens many
expect sample_no_file "missing.safetensors" "$tandem" sample scripts/experiments/gpt.lua init_from=$tmp/missing.safetensors
[[ $fails -eq 0 ]] && echo "all CLI error checks passed" || exit 1
