"""cpu rules for quantize and quantized_dot (quantization.md).

Both rules emit the reference algorithms inline as generated statements (the generated module
imports only math, numpy, numba and the runtime ``R``): a parallel loop over (rows, blocks) for
``quantize`` and over the leading result positions for ``quantized_dot``, with the per-block body
written from the templates below. Every float operation is one float32 operation (explicit
``np.float32`` constants; Numba keeps float32 * float32 in float32) in ggml's order, so the
records are bit-identical to the generic rule's (and ggml's ``quantize_row_*_K_ref``).
``nearest_int`` is ggml's: add 1.5 * 2^23 in float32, subtract it again. f16 fields are held as
float32 values rounded with ``R.round_f16`` (RNE, as ggml's ``GGML_FP32_TO_FP16``). A dynamic last
extent K is checked to be a multiple of 256 before the loop (a ValueError naming K and its value).
"""
from __future__ import annotations

from ... import types as T
from ...codegen import checks as C
from ...graph import ops
from ...graph.interpreter import rule_registrar
from .values import Aggregate, Array, Scalar

RULES: dict = {}
rule = rule_registrar(RULES)

_M = "np.float32(12582912.0)"


def _near(expr: str) -> str:
    """ggml nearest_int as an integral float32 value."""
    return f"np.float32(np.float32(({expr}) + {_M}) - {_M})"


# The block's maximum magnitude is ggml's ``fabsf(x) > amax`` scan from amax = 0: the first largest |x|, a NaN
# skipped (its comparison is false). A NaN element's quant is ggml's bit-reading nearest_int of x quieted (x86):
# its low 22 payload bits, at most 127 (generic_quant.nan_nearest_q8).
_Q8 = """\
{P}w = 0
{P}amax = np.float32(0.0)
for {P}j in range(256):
    {P}ax = np.abs({X}[{r}, {o} + {P}j])
    if {P}ax > {P}amax:
        {P}w = {P}j
        {P}amax = {P}ax
{P}mx = {X}[{r}, {o} + {P}w]
if {P}amax == np.float32(0.0):
    {D}[{r}, {b}] = np.float32(0.0)
    for {P}j in range(256):
        {QS}[{r}, {b}, {P}j] = 0
    for {P}j in range(16):
        {BS}[{r}, {b}, {P}j] = 0
else:
    {P}is = np.float32(-127.0) / {P}mx
    for {P}j in range(16):
        {P}s = 0
        for {P}l in range(16):
            {P}x = {X}[{r}, {o} + 16 * {P}j + {P}l]
            if {P}x != {P}x:
                {P}v = np.int64(R.f32_bits({P}x) & np.uint32(0x3FFFFF))
            else:
                {P}v = np.int64({NEAR_Q8})
            if {P}v > 127:
                {P}v = 127
            {QS}[{r}, {b}, 16 * {P}j + {P}l] = {P}v
            {P}s += {P}v
        {BS}[{r}, {b}, {P}j] = {P}s
    {D}[{r}, {b}] = np.float32(1.0) / {P}is
"""

