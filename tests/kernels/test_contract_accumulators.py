"""Contraction accumulators (spec §10, numerics T5) on every executable target: empty reductions give the
accumulator's zeros, narrow float operands with f32 and narrow accumulators, operands rounded to a narrower
accumulator first, integer accumulators exact and wrapping modulo 2^bits, integer operands with a float
accumulator.

References are independent of the library (contract_support.py): exact sums by explicit loops, held to T5's
bound for float accumulators and equal modulo 2^bits for integer ones.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import intent_trace as intent
from contract_support import MATMUL, NP, assert_exact_mod, assert_within_gamma, floats
from float_reference import wrap_int
from intent_trace import I


# --- empty reductions ------------------------------------------------------------------------------------------

@intent.kernel
def empty_k(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], f: I.Out[I.f32, ("M", "N")],
            h: I.Out[I.f16, ("M", "N")], i: I.Out[I.i32, ("M", "N")]):
    x, y = a[:, :], b[:, :]
    f[:, :] = I.matmul(x, y, acc_dtype=I.f32)
    h[:, :] = I.matmul(x, y, acc_dtype=I.f16)
    i[:, :] = I.contract(x, y, reduce=((1, 0),), acc_dtype=I.i32)


def test_contract_empty_reduction_gives_accumulator_zeros(run):
    a, b = np.zeros((3, 0), np.float16), np.zeros((0, 2), np.float16)
    f, h, i = np.full((3, 2), np.nan, np.float32), np.full((3, 2), np.nan, np.float16), np.full((3, 2), 7, np.int32)
    run(empty_k, a, b, f, h, i)
    for out in (f, h, i):
        assert np.array_equal(out, np.zeros_like(out)) and not np.any(np.signbit(out.astype(np.float64)))


@intent.kernel
def empty_one_of_two(a: I.In[I.f32, (2, "K", 3)], b: I.In[I.f32, ("K", 3)], y: I.Out[I.f32, (2,)]):
    y[:] = I.contract(a[:, :, :], b[:, :], reduce=((1, 0), (2, 1)), acc_dtype=I.f32)


def test_contract_empty_reduction_among_several_pairs(run):
    y = np.full(2, np.nan, np.float32)
    run(empty_one_of_two, np.zeros((2, 0, 3), np.float32), np.zeros((0, 3), np.float32), y)
    assert np.array_equal(y, np.zeros(2, np.float32))


# --- narrow floats and integers ---------------------------------------------------------------------------------

@intent.kernel
def narrow_k(a: I.In[I.f16, ("M", "K")], b: I.In[I.f16, ("K", "N")], wide: I.Out[I.f32, ("M", "N")],
             narrow: I.Out[I.f16, ("M", "N")]):
    x, y = a[:, :], b[:, :]
    wide[:, :] = I.matmul(x, y, acc_dtype=I.f32)
    narrow[:, :] = I.matmul(x, y, acc_dtype=I.f16)


@intent.kernel
def narrow_bf(a: I.In[I.bf16, ("M", "K")], b: I.In[I.bf16, ("K", "N")], wide: I.Out[I.f32, ("M", "N")],
              narrow: I.Out[I.bf16, ("M", "N")]):
    x, y = a[:, :], b[:, :]
    wide[:, :] = I.matmul(x, y, acc_dtype=I.f32)
    narrow[:, :] = I.matmul(x, y, acc_dtype=I.bf16)


@pytest.mark.parametrize("dt", [I.f16, I.bf16], ids=str)
def test_contract_narrow_operands_with_f32_and_narrow_accumulators(run, dt):
    rng = np.random.default_rng(12)
    a = (rng.standard_normal((4, 19)) * 4).astype(np.float32).astype(NP[dt])
    b = (rng.standard_normal((19, 3)) * 4).astype(np.float32).astype(NP[dt])
    wide, narrow = np.zeros((4, 3), np.float32), np.zeros((4, 3), NP[dt])
    run(narrow_k if dt is I.f16 else narrow_bf, a, b, wide, narrow)
    assert_within_gamma(wide, a, b, *MATMUL, I.f32)
    assert_within_gamma(narrow, a, b, *MATMUL, dt)


@intent.kernel
def f32_to_bf16(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], y: I.Out[I.bf16, ("M", "N")]):
    y[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.bf16)


def test_contract_operands_are_rounded_to_a_narrower_accumulator_first(run):
    rng = np.random.default_rng(13)
    a, b = floats(rng, (3, 11)), floats(rng, (11, 2))
    y = np.zeros((3, 2), ml_dtypes.bfloat16)
    run(f32_to_bf16, a, b, y)
    ra = a.astype(ml_dtypes.bfloat16)  # RNE f32 -> bf16 (T3), then products and sums in bf16's bound
    rb = b.astype(ml_dtypes.bfloat16)
    assert_within_gamma(y, ra, rb, *MATMUL, I.bf16)


@intent.kernel
def int8_k(a: I.In[I.i8, ("M", "K")], b: I.In[I.i8, ("K", "N")], y: I.Out[I.i32, ("M", "N")]):
    y[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.i32)


def test_contract_int8_operands_with_i32_accumulator_are_exact(run):
    rng = np.random.default_rng(14)
    a = rng.integers(-128, 128, (5, 23)).astype(np.int8)
    b = rng.integers(-128, 128, (23, 4)).astype(np.int8)
    y = np.zeros((5, 4), np.int32)
    run(int8_k, a, b, y)
    assert_exact_mod(y, a, b, *MATMUL, I.i32)


@intent.kernel
def int8_wrap(x: I.In[I.i8, (2, 1)], z: I.In[I.i8, (1, 3)], y: I.Out[I.i32, (2, 3)], n: I.index):
    a = x[:, :] + I.zeros((2, n), I.i8)  # [2, n]: every row constant
    b = z[:, :] + I.zeros((n, 3), I.i8)  # [n, 3]
    y[:, :] = I.matmul(a, b, acc_dtype=I.i32)


def test_contract_int8_with_i32_accumulator_wraps_modulo_2_32(run):
    x = np.array([[-128], [127]], np.int8)
    z = np.array([[-128, 127, -1]], np.int8)
    n = 140_000  # 140000 * 16384 > 2^31: the sums wrap
    y = np.zeros((2, 3), np.int32)
    run(int8_wrap, x, z, y, n)
    want = np.array([[wrap_int(n * int(p) * int(q), np.int32) for q in z[0]] for p in x[:, 0]], np.int32)
    assert np.array_equal(y, want)
    assert y[0, 0] == 2 ** 32 - n * 16384 or y[0, 0] == n * 16384 - 2 ** 32  # really wrapped


@intent.kernel
def int64_k(a: I.In[I.i32, (1, 3)], b: I.In[I.i32, (3, 1)], y: I.Out[I.i64, (1, 1)]):
    y[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.i64)


def test_contract_i64_accumulator_wraps_modulo_2_64(run):
    lo, hi = -2 ** 31, 2 ** 31 - 1
    a = np.array([[lo, lo, hi]], np.int32)
    b = np.array([[lo], [lo], [hi]], np.int32)
    y = np.zeros((1, 1), np.int64)
    run(int64_k, a, b, y)
    assert int(y[0, 0]) == wrap_int(2 * 2 ** 62 + hi * hi, np.int64)


@intent.kernel
def uint_k(a: I.In[I.u8, ("K",)], b: I.In[I.u8, ("K",)], y: I.Out[I.u16, (1,)]):
    y[0] = I.dot(a[:], b[:], acc_dtype=I.u16)


def test_contract_unsigned_accumulator_wraps(run):
    a = np.full(5, 255, np.uint8)
    y = np.zeros(1, np.uint16)
    run(uint_k, a, a, y)
    assert int(y[0]) == (5 * 255 * 255) % 2 ** 16


@intent.kernel
def int_to_float(a: I.In[I.i16, ("M", "K")], b: I.In[I.i16, ("K", "N")], y: I.Out[I.f64, ("M", "N")]):
    y[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f64)


def test_contract_integer_operands_with_a_float_accumulator(run):
    rng = np.random.default_rng(15)
    a = rng.integers(-30000, 30000, (3, 8)).astype(np.int16)
    b = rng.integers(-30000, 30000, (8, 2)).astype(np.int16)
    y = np.zeros((3, 2))
    run(int_to_float, a, b, y)
    assert np.array_equal(y, a.astype(np.int64) @ b.astype(np.int64))  # every partial sum is exact in f64
