#!/usr/bin/env bash
# Checks a CUDA build of tandem on a machine with a GPU, part by part, each part's
# output in OUT_DIR/<part>.log (and its JSON results beside it), then a summary line
# per part in OUT_DIR/summary.txt. The parts, in order (name some to run only those,
# for instance to fit a time limit per call):
#   gpu          ctest -L gpu: every CUDA kernel and device op against the CPU, NCCL on
#                one rank, MLP / LeNet / ResNet converging, in fp32 and bf16
#   integration  TANDEM_TEST_DEVICE=cuda ctest -L integration: the end-to-end tests with
#                every worker on the GPU (the namespace and Slurm tests left out: they
#                test hosts, not devices)
#   kernels      the kernel harness (bench/tandem_kernels): each kernel's fraction of
#                the device's memory bandwidth
#   fused        tools/gpu/fused_check.py: MLP and LeNet runs with the fused step
#                (CUDA graphs) against the step op by op: graphs replayed, the same
#                accuracy, the speed of each
#   bench_fp32   tools/bench/gpu_vs_torch.py in fp32 (needs PyTorch with CUDA): tandem
#                (data held on the GPU, and staged) against PyTorch eager and
#                CUDA-graph-captured
#   bench_bf16   the same in bf16
#   bench        both
#   triage       what tells most in one command on a freshly started GPU machine, at
#                most 7 minutes from the kit's env.sh to the summary: ctest -L gpu (8
#                tests at a time, 90 s each at most), the fused step (MLP and GPT)
#                replaying graphs against op by op (fused_check.py --quick), the kernel
#                harness, gpu_vs_torch.py and gpt_vs_torch.py in bf16, one repetition.
#                Each part has its own limit (150, 90, 45, 60, 60 s); every log goes
#                into OUT/triage.log, so OUT holds at most 6 files (summary.txt,
#                version.txt, triage.log and the JSON results), all of which one
#                command brings back. Run it first on every GPU machine.
# Each part stops at 540 s, so that one part fits one call of a lent GPU machine
# (10 minutes a command); the ctest parts run 4 tests at a time to fit.
# The build: Release, CUDA for the GPU machines (H100 and H200 are sm_90), benchmarks
# included (they are not in the default build):
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-gpu -j2 --target all tandem_benchmarks
# usage: tools/gpu/check.sh BUILD_DIR OUT_DIR [triage|gpu|integration|kernels|fused|bench|bench_fp32|bench_bf16 ...]
# A part that fails does not stop the others; the exit status is 1 if any failed.
set -uo pipefail
build=$(cd "${1:?usage: tools/gpu/check.sh BUILD_DIR OUT_DIR [part ...]}" && pwd)
mkdir -p "${2:?give an output folder}" && out=$(cd "$2" && pwd)
shift 2
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(gpu integration kernels fused bench)
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
[ -n "$src" ] && [ -d "$src" ] || { echo "check.sh: $build is not a configured tandem build" >&2; exit 2; }
# A library the machine lacks and the kit did not carry: said by name, before anything
# runs (../shared/device/pack.sh copies the ones a GPU machine's image is known to lack).
missing=$(ldd "$build/tandem" "$build/tandem-policy-worker" 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
if [ -n "$missing" ]; then
  echo "check.sh: libraries not found on this machine: $(echo $missing) (copy them into the kit's lib/ where" \
       "pack.sh ran, or install them here)" | tee "$out/summary.txt" >&2
  exit 2
fi
"$build/tandem" version | tee "$out/version.txt"
if ! grep -q '^gpu: ' "$out/version.txt" || grep -q '^gpu: none' "$out/version.txt"; then
  echo "check.sh: this build sees no GPU; nothing to check here" >&2
  exit 77
fi

: > "$out/summary.txt"
status=0
one_log=""  # triage: every part's log in this one file (a command brings back few files)
run_part() {  # name, time limit in s, folder to run in, command...
  local name=$1 limit=$2 dir=$3
  shift 3
  local start=$SECONDS rc=0 log="$out/$name.log"
  if [ -n "$one_log" ]; then
    log=$one_log
    printf '\n===== %s (limit %d s): %s\n' "$name" "$limit" "$*" >> "$log"
  else
    : > "$log"
  fi
  (cd "$dir" && timeout --kill-after=10 "$limit" "$@") >> "$log" 2>&1 || rc=$?
  local verdict=passed
  if [ $rc -ne 0 ]; then
    verdict="FAILED (exit $rc$([ $rc -eq 124 ] || [ $rc -eq 137 ] && echo ", past ${limit} s"))"
    status=1
  fi
  printf '%-12s %s in %d s; log %s\n' "$name" "$verdict" $((SECONDS - start)) "$log" | tee -a "$out/summary.txt"
}

kernels_built() {  # the harness is not in the default build: say so before its part fails
  [ -x "$build/bench/tandem_kernels" ] ||
    echo "check.sh: $build/bench/tandem_kernels is missing: build the target tandem_benchmarks" | tee -a "${one_log:-/dev/null}" >&2
}

triage() {
  one_log="$out/triage.log"
  : > "$one_log"
  local scratch
  scratch=$(mktemp -d /tmp/tandem-triage.XXXXXX)  # run folders stay out of OUT
  run_part gpu 150 "$build" ctest -L gpu -j8 --timeout 90 --output-on-failure
  run_part fused 90 "$src" python3 tools/gpu/fused_check.py "$build" "$scratch/fused" --cases mlp,gpt --quick
  kernels_built
  run_part kernels 45 "$build" "$build/bench/tandem_kernels" --out "$out/kernels.json"
  run_part bench_bf16 60 "$src" python3 tools/bench/gpu_vs_torch.py "$build" --precision bf16 --reps 1 \
    --steps 100 --warmup 20 --out "$out/gpu_vs_torch_bf16.json"
  run_part gpt_bf16 60 "$src" python3 tools/bench/gpt_vs_torch.py "$build" --precision bf16 --reps 1 \
    --steps 30 --warmup 10 --out "$out/gpt_vs_torch_bf16.json"
  rm -rf "$scratch"
  one_log=""
}

for part in "${parts[@]}"; do
  case $part in
    triage) triage ;;
    gpu) run_part gpu 540 "$build" ctest -L gpu -j4 --output-on-failure ;;
    integration)
      run_part integration 540 "$build" env TANDEM_TEST_DEVICE=cuda \
        ctest -L integration -E 'multihost|slurm' -j4 --output-on-failure ;;
    kernels)
      kernels_built
      run_part kernels 540 "$build" "$build/bench/tandem_kernels" --out "$out/kernels.json" ;;
    fused) run_part fused 540 "$src" python3 tools/gpu/fused_check.py "$build" "$out" ;;
    bench|bench_fp32|bench_bf16)
      for p in fp32 bf16; do
        [ "$part" = bench ] || [ "$part" = "bench_$p" ] || continue
        run_part "bench_$p" 540 "$src" python3 tools/bench/gpu_vs_torch.py "$build" --precision "$p" --reps 2 \
          --out "$out/gpu_vs_torch_$p.json"
      done ;;
    *) echo "check.sh: unknown part '$part' (triage, gpu, integration, kernels, fused, bench, bench_fp32, bench_bf16)" >&2
       exit 2 ;;
  esac
done
exit $status