_Q4 = """\
{P}sc = np.empty(8, dtype=np.float32)
{P}mi = np.empty(8, dtype=np.float32)
{P}w = np.empty(32, dtype=np.float32)
{P}la = np.empty(32, dtype=np.float32)
for {P}j in range(8):
    {P}b0 = {o} + 32 * {P}j
    {P}sx2 = np.float32(0.0)
    for {P}l in range(32):
        {P}t = {X}[{r}, {P}b0 + {P}l]
        {P}sx2 = {P}sx2 + {P}t * {P}t
    {P}av = np.sqrt({P}sx2 / np.float32(32.0))
    for {P}l in range(32):
        {P}w[{P}l] = {P}av + np.abs({X}[{r}, {P}b0 + {P}l])
    {P}mn = {X}[{r}, {P}b0]
    {P}mx = {X}[{r}, {P}b0]
    {P}sw = {P}w[0]
    {P}sxx = {P}sw * {X}[{r}, {P}b0]
    for {P}l in range(1, 32):
        {P}t = {X}[{r}, {P}b0 + {P}l]
        if {P}t < {P}mn:
            {P}mn = {P}t
        if {P}t > {P}mx:
            {P}mx = {P}t
        {P}sw = {P}sw + {P}w[{P}l]
        {P}sxx = {P}sxx + {P}w[{P}l] * {P}t
    if {P}mn > np.float32(0.0):
        {P}mn = np.float32(0.0)
    if {P}mx == {P}mn:
        {P}sc[{P}j] = np.float32(0.0)
        {P}mi[{P}j] = -{P}mn
    else:
        {P}rg = {P}mx - {P}mn
        {P}isc = np.float32(15.0) / {P}rg
        {P}scl = np.float32(1.0) / {P}isc
        {P}best = np.float32(0.0)
        for {P}l in range(32):
            {P}t = {X}[{r}, {P}b0 + {P}l]
            {P}lv = {NEAR_L}
            if {P}lv < np.float32(0.0):
                {P}lv = np.float32(0.0)
            if {P}lv > np.float32(15.0):
                {P}lv = np.float32(15.0)
            {P}df = ({P}scl * {P}lv + {P}mn) - {P}t
            {P}best = {P}best + {P}w[{P}l] * ({P}df * {P}df)
        for {P}st in range(21):
            {P}isc = ((np.float32(-1.0) + np.float32(0.1) * np.float32({P}st)) + np.float32(15.0)) / ({P}mx - {P}mn)
            {P}sl = np.float32(0.0)
            {P}sl2 = np.float32(0.0)
            {P}sxl = np.float32(0.0)
            for {P}l in range(32):
                {P}t = {X}[{r}, {P}b0 + {P}l]
                {P}lv = {NEAR_L}
                if {P}lv < np.float32(0.0):
                    {P}lv = np.float32(0.0)
                if {P}lv > np.float32(15.0):
                    {P}lv = np.float32(15.0)
                {P}la[{P}l] = {P}lv
                {P}wl = {P}w[{P}l] * {P}lv
                {P}sl = {P}sl + {P}wl
                {P}sl2 = {P}sl2 + {P}wl * {P}lv
                {P}sxl = {P}sxl + {P}wl * {P}t
            {P}dd = {P}sw * {P}sl2 - {P}sl * {P}sl
            if {P}dd > np.float32(0.0):
                {P}ts = ({P}sw * {P}sxl - {P}sxx * {P}sl) / {P}dd
                {P}tm = ({P}sl2 * {P}sxx - {P}sl * {P}sxl) / {P}dd
                if {P}tm > np.float32(0.0):
                    {P}tm = np.float32(0.0)
                    {P}ts = {P}sxl / {P}sl2
                {P}mad = np.float32(0.0)
                for {P}l in range(32):
                    {P}df = ({P}ts * {P}la[{P}l] + {P}tm) - {X}[{r}, {P}b0 + {P}l]
                    {P}mad = {P}mad + {P}w[{P}l] * ({P}df * {P}df)
                if {P}mad < {P}best:
                    {P}best = {P}mad
                    {P}scl = {P}ts
                    {P}mn = {P}tm
        {P}sc[{P}j] = {P}scl
        {P}mi[{P}j] = -{P}mn
{P}ms = np.float32(0.0)
{P}mm = np.float32(0.0)
for {P}j in range(8):
    if {P}sc[{P}j] > {P}ms:
        {P}ms = {P}sc[{P}j]
    if {P}mi[{P}j] > {P}mm:
        {P}mm = {P}mi[{P}j]
{P}iS = np.float32(0.0)
if {P}ms > np.float32(0.0):
    {P}iS = np.float32(63.0) / {P}ms
{P}iM = np.float32(0.0)
if {P}mm > np.float32(0.0):
    {P}iM = np.float32(63.0) / {P}mm
{P}dh = R.round_f16({P}ms / np.float32(63.0))
{P}dmh = R.round_f16({P}mm / np.float32(63.0))
{D}[{r}, {b}] = {P}dh
{DM}[{r}, {b}] = {P}dmh
for {P}j in range(8):
    {P}ls = R.min2(np.int64({NEAR_S}), 63) & 63
    {P}lm = R.min2(np.int64({NEAR_M}), 63) & 63
    {SC}[{r}, {b}, {P}j] = {P}ls
    {MI}[{r}, {b}, {P}j] = {P}lm
    {P}d1 = np.float32({P}dh) * np.float32({P}ls)
    {P}m1 = np.float32({P}dmh) * np.float32({P}lm)
    for {P}l in range(32):
        if {P}d1 == np.float32(0.0):
            {Q}[{r}, {b}, 32 * {P}j + {P}l] = 0
        else:
            {P}v = np.int64({NEAR_Q})
            if {P}v < 0:
                {P}v = 0
            if {P}v > 15:
                {P}v = 15
            {Q}[{r}, {b}, 32 * {P}j + {P}l] = {P}v
"""


