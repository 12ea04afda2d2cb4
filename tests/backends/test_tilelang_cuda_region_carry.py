"""Carried lanes on tilelang-cuda (cuda_region_carry: an ordered loop whose carry is a vector of independent lanes,
one thread a lane running the whole loop on its element; schedule/carry.py recognises it).

The program text: the Mamba-style state passing (examples/mamba_state_passing.py) gets a grid over its lanes, each
thread's carry a local, reads and writes at its own lane; near misses keep the one-thread program and say why. The
numbers: on every executable target through the shared ``target`` fixture, against the NumPy recurrence, bit for bit
(each lane's chain is the serial program's operations in the serial order), at lane counts no block divides, an empty
loop and one lane. On tilelang-c the C target runs the lane mapping emulated (a block's threads one after another).
"""
import attrs
import numpy as np
import pytest
from example_modules import example

import intent_trace as intent
from intent_trace import I

pytest.importorskip("tilelang")
from backends.tilelang_support import cuda_source, mapped_compiler
from intent_trace.backends.tilelang import cuda_region_carry, targets
from intent_trace.backends.tilelang.target import build, generate
from intent_trace.schedule import carry
from intent_trace.schedule.rows import Rejected

MAMBA = example("mamba_state_passing")
EMULATED = attrs.evolve(targets.C, carried_lanes=lambda g: cuda_region_carry.lane_plan(g, emulated=True),
                        host_workspaces=True)
LANE_TARGETS = ("tilelang-c", "tilelang-cuda")


@intent.kernel
def two_carries(x: I.In[I.f32, ("C", "D")], decay: I.In[I.f32, ("C",)], h0: I.In[I.f32, ("D",)],
                trace: I.Out[I.f32, ("C", "D")], h: I.Out[I.f32, ("D",)], g: I.Out[I.f32, ("D",)]):
    """Two carry leaves that read each other's old values (a swap): every new leaf from the old ones."""
    features = I.domain(0, x.shape[1])

    def step(c, hg):
        a, b = hg
        trace[c, features] = a - b
        return b * decay[c] + x[c, features], a

    h[features], g[features] = I.loop(I.domain(0, x.shape[0]), (h0[features], h0[features] * 0.5), step)


@intent.kernel
def lane_sum_in_loop(x: I.In[I.f32, ("C", "D")], h0: I.In[I.f32, ("D",)], h: I.Out[I.f32, ("D",)]):
    features = I.domain(0, x.shape[1])
    h[features] = I.loop(I.domain(0, x.shape[0]), h0[features],
                         lambda c, v: v + I.reduce.sum(x[c, features], axis=0))  # every lane reads every lane


@intent.kernel
def scalar_carry(x: I.In[I.f32, ("C",)], total: I.Out[I.f32, (1,)]):
    total[0] = I.loop(I.domain(0, x.shape[0]), I.cast(0.0, I.f32), lambda c, s: s + x[c])


@intent.kernel
def reads_what_it_writes(x: I.InOut[I.f32, ("C", "D")], h0: I.In[I.f32, ("D",)], h: I.Out[I.f32, ("D",)]):
    features = I.domain(0, x.shape[1])

    def step(c, v):
        x[c, features] = v
        return v + x[c, features]

    h[features] = I.loop(I.domain(0, x.shape[0]), h0[features], step)


def test_the_mamba_scan_gets_a_thread_per_lane():
    g = MAMBA.state_passing.trace()
    found = carry.recognise(g)
    assert isinstance(found, carry.CarriedLanes) and g.extents[found.lanes].extent.name == "D"
    assert found.fused == ("add", "mul") and len(found.writes) == 2
    schedule = build(g, target="tilelang-cuda").schedule
    assert schedule.mappings() == ("carried_lanes",) and schedule.general.param("lanes") == "D"
    program = generate(g, "tilelang-cuda")
    assert "T.Kernel(1, threads=1" not in program
    assert "with T.Kernel(T.max(T.ceildiv(d1, T.int64(128)), T.int64(1)), threads=128, prelude=PRELUDE) as bx:" \
        in program
    assert "T.get_thread_binding()" in program and "T.alloc_var('float32')" in program
    assert "for o6 in T.serial(d0):" in program and "p3[j9, lane2] = " in program and "p4[lane2] = " in program
    assert "T.serial(d1)" not in program  # no loop over the lanes: each thread is one
    assert "__global__" in cuda_source(program)


@pytest.mark.parametrize("kernel, why", [(lane_sum_in_loop, "op reduce"), (scalar_carry, "does not carry vectors"),
                                         (reads_what_it_writes, "of an Out view")],
                         ids=["reduction-across-lanes", "scalar-carry", "reads-what-it-writes"])
def test_near_misses_keep_one_thread_and_say_why(kernel, why):
    found = carry.recognise(kernel.trace())
    assert isinstance(found, Rejected) and why in found.reason, found
    schedule = build(kernel.trace(), target="tilelang-cuda").schedule
    if schedule.general.mapping == "serial":
        assert "not carried lanes" in schedule.general.reason


@pytest.fixture
def lanes(target, monkeypatch):
    return mapped_compiler(target, monkeypatch, EMULATED, "carried_lanes", LANE_TARGETS)


@pytest.mark.parametrize("C, D", [(37, 300), (0, 5), (9, 1), (3, 128)], ids=["tail-lanes", "no-steps", "one-lane",
                                                                             "whole-block"])
def test_state_passing_is_the_serial_recurrence_bit_for_bit(lanes, C, D):
    rng = np.random.default_rng(C + D)
    state = rng.standard_normal((C, D)).astype(np.float32)
    decay = rng.uniform(0.5, 1.0, C).astype(np.float32)
    initial = rng.standard_normal(D).astype(np.float32)
    initial[0] = np.nan  # the lane's chain carries it
    states, final = np.zeros((C, D), np.float32), np.zeros(D, np.float32)
    lanes(MAMBA.state_passing)(state, decay, initial, states, final)
    want_states, want_final = MAMBA.reference(state, decay, initial)
    assert np.array_equal(states, want_states, equal_nan=True) and np.array_equal(final, want_final, equal_nan=True)


def test_carry_leaves_update_together(lanes):
    C, D = 11, 200
    rng = np.random.default_rng(1)
    x, decay, h0 = (rng.standard_normal(s).astype(np.float32) for s in ((C, D), (C,), (D,)))
    trace, h, g = np.zeros((C, D), np.float32), np.zeros(D, np.float32), np.zeros(D, np.float32)
    lanes(two_carries)(x, decay, h0, trace, h, g)
    a, b = h0.copy(), (h0 * np.float32(0.5)).astype(np.float32)
    want = np.empty_like(trace)
    for c in range(C):
        want[c] = a - b
        a, b = (b * decay[c]).astype(np.float32) + x[c], a
    assert np.array_equal(trace, want) and np.array_equal(h, a) and np.array_equal(g, b)
