"""Metal Shading Language -> host C++ against ``itm_metal.h``, line for line.

The rewrite is textual and small, because the header does the work: it keeps every line where it was (so
``__LINE__`` in the C++ is the Metal source line, which the race and bounds reports name) and changes only what C++
cannot spell as Metal does:

- ``#include <metal_stdlib>`` becomes the emulation header; the other ``<metal_*>`` includes vanish;
- ``device T*`` / ``threadgroup T*`` become ``itm::ptr<T>`` (checked pointers), ``threadgroup T x[N];`` and
  ``threadgroup T x;`` per-threadgroup shared storage (``ITM_THREADGROUP_*``);
- a half literal ``1.5h`` becomes ``half(1.5f)`` (exact: TVM prints a float16 constant's value in full);
- the kernel loses its attributes: ``[[kernel]]`` becomes ``static``, parameter attributes (``[[buffer(i)]]``,
  ``[[thread_position_in_threadgroup]]``, ...) are read into :class:`Param` and dropped;
- in the kernel body every use of a buffer parameter or threadgroup variable ``x`` becomes ``x.at_line(N)``, so
  the accesses through it know their line;
- after the last line, a driver: ``itm_run`` binds the buffers and the argument struct, and runs the kernel once per
  thread through :func:`itm::dispatch`.

One repair, of TVM's Metal code generator rather than of Metal (:func:`split_inline_conditionals`): a declaration
TVM binds inside an expression -- a guarded load (``T.if_then_else``, which TileLang's safe-memory pass puts around a
load it cannot prove in bounds) or a let-bound index (``rmod``/``rdiv`` of a floor modulo) -- inside an assignment to
a local variable comes out as ``b9 =     uchar condval;`` (or ``b15 =       long rmod = ...;``), then the statements
that compute it, then the rest of the assignment, ``((char)(condval != (uchar)0));``, at column 0: the declaration
printed into the middle of the statement. That is no more valid Metal than C++, so the left-hand side moves onto the
rest of the statement (same lines, so ``__LINE__`` still names the Metal line). :func:`..metal.kernel_source` applies
the same repair, so the Metal source a Mac would compile is the repaired one.

A local variable that shadows a buffer parameter's or threadgroup variable's name is not supported (its uses
would be rewritten too; TVM never emits one). Only the kernel's own syntax is parsed (the parameter list, the argument struct TVM emits, threadgroup declarations);
anything else is compiled as it is, so a Metal feature the header lacks is a C++ compile error naming it.
"""
from __future__ import annotations

import re

import attrs

_POINTER = re.compile(r"\b((?:(?:const|volatile)\s+)*)(device|threadgroup)\s+((?:(?:const|volatile)\s+)*)"
                      r"([A-Za-z_][\w:]*(?:<[\w\s,:]*>)?)\s*\*\s*(?:__restrict\w*\s+)?")
