"""Shared by the reduction tests (test_reduce_*.py): NumPy dtypes of the I dtypes, axis names and the
all-of-rank index tuple."""

import ml_dtypes
import numpy as np

from intent_trace import I

NP = {I.f16: np.float16, I.bf16: ml_dtypes.bfloat16, I.f32: np.float32, I.f64: np.float64, I.bool: np.bool_,
      I.i8: np.int8, I.i16: np.int16, I.i32: np.int32, I.i64: np.int64, I.index: np.int64,
      I.u8: np.uint8, I.u16: np.uint16, I.u32: np.uint32, I.u64: np.uint64}
NAMES = ("A", "B", "C")


def _all(rank: int) -> tuple:
    return (slice(None),) * rank
