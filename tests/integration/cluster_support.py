"""What the tests of runs across hosts and under Slurm share: a run's final
parameters, how far two runs' parameters are apart, and the namespace hosts of
tools/multihost/netns-hosts.sh (exit 77, the suite's "skipped", where they cannot be
made)."""
import os
import struct
import subprocess
import sys

HOSTS = os.path.abspath("tools/multihost/netns-hosts.sh")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def params(run_dir):
    """params.f32 (save_params = true) as floats."""
    with open(os.path.join(run_dir, "params.f32"), "rb") as f:
        data = f.read()
    return struct.unpack(f"{len(data) // 4}f", data)


def scaled_difference(a, b):
    """The largest difference, relative to the largest parameter of `a`."""
    if len(a) != len(b):
        fail(f"parameter counts differ: {len(a)} and {len(b)}")
    return max(abs(x - y) for x, y in zip(a, b)) / max(1e-6, max(abs(x) for x in a))


def hosts(*args, check=True):
    """netns-hosts.sh ARGS; skips the test (77) where hosts cannot be made."""
    r = subprocess.run([HOSTS, *args], capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stderr.strip())
        sys.exit(77)
    if check and r.returncode != 0:
        fail(f"netns-hosts.sh {' '.join(args)} exited {r.returncode}: {r.stderr}")
    return r