_SHARED_ARRAY = re.compile(r"^(\s*)threadgroup\s+([A-Za-z_][\w:]*(?:<[\w\s,:]*>)?)\s+([A-Za-z_]\w*)\s*\[([^\]]+)\]\s*;")
_SHARED_SCALAR = re.compile(r"^(\s*)threadgroup\s+([A-Za-z_][\w:]*(?:<[\w\s,:]*>)?)\s+([A-Za-z_]\w*)\s*;")
_REINTERPRET = re.compile(r"reinterpret_cast<\s*(itm::ptr<[^<>]*>)\s*>")
_LOCAL_POINTER = re.compile(r"itm::ptr<[^>]*>\s+([A-Za-z_]\w*)\s*=")
_KERNEL = re.compile(r"(?:\[\[\s*kernel\b[^\]]*\]\]|\bkernel)\s*void\s+([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"\[\[\s*([A-Za-z_]\w*)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]")
_STRUCT = re.compile(r"struct\s+([A-Za-z_]\w*)\s*\{([^}]*)\}\s*;")
_FIELD = re.compile(r"^\s*([A-Za-z_][\w:]*)\s+([A-Za-z_]\w*)\s*(\[\s*\d+\s*\])?\s*;\s*$", re.S)
#: a half literal (``0.000000e+00h``: TVM prints a float16 constant so), which C++ spells as a conversion
_HALF_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)h\b")
FLOAT_TYPES = frozenset({"float", "half", "bfloat"})
BUILTINS = frozenset({
    "thread_position_in_threadgroup", "threadgroup_position_in_grid", "threadgroups_per_grid",
    "threads_per_threadgroup", "thread_position_in_grid", "threads_per_grid", "thread_index_in_threadgroup",
    "simdgroup_index_in_threadgroup", "thread_index_in_simdgroup", "threads_per_simdgroup",
    "simdgroups_per_threadgroup"})


class TranslationError(ValueError):
    """The Metal source uses kernel syntax the emulator does not parse (said plainly, with the offending text)."""


@attrs.frozen
class Param:
    """One kernel parameter: ``kind`` is "buffer" (a pointer, ``element`` its C++ element type), "struct" (a
    ``constant S&`` argument struct with ``fields``), "reference" (``constant T&``: the first element of a buffer)
    or "builtin" (``attribute`` names the position)."""

    name: str
    kind: str
    ctype: str
    index: int | None = None
    attribute: str | None = None
    element: str | None = None
    fields: tuple = ()  # (ctype, name, is_array) for a struct


@attrs.frozen
class Translation:
    """The C++ text (Metal line numbers kept) and what the driver binds: the buffers in ``buffers`` order (the
    ``bases``/``bytes`` arrays of ``itm_run``) and the struct fields in ``fields`` order (``ints``/``floats``)."""

    cpp: str
    kernel: str
    max_threads: int | None  # the kernel's max_total_threads_per_threadgroup, if it says
    params: tuple
    buffers: tuple  # Param (buffer or reference), in the order itm_run takes them
    fields: tuple  # (ctype, name, is_array) of the argument struct, if any


def _split_params(text: str) -> list:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p for p in out if p.strip()]


def _pointer(m: re.Match) -> str:
    const = "const " if "const" in (m[1] + m[3]) else ""
    return f"itm::ptr<{const}{m[4]}> "


def _structs(source: str) -> dict:
    """{struct name: its body text} (fields are read only for the struct a kernel takes, :func:`_fields`)."""
    return {m[1]: m[2] for m in _STRUCT.finditer(source)}


def _fields(name: str, body: str) -> tuple:
    fields = []
    for decl in body.split(";"):
        if not decl.strip():
            continue
        f = _FIELD.match(decl + ";")
        if f is None:
            raise TranslationError(f"struct {name}: cannot read the field {decl.strip()!r}")
        fields.append((f[1], f[2], f[3] is not None))
    return tuple(fields)


def _param(text: str, structs: dict) -> Param:
    attrs_ = _ATTRIBUTE.findall(text)
    decl = _ATTRIBUTE.sub(" ", text).strip()
    m = re.fullmatch(r"(.*?)([A-Za-z_]\w*)", decl, re.S)
    if m is None:
        raise TranslationError(f"cannot read the kernel parameter {text.strip()!r}")
    ctype, name = " ".join(m[1].split()), m[2]
    attribute, index = (attrs_[0][0], int(attrs_[0][1]) if attrs_[0][1] else None) if attrs_ else (None, None)
    if attribute == "buffer":
        ptr = re.fullmatch(r"itm::ptr<(.*)>", ctype)
        if ptr is not None:
            return Param(name, "buffer", ctype, index, attribute, element=ptr[1])
        ref = re.fullmatch(r"(?:constant|const)\s+([A-Za-z_][\w:]*)\s*&", ctype)
        if ref is None:
            raise TranslationError(f"kernel parameter {name}: buffer of unsupported type {ctype!r}")
        if ref[1] in structs:
            return Param(name, "struct", ref[1], index, attribute, fields=_fields(ref[1], structs[ref[1]]))
        return Param(name, "reference", ref[1], index, attribute, element=f"const {ref[1]}")
    if attribute in BUILTINS:
        return Param(name, "builtin", ctype, None, attribute)
    raise TranslationError(f"kernel parameter {name}: unsupported attribute {attribute!r} in {text.strip()!r}")


