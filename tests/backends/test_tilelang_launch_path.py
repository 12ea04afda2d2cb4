"""``TileLangExecutable.launch``'s host path (issue 17: at the zoo's sizes a single call's host time is 10-30% of
it): the plan per argument shapes, the compiled module's own entry point where TileLang's adapter is TVM-FFI's,
and scratch workspaces made once per stream and reused.

Runs on tilelang-c (the C target emulating CUDA's grid mappings, torch CPU tensors standing in for the device's):
the full sum's two-kernel program has a scratch workspace (the blocks' partials), the one-kernel form and the
single-pass scan a zeroed one (a ticket, status flags: reused and zero-filled again after each call). Values are checked
against NumPy/math references (a sum within T5's bound, a parallel order not being the serial one: T10). On the
GPU the same tests under ``INTENT_TRACE_TEST_TARGETS=tilelang-cuda`` are not needed: ``tools/launch_overhead.py``
and the zoo run launch there.
"""
import math
import types

import attrs
import numpy as np
import pytest

pytest.importorskip("tilelang")
torch = pytest.importorskip("torch")

from intent_trace.backends.tilelang import cuda_reduce, cuda_scan, executable, targets  # noqa: E402
from intent_trace.backends.tilelang import target as tl_target  # noqa: E402
from schedule.reduce_kernels import full_sum  # noqa: E402

RNG = np.random.default_rng(17)
CHUNK = cuda_reduce.THREADS * cuda_reduce.UNROLL
#: CUDA's two-kernel full sum emulated on the C target, its workspaces made "on the device" (torch CPU tensors)
TWO = attrs.evolve(targets.C, multi_block=lambda g: cuda_reduce.multi_block(g, emulated=True, single_pass=False),
                   host_workspaces=True, device_tensors="cpu")
ONE = attrs.evolve(TWO, multi_block=lambda g: cuda_reduce.multi_block(g, emulated=True, single_pass=True))
SCAN = attrs.evolve(targets.C, multi_block=lambda g: cuda_scan.multi_block(g, emulated=True), host_workspaces=True,
                    device_tensors="cpu")


class _Streams:
    """A stand-in for torch's current CUDA stream: ``key()`` is (device 0, the stream set now)."""

    def __init__(self):
        self.now = 1

    def key(self):
        return 0, self.now


@pytest.fixture
def streams(monkeypatch):
    got = _Streams()
    monkeypatch.setattr(executable, "_stream_key", lambda device: got.key if device == "cpu" else None)
    return got


def _built(spec, kernel, monkeypatch):
    monkeypatch.setitem(targets.TARGETS, "tilelang-c", spec)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})
    return tl_target.build(kernel.trace(), target="tilelang-c")


def _sum_bound(x) -> float:
    return 2 * len(x) * 2.0 ** -24 * float(np.abs(x.astype(np.float64)).sum()) + 1e-30


def _made(exe, monkeypatch) -> list:
    """Every workspace list a launch gets (the maker's results, recorded)."""
    seen = []
    maker = exe._workspace_maker

    def recording(dims, spaces):
        made = maker(dims, spaces)

        def record(args):
            seen.append(made(args))
            return seen[-1]

        if hasattr(made, "after"):
            record.after = made.after
        return record

    monkeypatch.setattr(exe, "_workspace_maker", recording)
    return seen


