"""Kernels whose printed KIR is compared verbatim with tests/graph/golden/*.txt.

Source lines appear in the print: append new kernels at the end and never move existing ones
(regenerate the golden files deliberately, and review them, when you must).
"""
from __future__ import annotations

import intent_trace as intent
from intent_trace import I


# 1. Views, named extents, a runtime scalar, an explicit broadcast, a helper.
@intent.fn
def softplus(v):
    return I.log1p(I.exp(v))


@intent.kernel
def scale_rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M", "N")], scale: I.f32):
    rows = I.domain(0, x.shape[0])
    cols = I.domain(0, x.shape[1])
    y[rows, cols] = softplus(x[rows, cols]) * scale


# 2. Coordinate provenance: subregions, I.indices, shape transforms, a reversed coordinate.
@intent.fn
def window_coords(window):
    return I.transpose(I.reshape(I.indices(window), (2, 3)))


@intent.kernel
def window_provenance(x: I.In[I.f32, ("N",)], coords: I.Out[I.index, (3, 2)], y: I.Out[I.f32, ("N",)],
                      start: I.index):
    n = x.shape[0]
    points = I.domain(0, n)
    window = points[start:start + 6]
    coords[:, :] = window_coords(window)
    for ordinal in points:
        i = n - 1 - ordinal
        y[i] = x[ordinal]


# 3. Ordered control: a tuple carry, early exit, a structured if.
@intent.kernel
def first_over(x: I.In[I.f32, ("N",)], found: I.Out[I.index, (1,)], total: I.Out[I.f32, (1,)],
               limit: I.f32):
    def step(i, carry):
        acc, where = carry
        I.break_(when=acc + x[i] > limit, carry=(acc, i))
        I.continue_(when=x[i] < 0.0)
        return acc + x[i], where

    acc, where = I.loop(I.domain(0, x.shape[0]), (I.cast(0.0, I.f32), I.cast(-1, I.index)), step)
    found[0] = where
    total[0] = I.if_(where >= 0, lambda: acc, lambda: acc * -1.0)


# 4. A while loop over a record carry, selected by constexprs (bool and enum).
class Rounding(I.Enum):
    DOWN = "down"
    NEAREST = "nearest"


@intent.kernel
def halvings(v: I.In[I.i32, ("N",)], steps: I.Out[I.i32, ("N",)], FLOOR: I.Constexpr[bool] = True,
             MODE: I.Constexpr[Rounding] = Rounding.DOWN):
    for i in I.parallel(I.domain(0, v.shape[0])):
        def cond(s):
            return s.value > 1

        def body(s):
            half = s.value // 2 if MODE == Rounding.DOWN else (s.value + 1) // 2
            return I.record(value=half, count=s.count + 1)

        out = I.while_(cond, body, I.record(value=v[i], count=I.cast(0, I.i32)))
        steps[i] = out.count if FLOOR else out.count + 1


# 5. Data-dependent indexing in a parallel body, join, full, select and casts.
@intent.kernel
def gather_pairs(idx: I.In[I.i32, ("K",)], table: I.In[I.f16, ("N", 4)], out: I.Out[I.f32, ("K", 4, 2)]):
    cols = I.domain(0, 4)
    for k in I.parallel(I.domain(0, idx.shape[0])):
        row = I.cast(table[idx[k], cols], I.f32)
        clipped = I.select(row > 0.0, row, I.full((4,), 0.0, I.f32))
        out[k, cols, :] = I.join(row, clipped)


GOLDEN = {
    "scale_rows": (scale_rows, {}),
    "window_provenance": (window_provenance, {}),
    "first_over": (first_over, {}),
    "halvings": (halvings, {"FLOOR": False, "MODE": Rounding.NEAREST}),
    "gather_pairs": (gather_pairs, {}),
}