def _body_end(lines: list, start: int) -> int:
    """The index of the line that closes the kernel body opened at or after ``start``."""
    depth, seen = 0, False
    for i in range(start, len(lines)):
        for ch in re.sub(r"//.*", "", lines[i]):
            if ch == "{":
                depth, seen = depth + 1, True
            elif ch == "}":
                depth -= 1
                if seen and depth == 0:
                    return i
    raise TranslationError("the kernel body is not closed")


_INLINE_DECLARATION = re.compile(r"^(\s*)([^;{}]*?[^=!<>\s])\s*=(?!=)\s+((?:[A-Za-z_][\w:]*\s+)+)([A-Za-z_]\w*)"
                                 r"(\s*=[^;]*)?\s*;\s*$")


def split_inline_conditionals(source: str) -> str:
    """``lhs = T name[ = init];`` ... ``rest;`` (a declaration TVM printed inside an assignment, see the module
    docstring) rewritten as ``T name[ = init];`` ... ``lhs = rest;``, on the same lines. TranslationError when the
    statement's rest (the next line at column 0) is missing or does not end the statement."""
    lines = source.split("\n")
    for i, line in enumerate(lines):
        m = _INLINE_DECLARATION.match(line)
        if m is None:
            continue
        rest = next((j for j in range(i + 1, len(lines)) if lines[j] and not lines[j][0].isspace()), None)
        if rest is None or not lines[rest].rstrip().endswith(";"):
            raise TranslationError(f"line {i + 1}: {line.strip()!r} declares {m[4]} inside an assignment, and the "
                                   f"rest of the assignment was not found")
        lines[i] = f"{m[1]}{m[3]}{m[4]}{m[5] or ''};"
        lines[rest] = f"{m[1]}{m[2]} = {lines[rest]}"
    return "\n".join(lines)


def translate(source: str, kernel: str | None = None) -> Translation:
    """The host C++ for the Metal ``source`` and its kernel (the only one, or the one named ``kernel``)."""
    structs = _structs(source)
    text = re.sub(r"#include\s*<metal_stdlib>", '#include "itm_metal.h"', split_inline_conditionals(source))
    text = re.sub(r"#include\s*<metal_\w+>", "", text)
    text = _POINTER.sub(_pointer, text)
    text = _REINTERPRET.sub(r"\1", text)  # reinterpret_cast<itm::ptr<A>>(p): the checked pointer's cast (same region)
    text = _HALF_LITERAL.sub(r"half(\1f)", text)
    kernels = [m for m in _KERNEL.finditer(text) if kernel is None or m[1] == kernel]
    if len(kernels) != 1:
        found = [m[1] for m in _KERNEL.finditer(text)]
        raise TranslationError(f"expected one Metal kernel{f' named {kernel}' if kernel else ''}; found {found}")
    km = kernels[0]
    close, depth = km.end(), 1
    while depth:
        if close >= len(text):
            raise TranslationError(f"kernel {km[1]}: the parameter list is not closed")
        depth += {"(": 1, ")": -1}.get(text[close], 0)
        close += 1
    params = tuple(_param(p, structs) for p in _split_params(text[km.end():close - 1]))
    signature = "static void " + km[1] + "(" + _ATTRIBUTE.sub("", text[km.end():close])
    text = text[:km.start()] + signature + text[close:]
    lines = text.split("\n")
    end = km.start() + len(signature)  # the body starts on this line, after this column
    head, col = text.count("\n", 0, end), end - (text.rfind("\n", 0, end) + 1)
    names = [p.name for p in params if p.kind == "buffer"]
    for i in range(head, _body_end(lines, head) + 1):
        start = col if i == head else 0
        line = lines[i][start:]
        for pattern, macro in ((_SHARED_ARRAY, "ITM_THREADGROUP_ARRAY({t}, {n}, {e});"),
                               (_SHARED_SCALAR, "ITM_THREADGROUP_SCALAR({t}, {n});")):
            m = pattern.match(line)
            if m is not None:
                names.append(m[3])
                line = m[1] + macro.format(t=m[2], n=m[3], e=m[4] if m.lastindex >= 4 else "") + line[m.end():]
                break
        else:
            if names:
                line = re.sub(r"(?<![\w.])(?<!->)(" + "|".join(map(re.escape, names)) + r")\b(?!\s*\()",
                              lambda m: f"{m[1]}.at_line({i + 1})", line)
        lines[i] = lines[i][:start] + line
        names += _LOCAL_POINTER.findall(line)  # a pointer the body declares: its accesses carry their line too
    buffers = tuple(p for p in params if p.kind in ("buffer", "reference"))
    structs_ = [p for p in params if p.kind == "struct"]
    if len(structs_) > 1:
        raise TranslationError(f"kernel {km[1]}: more than one argument struct")
    fields = structs_[0].fields if structs_ else ()
    lines.append(_driver(km[1], params, buffers, structs_[0] if structs_ else None))
    limit = re.search(r"max_total_threads_per_threadgroup\(\s*(\d+)\s*\)", km[0])
    return Translation("\n".join(lines), km[1], int(limit[1]) if limit else None, params, buffers, fields)


