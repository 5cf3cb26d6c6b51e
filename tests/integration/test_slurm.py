#!/usr/bin/env python3
"""tandem under Slurm (srun --mpi=pmix, OpenMPI's PMIx path): a one-machine Slurm
(tools/slurm/one-node.sh: Debian's slurm-wlm and munge) runs the ranks, not mpirun.

  - srun --mpi=pmix -n 3 tandem run ...: three ranks, a skewed fixed plan; they train
    to the parameters one worker reaches (scaled difference under 1e-5), so srun's
    ranks form one MPI job;
  - per-worker settings are checked against srun's task count (emulation.speeds with
    3 entries while the experiment says workers = 1), and every rank runs its own
    slot's speed.
(The local rank, SLURM_LOCALID, only picks a GPU: not seen on CPU workers.)

Skipped (77) where a Slurm cannot run here: not root, slurm-wlm or munge missing, a
node that never comes up.

usage: test_slurm.py TANDEM_BINARY SCRATCH_DIR   (from the source tree)
"""
import atexit
import json
import os
import shutil
import subprocess
import sys

from cluster_support import fail, params, scaled_difference

TANDEM, SCRATCH = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
SLURM = os.path.abspath("tools/slurm/one-node.sh")
SLURM_DIR = os.path.join(SCRATCH, "slurm")
MLP = "scripts/experiments/quickstart.lua"
COMMON = ["model_args.hidden=64", "model_args.dropout=0.2", "global_batch=128", "stop.target_accuracy=1",
          "eval_every=1000", "save_params=true", "log_level=info", "console=false", "stop.max_iterations=10"]
TIMEOUT_S = 300


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{(p.stdout + p.stderr)[-3000:]}")
    return p.stdout + p.stderr


def main():
    shutil.rmtree(SCRATCH, ignore_errors=True)
    os.makedirs(SCRATCH)
    r = subprocess.run([SLURM, "up", SLURM_DIR], capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stderr.strip())
        sys.exit(77)
    if r.returncode != 0:
        fail(f"one-node.sh up exited {r.returncode}: {r.stderr}")
    atexit.register(lambda: subprocess.run([SLURM, "down", SLURM_DIR], capture_output=True))
    env = dict(os.environ, SLURM_CONF=os.path.join(SLURM_DIR, "slurm.conf"), OPENBLAS_NUM_THREADS="1")

    one_dir = os.path.join(SCRATCH, "one")
    run([TANDEM, "run", MLP] + COMMON + ["--out", one_dir])
    srun_dir = os.path.join(SCRATCH, "srun")
    # --overcommit: more tasks than this machine's cores (the ranks mostly wait).
    out = run(["srun", "--mpi=pmix", "-n", "3", "--overcommit", "--kill-on-bad-exit=1", TANDEM, "run", MLP] +
              COMMON + ["plan.kind=fixed", "plan.batches=5,41,82", "emulation.speeds={1, 0.5, 0.25}",
                        "--out", srun_dir], env=env)
    if "3 workers" not in out:
        fail(f"srun's 3 tasks did not form one job of 3 workers:\n{out[-3000:]}")
    d = scaled_difference(params(one_dir), params(srun_dir))
    if not d < 1e-5:
        fail(f"3 ranks under srun do not train to one worker's parameters: scaled difference {d}")
    rows = []
    with open(os.path.join(srun_dir, "trace.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("event") == "iteration":
                rows.append(j)
    if not rows or [w["speed"] for w in rows[0]["workers"]] != [1, 0.5, 0.25]:
        fail(f"per-worker speeds under srun: {rows[0]['workers'] if rows else 'no iterations'}")
    if [w["local_batch"] for w in rows[0]["workers"]] != [5, 41, 82]:
        fail(f"the fixed plan under srun: {[w['local_batch'] for w in rows[0]['workers']]}")
    print(f"ok: srun --mpi=pmix -n 3: one job of 3 workers, skewed plan 5,41,82, parameters within {d:.2g} "
          "(scaled) of one worker's; per-worker speeds checked against srun's task count")


if __name__ == "__main__":
    main()