def _emit_template(em, template: str, names: dict) -> None:
    for line in template.format(**names).splitlines():
        stripped = line.lstrip(" ")
        extra = (len(line) - len(stripped)) // 4
        em.depth += extra
        em.line(stripped)
        em.depth -= extra


def _dims(shape) -> str:
    return "(" + "".join(f"{s}, " for s in shape) + ")"


def _product(em, parts) -> str:
    parts = [str(p) for p in parts]
    if not parts:
        return "1"
    return em.assign(" * ".join(f"({p})" for p in parts), "n")


@rule(ops.quantize)
def _quantize(em, node, args):
    t_in = node.inputs[0].type
    fmt = node.attr("format")
    x = em.materialize(args[0], t_in)
    k = t_in.shape[-1]
    if isinstance(k, int):
        nb = k // 256
    else:  # a dynamic K: a multiple of 256 (Q1), checked before anything is quantized
        k = em.assign(f"np.int64({x.shape[-1]})", "n")
        em.check(f"{k} % 256 != 0", C.QUANTIZE_EXTENT, k, extent=T.extent_str(t_in.shape[-1]))
        nb = em.assign(f"{k} // 256", "n")
    lead = tuple(x.shape[:-1])
    rows = _product(em, lead)
    xs = em.assign(f"R.contiguous({x.name}).reshape(({rows}, {k}))", "x")
    out_t = node.attr("type")
    arrays = []
    for (name, ft) in out_t.fields:
        tail = tuple(str(s) for s in ft.shape[len(lead) + 1:])
        np_t = "np.float32" if ft.dtype.name in ("f16", "f32") else f"np.{ {'i8': 'int8', 'i16': 'int16', 'u8': 'uint8'}[ft.dtype.name] }".replace(" ", "")
        arrays.append((name, em.allocate((rows, str(nb)) + tail, np_t, f"field {name} of `quantize`", prefix="q"),
                       tail))
    if fmt.name != "q8_k":  # the per-block scratch arrays of _Q4 (Numba hoists them: each block fills them first)
        em.check_size(("32",), 4, "the scratch of `quantize`")
    names = {a[0]: a[1] for a in arrays}
    with em.loop_nest((rows, str(nb)), parallel=True) as (r, b):
        p = em.fresh("k") + "_"
        o = em.assign(f"{b} * 256", "o")
        sub = {"P": p, "X": xs, "r": r, "b": b, "o": o}
        if fmt.name == "q8_k":
            sub.update(D=names["d"], QS=names["qs"], BS=names["bsums"],
                       NEAR_Q8=_near(f"{p}is * {p}x"))
            _emit_template(em, _Q8, sub)
        else:
            sub.update(D=names["d"], DM=names["dmin"], SC=names["scales"], MI=names["mins"], Q=names["q"],
                       NEAR_L=_near(f"{p}isc * ({p}t - {p}mn)"), NEAR_S=_near(f"{p}iS * {p}sc[{p}j]"),
                       NEAR_M=_near(f"{p}iM * {p}mi[{p}j]"),
                       NEAR_Q=_near(f"({xs}[{r}, {o} + 32 * {p}j + {p}l] + {p}m1) / {p}d1"))
            _emit_template(em, _Q4, sub)
    leaves = []
    for name, arr, tail in arrays:
        shape = lead + (str(nb),) + tail
        leaves.append(Array(em.assign(f"{arr}.reshape({_dims(shape)})", "q"), shape))
    return Aggregate(tuple(leaves))


