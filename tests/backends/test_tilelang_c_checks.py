"""tilelang-c run-time checks: a failed check leaves the kernel cleanly (no read of freed memory, no double free),
raises the right exception and changes none of the caller's arrays."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("tilelang")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_unique_store_collisions_at_every_pair_raise_and_leave_arguments_unchanged():
    """TileLang distributes an ``if`` over the statements of its body, re-evaluating the condition before each:
    a check whose condition reads the heap mask it then frees read freed memory and freed it twice (SIGABRT).
    Every pair of positions of several sizes collides, in a subprocess a crash cannot take down."""
    probe = os.path.join(ROOT, "tests", "backends", "collision_probe.py")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    sizes = ["2", "3", "5", "7", "8", "9", "16", "33"]
    done = subprocess.run([sys.executable, probe, *sizes], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    lines = [line for line in done.stdout.splitlines() if line]
    assert done.returncode == 0 and lines and lines[-1].startswith("ok "), \
        f"exit status {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
