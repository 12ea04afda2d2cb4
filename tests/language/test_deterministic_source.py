"""Generated source does not depend on the process's hash seed: the cpu target's disk cache compares the source it
regenerates with the file it wrote, so text that varied by process (a symbolic extent printed from a frozenset's
order) would rebuild every kernel in every new process, and two processes would race on one file."""
import os
import subprocess
import sys

_PROBE = """
import sys
sys.path[:0] = ["tests/oracle", "tests/kernels", "tests"]
import intent_trace as intent
from test_generic_allocations import runtime_extents
import test_ragged
from intent_trace.kernel import Kernel
kernels = [runtime_extents] + [v for v in vars(test_ragged).values() if isinstance(v, Kernel)]
for k in kernels:
    try:
        g = k.trace()
    except TypeError:  # a kernel that needs constexprs: its other kernels still probe the printer
        continue
    print(k.name)
    print(g)
    print(intent.compile(k, target="cpu").source)
"""


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _source(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_graphs_and_cpu_source_are_the_same_under_every_hash_seed():
    first = _source("1")
    assert "runtime_extents" in first and "def " in first
    for seed in ("2", "3", "12345"):
        assert _source(seed) == first, f"PYTHONHASHSEED={seed} printed another graph or generated another source"
