#!/usr/bin/env bash
# `make bench`: every benchmark, results under bench-results/ (not committed).
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
mkdir -p bench-results
/usr/bin/python3 tools/bench/mlp_vs_torch.py "$build" --out bench-results/mlp_vs_torch.json
/usr/bin/python3 tools/bench/gpt_cpu_vs_torch.py "$build" --out bench-results/gpt_cpu_vs_torch.json
/usr/bin/python3 tools/bench/gpt2_cpu_vs_torch.py "$build" --out bench-results/gpt2_cpu_vs_torch.json
/usr/bin/python3 tools/bench/hetero_balance.py "$build" --out bench-results/hetero_balance.json
"$build"/bench/tandem_kernels --out bench-results/kernels.json
"$build"/bench/tandem_policy_bench --out bench-results/policy_cost.json
"$build"/bench/tandem_policy_isolation_bench --out bench-results/policy_isolation.json
/usr/bin/python3 tools/bench/hostile_policy_throughput.py "$build" --out bench-results/hostile_policy_throughput.json
/usr/bin/python3 tools/bench/hetero_policies.py "$build" --out bench-results/hetero_policies.json
/usr/bin/python3 tools/bench/goodput_tta.py "$build" --out bench-results/goodput_tta.json
/usr/bin/python3 tools/bench/micro_batches.py "$build" --out bench-results/micro_batches.json
/usr/bin/python3 tools/bench/sync_modes.py "$build" --out bench-results/sync_modes.json
/usr/bin/python3 tools/bench/sync_transport.py "$build" --out bench-results/sync_transport.json
# Across namespace hosts: needs root (exits 77 where it cannot make them).
/usr/bin/python3 tools/bench/gradient_overlap.py "$build" --out bench-results/gradient_overlap.json || [ $? -eq 77 ]
/usr/bin/python3 tools/bench/sim_overlap_fidelity.py "$build" --out bench-results/sim_overlap_fidelity.json || [ $? -eq 77 ]
/usr/bin/python3 tools/bench/ddp_vs_buckets.py "$build" --out bench-results/ddp_vs_buckets.json || [ $? -eq 77 ]
/usr/bin/python3 tools/bench/sim_scale.py "$build" --out bench-results/sim_scale.json
/usr/bin/python3 tools/bench/sim_fidelity.py "$build" --out bench-results/sim_fidelity.json
/usr/bin/python3 tools/bench/token_files_open.py "$build" --out bench-results/token_files_open.json
# The experiment suite (the papers' results, docs/results.md), reports included.
/usr/bin/python3 tools/experiments/run.py --build "$build" --out bench-results/experiments
