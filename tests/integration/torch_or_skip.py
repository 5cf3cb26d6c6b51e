"""PyTorch for the tests that check tandem against it, or the test is skipped.

A pyenv python3 may come first on PATH without torch while Debian's /usr/bin/python3
has python3-torch: the test then runs again under Debian's. Without torch anywhere it
exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77).

    from torch_or_skip import torch  # first, before anything that needs it
"""
import os
import sys

try:
    import torch  # noqa: F401
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: no torch for this python3 (apt-get install python3-torch)")
    sys.exit(77)

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# tools/golden's PyTorch models (the GPT, the nn.Sequential of a safetensors file).
sys.path.insert(0, os.path.join(ROOT, "tools", "golden"))