def _driver(kernel: str, params: tuple, buffers: tuple, struct: Param | None) -> str:
    out = ["", "// --- the emulation driver (intent_trace metal_emulation) ---"]
    if struct is not None:
        out.append(f"static thread_local const {struct.ctype}* itm_args = nullptr;")
    args = []
    for p in params:
        if p.kind == "buffer":
            args.append(f"itm::buffer<{p.element}>({buffers.index(p)})")
        elif p.kind == "reference":
            args.append(f"*itm::buffer<{p.element}>({buffers.index(p)})")
        elif p.kind == "struct":
            args.append("*itm_args")
        else:
            args.append(f"itm::builtin<{p.ctype}>::from(itm::position({p.attribute!r}))".replace("'", '"'))
    out.append(f"static void itm_body() {{ {kernel}({', '.join(args)}); }}")
    out.append('extern "C" long itm_run(char** bases, const long* bytes, const long* ints, const double* floats, '
               "const unsigned* launch, unsigned long long seed, char* reports, long size) {")
    out.append(f"  std::vector<itm::Region> regions({len(buffers)});")
    for k, p in enumerate(buffers):
        out.append(f"  regions[{k}].base = bases[{k}]; regions[{k}].bytes = bytes[{k}]; "
                   f'regions[{k}].name = "{p.name}";')
    if struct is not None:
        out.append(f"  {struct.ctype} a;")
        out.append("  memset(&a, 0, sizeof a);")
        for k, (ctype, name, is_array) in enumerate(struct.fields):
            if ctype == "__TVMArgUnion":
                out.append(f"  a.{name}.v_int[0] = (int)ints[{k}];")
                continue
            source = f"floats[{k}]" if ctype in FLOAT_TYPES else f"ints[{k}]"
            out.append(f"  a.{name}{'[0]' if is_array else ''} = ({ctype}){source};")
        out.append("  itm_args = &a;")
    out.append("  itm::Dispatch d;")
    out.append("  long n = itm::dispatch(itm_body, d, uint3(launch[0], launch[1], launch[2]), "
               "uint3(launch[3], launch[4], launch[5]), std::move(regions), seed);")
    out.append("  itm::copy_reports(d, reports, size);")
    out.append("  return n;")
    out.append("}")
    return "\n".join(out) + "\n"
