"""The single-pass scan's knobs (cuda_scan.Lookback, timed side by side by tools/scan_ab.py, issue 17): the tile
(threads x unroll), the tile staged through shared memory or read and written in runs, the window taken at its
nearest inclusive prefix (a warp-wide poll) and a back-off between polls. Each variant's program text and its
ptxas report for sm_90a (no spills), and its numbers on the grid targets against NumPy: on tilelang-c the CUDA
mapping emulated (the tile and staging change the program; the window and back-off are waits, which the emulation
has none of), on tilelang-cuda the real program where it is a test target:

    INTENT_TRACE_TEST_TARGETS=tilelang-cuda .venv/bin/python -m pytest -q -p no:cacheprovider \
        tests/backends/test_tilelang_cuda_scan_variants.py
"""
import re

import attrs
import numpy as np
import pytest

pytest.importorskip("tilelang")
from backends.tilelang_support import assembled, cuda_source
from conftest import EXECUTABLE_TARGETS
from intent_trace.backends.tilelang import cuda_scan, targets
from intent_trace.backends.tilelang import target as tl_target
from intent_trace.backends.tilelang.program import lower
from schedule.scan_kernels import cummax_f32, cumsum_f32, cumsum_i32

RNG = np.random.default_rng(17)
U32 = 2.0 ** -24
L = cuda_scan.Lookback
#: a small tile (many tiles, past a look-back window, cheaply), the other tiles tools/scan_ab.py times, each knob
VARIANTS = {"64x4": L(64, 4), "512x8": L(512, 8), "256x16": L(256, 16), "unstaged": L(staged=False),
            "64x4_unstaged": L(64, 4, staged=False), "nearest": L(nearest=True), "backoff": L(backoff_ns=100),
            "64x4_nearest_backoff": L(64, 4, nearest=True, backoff_ns=64),
            "cub_sm90": L(128, 24, backoff_ns=688, delay_ns=1140)}
GRID_TARGETS = [t for t in EXECUTABLE_TARGETS if t in ("tilelang-c", "tilelang-cuda")]


def _cuda(lookback):
    return attrs.evolve(targets.CUDA, multi_block=lambda g: cuda_scan.multi_block(g, lookback=lookback))


def _use(target, lookback, monkeypatch):
    if target == "tilelang-c":
        spec = attrs.evolve(targets.C, multi_block=lambda g: cuda_scan.multi_block(g, emulated=True,
                                                                                  lookback=lookback),
                            host_workspaces=True)
    else:
        spec = _cuda(lookback)
    monkeypatch.setitem(targets.TARGETS, target, spec)
    monkeypatch.setattr(tl_target, "_EXECUTABLES", {})


def _prefix_bound(terms: np.ndarray) -> np.ndarray:
    """T5 per prefix: γ_{i+1} · Σ_{k<=i} |t_k| and the result's own rounding."""
    n = np.arange(1, terms.size + 1)
    return n * U32 / (1 - n * U32) * np.cumsum(np.abs(terms)) + U32 * np.abs(np.cumsum(terms))


# --- the programs ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", VARIANTS)
def test_the_tile_sizes_the_grid_the_workspace_and_the_shared_tile(name):
    lookback = VARIANTS[name]
    program = lower(cumsum_f32.trace(), _cuda(lookback))
    tile = lookback.threads * lookback.unroll
    (status,) = program.workspaces
    assert status.shape == (f"d0/{tile}+1",) and status.zeroed
    body = program.text[program.text.index("def kernel("):]
    assert (f"with T.Kernel(T.max(T.ceildiv(d0, T.int64({tile})), T.int64(1)), threads={lookback.threads}, "
            "prelude=PRELUDE) as bx:") in body
    assert body.count("p0[") == 1 and body.count("p1[") == 1
    staged = f"T.alloc_shared(({tile + tile // 32},), 'float32')"
    assert body.count(staged) == (2 if lookback.staged else 0)
    if lookback.staged:  # striped: element v * threads + tx
        assert re.search(rf"e\d+ = v\d+ \* {lookback.threads} \+ tx\d+", body)
    else:  # each thread its run straight from the source and to the output
        assert re.search(rf"j\d+ = o\d+ \+ T.Cast\('int64', tx\d+\) \* T.int64\({lookback.unroll}\) \+", body)
    wait = "itg_window64'" if lookback.nearest else "itg_wait64'"
    assert body.count(wait) == 1 and body.count("itg_w") == 1
    assert re.search(rf"{wait}, T.access_ptr\(W0\[0\], 'rw'\), j\d+, {lookback.backoff_ns}\)", body)


def test_the_nearest_window_polls_the_warp_until_the_lanes_up_to_an_inclusive_prefix_are_set():
    """The window's lanes load their statuses together until every lane up to the first holding an inclusive
    prefix (all 32 where none does) has one: two ballots a poll; a 64-bit scan fences once after the window."""
    source = cuda_source(lower(cumsum_f32.trace(), _cuda(L(nearest=True, backoff_ns=100))).text)
    settled, window = source.index("bool itg_settled("), source.index("int64_t itg_window64(")
    assert settled < window  # the helper before its caller
    assert source[settled:window].count("__ballot_sync(0xffffffffu") == 2 and "i ^ (i - 1u)" in source
    body = source[window:source.index("}", source.index("return w;"))]
    assert "ld.relaxed.gpu.global.s64" in body and "__nanosleep(ns)" in body and "fence" not in body
    assert "itg_window64((&(W0[(int64_t)0])), j" in source and ", 100);" in source
    wide = cuda_source(lower(cumsum_i32.trace(), _cuda(L(nearest=True))).text)
    body = wide[wide.index("int itg_window("):]
    body = body[:body.index("return v; }")]
    assert "ld.relaxed.gpu.global.s32" in body and body.count("fence.acq_rel.gpu") == 1


