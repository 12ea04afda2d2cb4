"""The generic interpreter's base: its state, runtime values and the helpers several rule modules share.

Below every generic rule module (``generic_*.py``) and the law checker; imports nothing of theirs. The
rule modules each own their table (``RULES``); :mod:`.generic` composes them.
"""
from __future__ import annotations

import numpy as np

from .. import types as T
from ..codegen import checks as C
from ..graph.interpreter import Interpreter
from ..graph.values import KernelGraph, Literal
from ..limits import check_allocation
from . import numerics as N
from .generic_races import READ, WRITE, record


class DomainValue:
    """Runtime value of a domain or subregion: its member coordinates."""

    __slots__ = ("coords",)

    def __init__(self, coords: np.ndarray):
        self.coords = coords

    def __len__(self) -> int:
        return len(self.coords)


class LoopExit(Exception):
    """Raised by ``break``/``continue`` nodes; carries the carry to continue with (or None)."""

    def __init__(self, kind: str, carry):
        self.kind = kind
        self.carry = carry


class NumpyInterpreter(Interpreter):
    """The generic walk without its rules: the interpreter state every generic rule module reads and
    writes (environment, dims, views, parallel-write records). :mod:`.generic` composes the rule table and
    subclasses it as ``GenericInterpreter``; rule modules import only this module, never the composition."""

    target_name = "generic"
    rules: dict = {}

    def __init__(self, graph: KernelGraph, values: list, dims: dict, rng=None, check_laws: bool = False):
        super().__init__()
        self.graph = graph
        self.rng = rng if rng is not None else np.random.default_rng(0)  # region segmentations
        self.check_laws = check_laws
        self.dims = dict(dims)
        self.views: dict = {}  # view Var -> (name, array the kernel reads/writes)
        self.race_frames: list = []  # one generic_races.Frame per running parallel (innermost last)
        self.race_depth: dict = {}  # buffer Var -> the number of frames open where it was allocated
        self.race_exempt: set = set()  # view Vars the kernel only reads (In): never recorded
        self._checked_results: dict = {}  # node -> its tensor result types (see _check_results)
        for p, v in zip(graph.params, values):
            self.env[p.var] = v
            if p.kind == "view":
                self.views[p.var] = p.name
                if p.type.access == "In":
                    self.race_exempt.add(p.var)
        for ev in graph.extents:
            self.env[ev] = np.asarray(self.dims[ev.extent], dtype=np.int64)

    def literal(self, lit: Literal):
        return np.asarray(lit.value, dtype=lit.type.dtype.np)

    def extent(self, e) -> int:
        return e if isinstance(e, int) else self.dims[e]

    def shape(self, shape) -> tuple:
        return tuple(self.extent(e) for e in shape)

    def run_node(self, node):
        try:
            self._check_results(node)
            super().run_node(node)
        except LoopExit:
            raise
        except (IndexError, ValueError, RuntimeError, TypeError) as e:
            if not getattr(e, "_intent_located", False):
                e.add_note(f"in op `{node.op.name}` at {node.loc!r}")
                e._intent_located = True
            raise
        for v in node.outputs:
            t = v.type
            if isinstance(t, T.TensorType):
                for e, n in zip(t.shape, self.env[v].shape):
                    if not isinstance(e, int):
                        self.dims[e] = n

    def _check_results(self, node) -> None:
        """Refuse a tensor result that cannot fit (intent_trace.limits) before its rule allocates it.

        One check for every op whose result shape is known from its operands' extents (pointwise results,
        broadcasts, reads, contracts, reduces, gathers...). An op that takes new extents from runtime values
        (``full``, ``reshape``: its ``extents`` attribute; domains and buffers) checks the shape its rule
        computes, as the extents recorded here may be a previous iteration's.
        """
        checked = self._checked_results.get(node)
        if checked is None:  # the node's tensor result types, found once per run (region bodies run often)
            checked = () if node.attr("extents") else tuple(
                t for v in node.outputs for t in T.leaf_types(v.type) if t.__class__ is T.TensorType)
            self._checked_results[node] = checked
        dims = self.dims
        for t in checked:
            shape = tuple(e if isinstance(e, int) else dims.get(e) for e in t.shape)
            if None not in shape:
                check_allocation(f"the {node.op.name} result at {node.loc!r} (shape {shape})", shape,
                                 t.dtype.np.itemsize)


def is_float(a: np.ndarray) -> bool:
    """Float data, the narrow formats (ml_dtypes) included."""
    return a.dtype.kind == "f" or a.dtype in N.NARROW


# --- aggregate values: tuples and records are Python tuples of leaves --------------------------------

