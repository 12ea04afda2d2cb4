"""Shared fixtures: every kernel test runs on every executable target through ``target``/``run``."""
from __future__ import annotations

import os

os.environ.setdefault("INTENT_TRACE_VALIDATE", "1")  # validate every traced graph against the registry

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

import intent_trace as intent  # noqa: E402
import metal_source  # noqa: E402
import metal_subset  # noqa: E402

settings.register_profile("ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: tilelang-metal's programs run by the Metal emulator on this machine (``intent.compile(k, target="tilelang-metal",
#: emulate=True)``), under a name of the tests' own (not one of intent.targets(): a kernel test builds for it).
EMULATED_METAL = "tilelang-metal-emulated"
# Targets that execute on this machine (no GPU): each kernel test runs on all of them (emulated Metal where Metal
# can: no f64; below). INTENT_TRACE_TEST_TARGETS (comma-separated) picks others, e.g. tilelang-cuda on a GPU machine.
DEFAULT_TEST_TARGETS = ("generic", "cpu", "tilelang-c", EMULATED_METAL)
_CHOSEN = os.environ.get("INTENT_TRACE_TEST_TARGETS")
EXECUTABLE_TARGETS = tuple(t for t in (_CHOSEN or ",".join(DEFAULT_TEST_TARGETS)).split(",") if t)
# GPU-only test modules are collected only where their target is among the test targets.
collect_ignore = [] if "tilelang-cuda" in EXECUTABLE_TARGETS else ["backends/test_tilelang_cuda.py",
                                                                   "backends/test_tilelang_cuda_torch.py"]


def _register_emulated_metal() -> None:
    from intent_trace import compiler
    from intent_trace.backends.tilelang.metal_emulation.executable import require_runtime
    from intent_trace.backends.tilelang.target import build

    def builder(graph, **options):
        return build(graph, target="tilelang-metal", emulate=True, **options)

    builder.require_runtime = require_runtime
    compiler.register_target(EMULATED_METAL, builder)


_register_emulated_metal()
_unknown = set(EXECUTABLE_TARGETS) - set(intent.targets()) - {EMULATED_METAL}
if _unknown:
    raise RuntimeError(f"INTENT_TRACE_TEST_TARGETS names targets this build lacks: {sorted(_unknown)}")


@pytest.fixture(params=EXECUTABLE_TARGETS)
def target(request) -> str:
    return request.param


@pytest.fixture
def run(target, request):
    """``run(kernel, *args, **constexprs)`` compiles for the current target and calls it. On tilelang-c each
    kernel is also lowered to Metal source, checked when the test ends (metal_source.py). Where the test's emulated
    Metal case runs, its program is lowered and compiled for the emulator meanwhile, on the core the serial suite
    leaves idle, and that case waits for it."""
    pending = []
    prefetch = metal_subset.selected_sibling(request.node)

    def run(kernel, *args, **constexprs):
        if target == "tilelang-c":
            pending.append(metal_source.CHECK.submit(kernel, constexprs))
        if prefetch and target != EMULATED_METAL:
            metal_source.CHECK.prefetch(kernel, constexprs)
        if target == EMULATED_METAL:
            metal_source.CHECK.wait_prefetch(kernel, constexprs)
        return intent.compile(kernel, target=target, **constexprs)(*args)

    yield run
    for check in pending:
        if check is not None:
            check.wait()


def pytest_collection_modifyitems(config, items):
    """Emulated Metal cases run where metal_subset.py says (every case but f64; a subset on request)."""
    keep, drop = metal_subset.select(items, EMULATED_METAL, full=os.environ.get("INTENT_TRACE_METAL_SUBSET") != "1")
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_sessionfinish(session, exitstatus):
    metal_source.CHECK.close()


def bits_equal(a, b) -> bool:
    """Bitwise equality (NaN payloads and signed zeros included)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    u = np.dtype(f"u{a.dtype.itemsize}")
    return bool(np.array_equal(np.ascontiguousarray(a).view(u), np.ascontiguousarray(b).view(u)))
