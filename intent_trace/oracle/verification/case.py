"""A verification case as data, and the seeds and integer edge values the case builders share.

Below both :mod:`.cases` (the catalogue's cases) and :mod:`.coverage_cases` (the coverage ops' cases), which
build them.
"""
from __future__ import annotations

import hashlib

import attrs

from .payloads import EncodedInputs
from .records import VerificationClass as VC

#: the integer edge values every integer operand's cases include
INT_EDGES = (0, 1, -1, 2, -2, 7, 31, 32, 33, 64, -32, 12345, -98765, 2**31 - 1, -2**31, -2**31 + 1)


@attrs.frozen
class Case:
    case_id: str
    verification_class: VC
    inputs: EncodedInputs
    shapes: tuple  # effective operand shapes, in operand order
    output_shapes: tuple
    output_dtypes: tuple
    contraction_length: int | None = None
    seed: int | None = None
    expected: tuple | None = None  # analytic cases: the independent expected values of the first output
    # numerical classes: one bounds.OutputBound per output (None for an exact output): each element's own
    # K and sum |exact terms|, the accumulator and the output rounding. The stage's policy derives every
    # element's envelope from it (bounds.path_envelope); see bounds.py for how a new op fills it.
    bounds: tuple | None = None
    layouts: tuple | None = None  # per operand then output, a layouts.LAYOUTS name (None: all compact)
    # exact classes: NaN results need only be NaN (any payload), where the association may pick between
    # several NaN payloads of one fibre (IEEE 754 §6.2.3); every other bit stays exact
    nan_payloads_free: bool = False
    # pointwise: the operand read once (its element 0) for every element, as a scalar argument or a row's value is:
    # the compiled loop holds it in a register (witnesses.operation_kernel's broadcast form); None: none is
    broadcast: int | None = None

    def to_json(self) -> dict:
        return {"case_id": self.case_id, "class": self.verification_class.value,
                "shapes": [list(s) for s in self.shapes], "output_shapes": [list(s) for s in self.output_shapes],
                "output_dtypes": list(self.output_dtypes), "contraction_length": self.contraction_length,
                "seed": self.seed}


def case_seed(*parts) -> int:
    """A deterministic 32-bit seed from a case's identity (never from time or process state)."""
    return int.from_bytes(hashlib.sha256("/".join(map(str, parts)).encode()).digest()[:4], "little")