def test_the_spin_backs_off_only_when_asked():
    spin = cuda_source(lower(cumsum_f32.trace(), _cuda(L())).text)
    assert "itg_wait64((&(W0[(int64_t)0])), j" in spin and re.search(r"itg_wait64\(\(&\(W0\[\(int64_t\)0\]\)\), "
                                                                     r"j\d+, 0\)", spin)
    backoff = cuda_source(lower(cumsum_f32.trace(), _cuda(L(backoff_ns=200))).text)
    assert re.search(r"itg_wait64\(\(&\(W0\[\(int64_t\)0\]\)\), j\d+, 200\)", backoff)


def test_the_delay_sleeps_once_before_the_first_window_of_a_tile_past_the_first():
    body = lower(cumsum_f32.trace(), _cuda(L(delay_ns=1140))).text
    assert re.search(r"if t\d+ > T.int64\(0\):\n\s+T.evaluate\(T.call_extern\('int32', 'itg_sleep', 1140\)\)\n"
                     r"\s+for w\d+ in T.serial", body)
    assert body.count("itg_sleep'") == 1 and "__nanosleep(ns)" in body
    assert "itg_sleep" not in lower(cumsum_f32.trace(), _cuda(L())).text


@pytest.mark.parametrize("name", VARIANTS)
def test_ptxas_for_sm90_no_spills(name):
    source = cuda_source(lower(cumsum_f32.trace(), _cuda(VARIANTS[name])).text)
    got = assembled(source)  # the local nvcc (ptxas' report), where there is one
    if got is not None:
        assert all(spills == (0, 0) for spills in got.spills.values()), got.spills


def test_a_block_is_whole_warps_and_at_most_32_of_them_and_the_other_knobs_are_in_range():
    for threads in (0, 48, 1056):
        with pytest.raises(ValueError, match=f"a look-back block of {threads} threads"):
            L(threads, 4)
    for bad in ({"unroll": 0}, {"backoff_ns": -1}, {"delay_ns": -5}):
        with pytest.raises(ValueError, match="unroll must be at least 1 and its sleeps at least 0 ns"):
            L(**bad)


# --- the numbers -------------------------------------------------------------------------------------------------

#: 64x4 (a tile of 256): 33 windows' worth of tiles and a tail; the others: past a window (32 tiles) with a tail
def _length(lookback) -> int:
    return lookback.threads * lookback.unroll * (33 if lookback.threads == 64 else 1) * 33 + 5


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("grid_target", GRID_TARGETS)
def test_cumsum_cummax_and_integer_sums_against_numpy(grid_target, name, monkeypatch):
    lookback = VARIANTS[name]
    _use(grid_target, lookback, monkeypatch)
    for n in (0, 1, lookback.threads * lookback.unroll - 1, _length(lookback)):
        x = (RNG.standard_normal(n) * 10 ** RNG.uniform(-3, 3)).astype(np.float32)
        y = np.full(n, np.nan, np.float32)
        exe = tl_target.build(cumsum_f32.trace(), target=grid_target)
        assert exe.schedule.general.mapping == "multi_block_scan"
        assert exe.schedule.general.param("threads") == lookback.threads
        assert exe.schedule.general.param("per_thread") == lookback.unroll
        exe(x, y)
        assert np.all(np.abs(y - np.cumsum(x.astype(np.float64))) <= _prefix_bound(x.astype(np.float64)))
        m = np.zeros(n, np.float32)
        tl_target.build(cummax_f32.trace(), target=grid_target)(x, m)
        assert np.array_equal(m, np.maximum.accumulate(x))
        i = RNG.integers(-(2 ** 31), 2 ** 31, n, dtype=np.int64).astype(np.int32)
        z = np.zeros(n, np.int64)
        tl_target.build(cumsum_i32.trace(), target=grid_target)(i, z)
        assert np.array_equal(z, np.cumsum(i.astype(np.int64)))


@pytest.mark.parametrize("name", ["64x4", "64x4_unstaged", "64x4_nearest_backoff"])
@pytest.mark.parametrize("grid_target", GRID_TARGETS)
def test_nan_at_tile_and_window_boundaries(grid_target, name, monkeypatch):
    """A NaN at a tile's last and next tile's first element, and past a look-back window (tile 32) and 32 windows
    (tile 1024): finite before it, NaN from it on."""
    lookback = VARIANTS[name]
    _use(grid_target, lookback, monkeypatch)
    tile, n = lookback.threads * lookback.unroll, _length(lookback)
    for at in (tile - 1, tile, tile * 32 + 3, tile * 1024 + 1, n - 1):
        x = RNG.standard_normal(n).astype(np.float32)
        x[at] = np.nan
        y = np.zeros(n, np.float32)
        tl_target.build(cumsum_f32.trace(), target=grid_target)(x, y)
        assert not np.isnan(y[:at]).any() and np.isnan(y[at:]).all()
