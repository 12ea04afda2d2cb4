"""Run-time checks as data: each check the implementations make is defined once here, with its exception, its
message template and the roles of its operands, so that the generic interpreter raises it and the code
generators record it with one message.

A template has three kinds of field:

- ``{0}``, ``{1}``, ``{2}``: the *operands*, integers known only when the kernel runs (a compiled kernel records
  them in its error record; generic has them at hand). ``operands`` names their roles, in order.
- ``{axis}``-style *static* fields: integers known where the check is emitted (an axis, a bin count), formatted
  into the template then (:meth:`Check.site`). They must be ints: nothing else is ever spliced into a template.
- ``{view}``-style *text* fields: text that comes from the user (a view's name, a buffer's label holding a file
  name), always passed as a keyword of the :class:`~intent_trace.graph.lowering.ErrorSite` and substituted when
  the exception is made, never part of the template (``str.format`` does not re-read what it substitutes).

The condition under which a check fails is each target's own spelling (``n < 0`` or ``n < T.int64(0)``) and is
written by the rule that makes the check; only what is raised is data.
"""
from __future__ import annotations

import attrs

from .. import types as T
from ..graph.lowering import ErrorSite


@attrs.frozen(slots=True)
class Check:
    """One run-time check: what is raised when it fails, and the message, whichever implementation fails it."""

    name: str
    exception: type
    template: str
    operands: tuple = ()  # the role of each run-time value {0}, {1}, {2}, in order
    statics: tuple = ()  # the names of the int fields known where the check is made
    texts: tuple = ()  # the names of the user-text fields (ErrorSite keywords)

    def __attrs_post_init__(self):
        if len(self.operands) > 3:
            raise ValueError(f"check {self.name}: an error record holds at most 3 values")

    def site_template(self, **statics: int) -> str:
        """The template with its static fields formatted (operand and text fields stay fields)."""
        if set(statics) != set(self.statics):
            raise TypeError(f"check {self.name} takes the static fields {self.statics}, got {tuple(statics)}")
        for key, value in statics.items():
            if type(value) is not int:  # noqa: E721 (bool is not an axis; nothing but an int is spliced)
                raise TypeError(f"check {self.name}: static field {key} must be an int, got {type(value).__name__}")
        keep = {t: "{" + t + "}" for t in self.texts}
        return self.template.format(*("{%d}" % k for k in range(len(self.operands))), **statics, **keep)

    def site(self, note: str = "", **fields) -> ErrorSite:
        """The error site a code generator records: static fields formatted, text fields as keywords."""
        texts = {t: fields.pop(t) for t in self.texts}
        return ErrorSite(self.exception, self.site_template(**fields), note, **texts)

    def error(self, *values: int, **fields) -> Exception:
        """The exception for these operand values (generic raises it; an executable makes it from a record)."""
        if len(values) != len(self.operands):
            raise TypeError(f"check {self.name} takes the operands {self.operands}, got {len(values)} values")
        return self.site(**fields).error(values)


CHECKS: dict = {}


def _check(name: str, exception: type, template: str, operands: tuple = (), statics: tuple = (),
           texts: tuple = ()) -> Check:
    c = Check(name, exception, template, operands, statics, texts)
    if name in CHECKS:
        raise RuntimeError(f"check {name} defined twice")
    CHECKS[name] = c
    return c


# --- shapes (full, reshape, slice) ----------------------------------------------------------------------------
NEGATIVE_EXTENT = _check("negative_extent", ValueError, "extent {0} (axis {axis}) is negative",
                         ("extent",), ("axis",))
# Compiled targets hold extents as int64 values, which always fit: only generic (Python ints) makes this check.
EXTENT_RANGE = _check("extent_range", ValueError,
                      "extent {0} (axis {axis}) does not fit the index type (at most %d)" % T.index.max,
                      ("extent",), ("axis",))
RESHAPE_COUNT = _check("reshape_count", ValueError, "reshape of {0} elements into a shape of {1} elements",
                       ("source elements", "result elements"))
SLICE_RANGE = _check("slice_range", IndexError,
                     "slice [{0}:{1}] is outside axis {axis} of extent {2} (no clamping)",
                     ("start", "stop", "extent"), ("axis",))
SLICE_INDEX = _check("slice_index", IndexError, "index {0} is outside axis {axis} of extent {1}",
                     ("index", "extent"), ("axis",))

# --- domains --------------------------------------------------------------------------------------------------
DOMAIN_STEP = _check("domain_step", ValueError, "domain step must be positive, got {0}", ("step",))
# Generic only: compiled targets compute members in int64 (the tracer bounds literal domains).
DOMAIN_RANGE = _check("domain_range", ValueError,
                      "the domain at {at} ({0} to {1} step {2}) has members that do not fit the index type "
                      "(%d..%d)" % (T.index.min, T.index.max), ("begin", "end", "step"), (), ("at",))