def test_scratch_workspaces_are_reused_per_stream_and_each_call_is_right(streams, monkeypatch):
    """The two-kernel full sum's partials (a scratch workspace) are made once per stream: three calls on one stream
    (different data, so a partial left by the previous call would show) share them, a call on another stream gets
    its own, and every sum is within T5's bound of math.fsum."""
    exe = _built(TWO, full_sum, monkeypatch)
    assert [w.zeroed for w in exe.workspaces] == [False]
    seen = _made(exe, monkeypatch)
    n = 5 * CHUNK + 3
    for call, stream in enumerate((1, 1, 2, 1)):
        streams.now = stream
        x = RNG.standard_normal(n).astype(np.float32) * (call + 1)
        y = torch.full((1,), float("nan"))
        exe.launch(torch.from_numpy(x), y)
        assert abs(float(y[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x)
    first, again, other, back = (w[0] for w in seen)
    assert first is again is back and other is not first


@pytest.mark.parametrize("zero_after", [True, False])
def test_zeroed_workspaces_start_at_zero_every_call(streams, monkeypatch, zero_after):
    """A ticket (the one-kernel full sum) must start at zero. With ZERO_AFTER it is reused per stream and zero-filled
    again right after each call (zero when the call returns: the next one finds it so); without, it is fresh per
    call and shows this call's count (the blocks). A ticket that did not start at zero leaves no block last, and
    the output NaN."""
    monkeypatch.setattr(executable, "ZERO_AFTER", zero_after)
    exe = _built(ONE, full_sum, monkeypatch)
    assert any(w.zeroed for w in exe.workspaces)
    seen = _made(exe, monkeypatch)
    n = 3 * CHUNK + 5
    tickets = []
    for _ in range(3):
        x = RNG.standard_normal(n).astype(np.float32)
        y = torch.full((1,), float("nan"))
        exe.launch(torch.from_numpy(x), y)
        assert abs(float(y[0]) - math.fsum(x.astype(np.float64))) <= _sum_bound(x)
        tickets.append(seen[-1][-1])
        assert int(tickets[-1][0]) == (0 if zero_after else -(-n // CHUNK))
    assert len(exe._launches) == 1  # one plan for one argument layout
    assert len({id(t) for t in tickets}) == (1 if zero_after else 3)


def test_a_scan_whose_flags_are_zeroed_is_right_call_after_call(streams, monkeypatch):
    """The single-pass scan's ticket and status flags are reused per stream and zero-filled after each call (a
    ticket or flag left set would hand a block a tile past the end or a stale prefix): repeated launches on one
    stream, each cumsum within T5's bound per prefix of NumPy's in float64."""
    from schedule.scan_kernels import cumsum_f32

    exe = _built(SCAN, cumsum_f32, monkeypatch)
    assert exe.workspaces and all(w.zeroed for w in exe.workspaces)
    for n in (1, 3 * 3072 + 17, 3 * 3072 + 17, 7000):
        x = RNG.standard_normal(n).astype(np.float32)
        y = torch.full((n,), float("nan"))
        exe.launch(torch.from_numpy(x), y)
        want = np.cumsum(x.astype(np.float64))
        mass = np.cumsum(np.abs(x.astype(np.float64)))
        assert np.all(np.abs(y.numpy() - want) <= 2 * n * 2.0 ** -24 * mass + 1e-30)


def test_large_scratch_and_streamless_targets_allocate_per_call(monkeypatch):
    """Past REUSED_WORKSPACE_BYTES a scratch workspace is fresh per call (a cache must not pin large buffers), and so
    it is where the target has no streams (``_stream_key`` None: the C target's own memory, Metal)."""
    exe = _built(TWO, full_sum, monkeypatch)
    (n,) = [ev.extent for ev in exe.graph.extents]
    made = exe._workspace_maker({n: 5 * CHUNK + 3}, exe.workspaces)  # "cpu": no streams
    assert made(())[0] is not made(())[0]
    monkeypatch.setattr(executable, "_stream_key", lambda device: lambda: (0, 1))
    monkeypatch.setattr(executable, "REUSED_WORKSPACE_BYTES", 16)
    made = exe._workspace_maker({n: 5 * CHUNK + 3}, exe.workspaces)
    assert made(())[0] is not made(())[0]
    monkeypatch.setattr(executable, "REUSED_WORKSPACE_BYTES", 1 << 20)
    made = exe._workspace_maker({n: 5 * CHUNK + 3}, exe.workspaces)
    assert made(())[0] is made(())[0]


def test_stream_key_is_only_cuda_s():
    assert executable._stream_key("cpu") is None and executable._stream_key(None) is None


def test_the_entry_is_the_module_s_main_only_for_a_tvm_ffi_adapter_allocating_nothing():
    """TVM-FFI's adapter with no outputs of its own: the module's ``main`` (jitted first where the executable is
    one); with outputs it allocates, another adapter (the C target's Cython one), or an entry that cannot be found:
    the kernel itself."""
    calls = []
    main = types.SimpleNamespace(main=lambda *a: calls.append(a))

    class Jitted:
        def jit(self):
            return main

    def kernel(*a):
        return a

    def adapter(result_idx, module, **extra):
        return types.SimpleNamespace(result_idx=result_idx, _get_executable=lambda: module, **extra)

    kernel.adapter = adapter([], Jitted())
    assert executable._entry(kernel) is main.main
    kernel.adapter = adapter([], main)
    assert executable._entry(kernel) is main.main
    for other in (adapter([1], main), adapter([], main, _ffi_callee_allocated_output_abi=True),
                  adapter([], types.SimpleNamespace()), types.SimpleNamespace(result_idx=[])):
        kernel.adapter = other
        assert executable._entry(kernel) is kernel
    del kernel.adapter
    assert executable._entry(kernel) is kernel


def test_a_launch_reinterprets_only_where_a_dtype_differs(monkeypatch):
    """The plan says per argument which dtype the program reads it as, and None where nothing is reinterpreted (f32
    in and out): the call passes the caller's tensors as they are."""
    exe = _built(TWO, full_sum, monkeypatch)
    x = torch.from_numpy(RNG.standard_normal(100).astype(np.float32))
    y = torch.zeros(1)
    exe.launch(x, y)
    (plan,) = exe._launches.values()
    assert plan[1] is None
    assert abs(float(y[0]) - math.fsum(x.double().tolist())) <= _sum_bound(x.numpy())