def _leaf_arrays(em, value, t: T.RecordType) -> list:
    return [em.materialize(v, ft) for v, (_, ft) in zip(value.items, t.fields)]


@rule(ops.quantized_dot)
def _quantized_dot(em, node, args):
    lt, rt = node.inputs[0].type, node.inputs[1].type
    lhs, rhs = _leaf_arrays(em, args[0], lt), _leaf_arrays(em, args[1], rt)
    lf = node.attr("lhs_format").name
    la, lb = len(lhs[0].shape) - 1, len(rhs[0].shape) - 1
    rank = max(la, lb)
    nb = f"{rhs[0].name}.shape[{lb}]"
    out_shape = []
    for k in range(rank):
        ka, kb = k - (rank - la), k - (rank - lb)
        ea = f"{lhs[0].name}.shape[{ka}]" if ka >= 0 else None
        eb = f"{rhs[0].name}.shape[{kb}]" if kb >= 0 else None
        if ea and eb:
            out_shape.append(em.assign(f"{ea} if {eb} == 1 else {eb}", "n"))
        else:
            out_shape.append(ea or eb)
    out = em.allocate(tuple(out_shape), "np.float32", "the result of `quantized_dot`") if rank else None
    with em.loop_nest(tuple(out_shape), parallel=True) as idx:
        li = [f"R.min2(np.int64({idx[k + rank - la]}), {lhs[0].name}.shape[{k}] - 1)" for k in range(la)]
        ri = [f"R.min2(np.int64({idx[k + rank - lb]}), {rhs[0].name}.shape[{k}] - 1)" for k in range(lb)]
        li = [em.assign(e, "j") for e in li]
        ri = [em.assign(e, "j") for e in ri]

        def at(arr, base, *rest):
            return f"{arr.name}[{', '.join(list(base) + [str(x) for x in rest])}]"

        acc = em.assign("np.float32(0.0)", "acc")
        with em.loop_nest((nb,), parallel=False) as (b,):
            yd = at(rhs[0], ri, b)
            if lf == "q8_k":
                s = em.assign("0", "s")
                with em.loop_nest(("256",), parallel=False) as (i,):
                    em.line(f"{s} += np.int64({at(lhs[1], li, b, i)}) * np.int64({at(rhs[1], ri, b, i)})")
                em.line(f"{acc} = {acc} + ({at(lhs[0], li, b)} * {yd}) * np.float32({s})")
            else:
                tot = em.assign("0", "s")
                with em.loop_nest(("8",), parallel=False) as (j,):
                    s = em.assign("0", "s")
                    with em.loop_nest(("32",), parallel=False) as (l,):
                        em.line(f"{s} += np.int64({at(lhs[4], li, b, f'32 * {j} + {l}')}) * "
                                f"np.int64({at(rhs[1], ri, b, f'32 * {j} + {l}')})")
                    em.line(f"{tot} += np.int64({at(lhs[2], li, b, j)}) * {s}")
                sumi = em.assign("0", "s")
                with em.loop_nest(("16",), parallel=False) as (t,):
                    em.line(f"{sumi} += np.int64({at(rhs[2], ri, b, t)}) * np.int64({at(lhs[3], li, b, f'{t} // 2')})")
                em.line(f"{acc} = {acc} + (np.float32({at(lhs[0], li, b)} * {yd}) * np.float32({tot}) - "
                        f"np.float32({at(lhs[1], li, b)} * {yd}) * np.float32({sumi}))")
        if rank:
            em.line(f"{out}[{', '.join(idx)}] = {acc}")
    if not rank:
        return Scalar(acc)
    return Array(out, tuple(out_shape))