SUBREGION_NEGATIVE = _check("subregion_negative", IndexError, "subregion [{0}:{1}] has a negative bound",
                            ("begin", "end"))
SUBREGION_PAST = _check("subregion_past", IndexError,
                        "subregion [{0}:{1}] ends past its parent's extent {2} (subregions never clamp)",
                        ("begin", "end", "parent extent"))

# --- views ----------------------------------------------------------------------------------------------------
VIEW_COORDINATE = _check("view_coordinate", IndexError,
                         "{view}: coordinate {0} on axis {axis} is outside its extent {1}",
                         ("coordinate", "extent"), ("axis",), ("view",))
UNIQUE_STORE_TWICE = _check("unique_store_twice", RuntimeError,
                            "{view}: a unique store writes one element twice (its index relation is not injective); "
                            "use scatter_reduce to combine collisions", (), (), ("view",))

# --- buffers, histograms, random bits, sparse metadata ----------------------------------------------------------
# (A gather's source coordinate is VIEW_COORDINATE with the view "I.gather source"; a combine's destination
# coordinate is VIEW_COORDINATE of its destination.)
BUFFER_NEGATIVE_EXTENT = _check("buffer_negative_extent", ValueError, "{view}: extent {0} (axis {axis}) is negative",
                                ("extent",), ("axis",), ("view",))
HISTOGRAM_BIN = _check("histogram_bin", ValueError,
                       "I.histogram: value {0} is outside the bins [0, {bins}); fold range conditions into valid to "
                       "ignore such values", ("value",), ("bins",))
RANDOM_COUNTER = _check("random_counter", ValueError,
                        "I.random.bits: counter {0} is negative; Philox counters are non-negative (T8)", ("counter",))
SPARSE_POSITION = _check("sparse_position", ValueError,
                         "I.sparse_contract {fmt}: metadata position {0} is outside 0..{last}", ("position",),
                         ("last",), ("fmt",))
SPARSE_ORDER = _check("sparse_order", ValueError,
                      "I.sparse_contract {fmt}: metadata positions {0} then {1} within one group are not strictly "
                      "increasing", ("position", "next position"), (), ("fmt",))
HISTOGRAM_RUNTIME_BIN = _check("histogram_runtime_bin", ValueError,
                               "I.histogram: value {0} is outside the bins [0, {1}); fold range conditions into valid "
                               "to ignore such values", ("value", "bins"))

# --- extent relations with dynamic extents (issue 15 items 2-4) -------------------------------------------------
# What the tracer decides for static extents, a run decides for dynamic ones, where the op stands (every output is
# staged, so a failed relation writes nothing). Each message names the extent (user text: a text field) and its value.
EXTENT_EQUAL = _check("extent_equal", ValueError,
                      "I.assume_equal: the sides differ: {lhs} is {0}, but {rhs} is {1}", ("lhs", "rhs"), (),
                      ("lhs", "rhs"))
HISTOGRAM_BINS = _check("histogram_bins", ValueError,
                        "I.histogram: bins ({bins}) is {0}; the number of bins must be positive", ("bins",), (),
                        ("bins",))
QUANTIZE_EXTENT = _check("quantize_extent", ValueError,
                         "I.quantize: the last extent {extent} of its values is {0}, not a multiple of 256 (k-quant "
                         "super-blocks of 256 elements)", ("extent",), (), ("extent",))
SCALED_CARRIER = _check("scaled_carrier", ValueError,
                        "I.scaled_contract: {role} axis {axis} (C_{role}) has extent {extent} = {0}, but {fmt} with "
                        "group size {group} needs exactly {want} carrier elements per group", ("extent",),
                        ("axis", "group", "want"), ("role", "extent", "fmt"))
SPARSE_REDUCTION = _check("sparse_reduction", ValueError,
                          "I.sparse_contract {fmt}: the logical reduction extent {extent} = {0} (rhs axis {axis}) "
                          "is not a multiple of the group size {group}", ("K",), ("axis", "group"), ("fmt", "extent"))
SPARSE_COMPRESSED = _check("sparse_compressed", ValueError,
                           "I.sparse_contract {fmt}: compressed axis {axis} has extent {0}{extent}, but K = {1} "
                           "(rhs axis {rhs_axis}) needs {2} (K * {keep} / {group})", ("extent", "K", "needed"),
                           ("axis", "rhs_axis", "keep", "group"), ("fmt", "extent"))
