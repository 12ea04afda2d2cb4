"""Run in a subprocess by test_tilelang_c_checks.py: unique stores that collide at every pair of positions.

A crash here (a double free, a read of freed memory) ends only this process, so the test sees it as an exit
status instead of losing its runner. Prints one line per failed expectation and ``ok <count>`` at the end.
"""
import sys

import numpy as np

import intent_trace as intent
from intent_trace import I


@intent.kernel
def into_view(x: I.In[I.f32, ("N",)], idx: I.In[I.i32, ("N",)], y: I.Out[I.f32, ("N",)]):
    y[idx[:]] = x[:]  # the mask of written elements has a run-time size: it lives on the heap


@intent.kernel
def into_buffer(idx: I.In[I.i32, ("N",)], y: I.InOut[I.i32, ("N",)]):
    b = I.buffer((idx.shape[0],), I.i32, init=y[:])
    b[idx[:]] = I.cast(I.indices(I.domain(0, idx.shape[0])), I.i32)
    y[:] = b[:]


@intent.kernel
def into_static(idx: I.In[I.i32, (8,)], y: I.Out[I.i64, (8,)]):
    y[idx[:]] = I.cast(idx[:], I.i64) * 3  # a static mask: on the stack


def main(sizes) -> int:
    programs = {name: intent.compile(k, target="tilelang-c") for name, k in
                (("into_view", into_view), ("into_buffer", into_buffer), ("into_static", into_static))}
    count, bad = 0, 0
    for n in sizes:
        for i in range(n):
            for j in range(i + 1, n):
                for repeated in (i, j):  # position j repeats element i's target, or i repeats j's
                    idx = np.arange(n, dtype=np.int32)[::-1].copy()
                    idx[j if repeated == i else i] = idx[repeated]
                    calls = [("into_view", (np.arange(n, dtype=np.float32), idx, np.full(n, -7.0, np.float32))),
                             ("into_buffer", (idx, np.full(n, -7, np.int32)))]
                    if n == 8:
                        calls.append(("into_static", (idx, np.full(n, -7, np.int64))))
                    for name, args in calls:
                        before = [a.copy() for a in args]
                        count += 1
                        try:
                            programs[name](*args)
                            print(f"{name} n={n} idx={idx.tolist()}: no error")
                            bad += 1
                        except RuntimeError as e:
                            if "not injective" not in str(e):
                                print(f"{name} n={n} idx={idx.tolist()}: wrong message {e}")
                                bad += 1
                        if any(not np.array_equal(a, b) for a, b in zip(args, before)):
                            print(f"{name} n={n} idx={idx.tolist()}: arguments changed")
                            bad += 1
    print(f"ok {count}" if not bad else f"failed {bad} of {count}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main([int(a) for a in sys.argv[1:]]))
