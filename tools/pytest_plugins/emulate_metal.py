"""pytest plugin: a test target ``tilelang-metal-emulated``, the real tilelang-metal programs run by the Metal
emulator (``intent.compile(k, target="tilelang-metal", emulate=True)``), so the kernel suite can run them on any OS:

    INTENT_TRACE_TEST_TARGETS=tilelang-metal-emulated PYTHONPATH=tools/pytest_plugins \\
        .venv/bin/python -m pytest -p emulate_metal tests/kernels

The target name exists only for the tests' ``target`` fixture; the executables are tilelang-metal's (``.target`` is
"tilelang-metal"). Kernels that use f64 fail by design (Metal has no 64-bit float: a LoweringError names the dtype).
"""
import importlib

from intent_trace import compiler
from intent_trace.backends.tilelang.metal_emulation.executable import require_runtime
from intent_trace.backends.tilelang.target import build

registry = importlib.import_module("intent_trace.targets")  # the module: the package also has a function targets()

NAME = "tilelang-metal-emulated"


def _build(graph, **options):
    return build(graph, target="tilelang-metal", emulate=True, **options)


_build.require_runtime = require_runtime
registry._TARGET_MODULES[NAME] = "intent_trace.backends.tilelang.registration"
compiler.register_target(NAME, _build)


def pytest_terminal_summary(terminalreporter):
    from intent_trace.backends.tilelang.metal_emulation.kernel import COMPILE_SECONDS

    n = len(COMPILE_SECONDS)
    if n:
        total = sum(COMPILE_SECONDS)
        terminalreporter.write_line(f"emulated Metal: {n} kernels compiled as C++ in {total:.1f} s "
                                    f"(mean {total / n:.2f} s, max {max(COMPILE_SECONDS):.2f} s)")
