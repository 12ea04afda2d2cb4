"""pytest plugin: how long the emulated Metal cases spent compiling, at the end of a run.

The test target ``tilelang-metal-emulated`` (tilelang-metal's programs run by the Metal emulator,
``intent.compile(k, target="tilelang-metal", emulate=True)``) is the shared fixture's own (tests/conftest.py): it runs
by default on a subset of the cases (tests/metal_subset.py), and on all of them when named:

    INTENT_TRACE_TEST_TARGETS=tilelang-metal-emulated PYTHONPATH=tools/pytest_plugins \\
        .venv/bin/python -m pytest -p emulate_metal tests/kernels

The executables are tilelang-metal's (``.target`` is "tilelang-metal"). Kernels that use f64 are not run on it (Metal
has no 64-bit float: a LoweringError names the dtype).
"""


def pytest_terminal_summary(terminalreporter):
    from intent_trace.backends.tilelang.metal_emulation.kernel import COMPILE_SECONDS

    n = len(COMPILE_SECONDS)
    if n:
        total = sum(COMPILE_SECONDS)
        terminalreporter.write_line(f"emulated Metal: {n} kernels compiled as C++ in {total:.1f} s "
                                    f"(mean {total / n:.2f} s, max {max(COMPILE_SECONDS):.2f} s)")