def leaves(value, t: T.Type) -> list:
    """The arrays of a (nested) tuple or record value of type ``t``, in order."""
    if isinstance(t, T.TupleType):
        return [x for v, it in zip(value, t.items) for x in leaves(v, it)]
    if isinstance(t, T.RecordType):
        return [x for v, (_, ft) in zip(value, t.fields) for x in leaves(v, ft)]
    return [value]


def rebuild(items: list, t: T.Type):
    """The value of type ``t`` whose leaves are taken from the front of ``items`` (the inverse of :func:`leaves`)."""
    if isinstance(t, T.TupleType):
        return tuple(rebuild(items, it) for it in t.items)
    if isinstance(t, T.RecordType):
        return tuple(rebuild(items, ft) for _, ft in t.fields)
    return items.pop(0)


# --- views -----------------------------------------------------------------------------------------

def index_arrays(it, node, view_var, array: np.ndarray, operands) -> tuple:
    """NumPy integer index arrays (outer indexing) for a read/write, bounds-checked (T9).

    Shared by the view rules, the buffer load/store rules and the atomics: one bounds check, one message."""
    kinds = node.attr("index")
    if "all" not in kinds and "domain" not in kinds and all(np.ndim(o) == 0 for o in operands):
        return _point(it, view_var, array, operands)
    result_rank = sum(1 if k in ("domain", "all") else (np.ndim(o) if k == "tensor" else 0)
                      for k, o in zip(kinds, align(kinds, operands)))
    name = it.views[view_var]
    arrays, axis_pos = [], 0
    for axis, (kind, op) in enumerate(zip(kinds, align(kinds, operands))):
        n = array.shape[axis]
        if kind == "all":
            idx = np.arange(n, dtype=np.int64)
        elif kind == "domain":
            idx = op.coords
        else:
            idx = np.asarray(op).astype(np.int64, copy=False)
        bad = (idx < 0) | (idx >= n)
        if np.any(bad):
            coord = idx[bad].reshape(-1)[0]
            raise C.VIEW_COORDINATE.error(int(coord), n, axis=axis, view=name)
        k = idx.ndim
        shape = [1] * result_rank
        shape[axis_pos:axis_pos + k] = idx.shape
        arrays.append(idx.reshape(shape) if result_rank else idx)
        axis_pos += k
    return tuple(arrays)


def _point(it, view_var, array: np.ndarray, operands) -> tuple:
    """:func:`index_arrays` of one element (every axis a 0-d coordinate: a parallel body's access), checked on
    Python ints: the same 0-d int64 index arrays, the same bounds check and message."""
    idx = []
    for axis, op in enumerate(operands):
        c, n = int(op), array.shape[axis]
        if c >= 1 << 63:  # a u64 coordinate as int64, as the array path's astype reads it
            c -= 1 << 64
        if c < 0 or c >= n:
            raise C.VIEW_COORDINATE.error(c, n, axis=axis, view=it.views[view_var])
        idx.append(np.array(c, np.int64))
    return tuple(idx)


def align(kinds, operands):
    """The index operands per axis (None on an ``all`` axis, which has no operand)."""
    it = iter(operands)
    return [None if k == "all" else next(it) for k in kinds]


def flat_indices(idx: tuple, shape: tuple) -> np.ndarray:
    """The flat indices of the elements an index tuple (of :func:`index_arrays`) addresses."""
    if not idx:
        return np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64) if shape else np.zeros(1, np.int64)
    if len(idx) == len(shape) and all(i.ndim == 0 for i in idx):  # one element (:func:`_point`)
        flat = 0
        for i, n in zip(idx, shape):
            flat = flat * n + int(i)
        return np.array([flat], np.int64)
    return np.ravel_multi_index(np.broadcast_arrays(*idx), shape).reshape(-1)


def read_view(it, node, args):
    """The ``read`` rule (and buffer ``load``): a copy of the addressed elements, recorded for the race
    detector inside a ``parallel``."""
    array = args[0]
    idx = index_arrays(it, node, node.inputs[0], array, args[1:])
    if it.race_frames:
        record(it, node.inputs[0], array.shape, flat_indices(idx, array.shape), READ)
    return np.array(array[idx]) if idx else np.array(array)


def write_view(it, node, args):
    """The ``write``/``unique_store`` rule (and buffer ``store``): checks injectivity of a data-indexed store
    and records the written elements for the race detector."""
    array, value = args[0], args[1]
    view_var = node.inputs[0]
    idx = index_arrays(it, node, view_var, array, args[2:])
    target_shape = np.broadcast_shapes(*(a.shape for a in idx)) if idx else ()
    flat = flat_indices(idx, array.shape)
    if "tensor" in node.attr("index") and len(np.unique(flat)) != flat.size:
        raise C.UNIQUE_STORE_TWICE.error(view=it.views[view_var])
    if it.race_frames:
        record(it, view_var, array.shape, flat, WRITE)
    array[idx] = np.broadcast_to(value, target_shape)
