"""Rich displays for notebooks: executables, ``intent.verify`` results and verification reports.

Jupyter calls ``_repr_html_`` and IPython's terminal calls ``_repr_pretty_``; ``str``/``repr`` stay what a
terminal has always shown. The renderers live here, below every backend, and the classes take them by one
mixin base each (``class CpuExecutable(ExecutableDisplay)``), so a backend never formats HTML itself.

Every piece of text that reaches the HTML (kernel, parameter and operation names, reasons, generated
source) goes through :func:`html.escape`: a kernel or a field named ``<script>`` is shown as text, never
interpreted as markup.

Compile time and in-process cache hits are recorded by ``compiler.compile`` (:func:`record_compile`), in a
weak table keyed by the executable, so every executable class gets them without storing anything itself and
an executable nobody holds is not kept alive by its record.
"""
from __future__ import annotations

import html
import weakref

import attrs

_COMPILES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@attrs.frozen(slots=True)
class CompileRecord:
    """What ``intent.compile`` measured for one executable in this process.

    ``cold_s``: the first ``compile`` call that returned it (trace and build; targets that compile lazily, cpu's
    Numba and TileLang's JIT, do that on the first call, which ``intent.bench`` times separately). ``last_s`` and
    ``cache_hit``: the latest call, a hit when an earlier ``compile`` had already returned this executable (the
    target's in-process cache gave it back)."""

    cold_s: float
    last_s: float
    cache_hit: bool
    compiles: int

    def to_json(self) -> dict:
        return {"cold_compile_s": self.cold_s, "last_compile_s": self.last_s, "cache_hit": self.cache_hit,
                "compiles": self.compiles}


def record_compile(exe, seconds: float) -> CompileRecord | None:
    """Record one ``compile`` call that returned ``exe`` in ``seconds``; None when ``exe`` cannot be weakly
    referenced (then nothing is shown for it)."""
    try:
        previous = _COMPILES.get(exe)
    except TypeError:  # not hashable or not weakly referenceable
        return None
    if previous is None:
        record = CompileRecord(seconds, seconds, False, 1)
    else:
        record = CompileRecord(previous.cold_s, seconds, True, previous.compiles + 1)
    try:
        _COMPILES[exe] = record
    except TypeError:
        return None
    return record


def compile_record(exe) -> CompileRecord | None:
    """The record ``intent.compile`` left for ``exe``, or None (built some other way)."""
    try:
        return _COMPILES.get(exe)
    except TypeError:
        return None


# --- HTML building blocks -----------------------------------------------------------------------------------

def esc(value) -> str:
    """``str(value)`` escaped for HTML text and attribute values."""
    return html.escape(str(value), quote=True)


def table(header: tuple, rows, cls: str = "") -> str:
    """A ``<table>``: one header row, then one row per tuple of cells (every cell escaped)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    attr = f" class='{esc(cls)}'" if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fields(rows, cls: str = "") -> str:
    """A two-column table of (field, value) rows, field names as row headers."""
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    attr = f" class='{esc(cls)}'" if cls else ""
    return f"<table{attr}><tbody>{body}</tbody></table>"


def collapsed(summary: str, text: str) -> str:
    """``text`` preformatted behind a ``<details>`` whose ``<summary>`` is ``summary``."""
    return f"<details><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>"


def pretty(p, cycle, obj, lines) -> None:
    """IPython's pretty printer: ``lines`` one per line (``repr`` on a cycle)."""
    if cycle:
        p.text(repr(obj))
        return
    for i, line in enumerate(lines):
        if i:
            p.break_()
        p.text(line)


class RichDisplay:
    """The displays' common base: ``_repr_pretty_`` is copied into every subclass's own namespace, because
    IPython's pretty printer walks the MRO and takes a class's own ``__repr__`` (every executable defines one,
    attrs generates one) before a ``_repr_pretty_`` inherited from further up."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_repr_pretty_" not in cls.__dict__:
            cls._repr_pretty_ = cls._repr_pretty_

    def _repr_pretty_(self, p, cycle) -> None:
        pretty(p, cycle, self, self._pretty_lines())

    def _pretty_lines(self) -> list:
        return [repr(self)]


# --- executables --------------------------------------------------------------------------------------------

def _seconds(s: float | None) -> str:
    if s is None:
        return "not recorded (built without intent.compile)"
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def _signature(graph) -> str:
    return ", ".join(f"{p.name}: {p.type!r}" for p in graph.params)


def _launch_line(program: str) -> str:
    """The TileLang program's launch (the line after ``def kernel``): a grid of threads or one serial program."""
    lines = program.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("def kernel(") and i + 1 < len(lines):
            launch = lines[i + 1].strip()
            return launch if len(launch) <= 120 else launch[:117] + "..."
    return "(no launch line)"


def schedule_rows(exe) -> list:
    """(part, what runs it) rows. TileLang shows its general program's launch (one serial program, a row group's
    blocks, the flat write nest or the parallel loop as a grid), each tiled specialisation, and then the schedule
    pass's record (``exe.schedule``): per part its mapping, parameters, fused ops and why it got that mapping or
    stayed serial."""
    rows = []
    program = getattr(exe, "program", None)
    if isinstance(program, str):
        rows.append(("general program", _launch_line(program)))
    names = [ev.extent.name for ev in exe.graph.extents]
    for spec in getattr(exe, "specializations", ()) or ():
        conditions = [f"{names[k]} % {t} == 0" for k, t in getattr(spec, "divides", ())]
        conditions += [f"{names[k]} == {n}" for k, n in getattr(spec, "equals", ())]
        rows.append((f"specialization {getattr(spec, 'name', '?')}",
                     f"when {', '.join(conditions)}" if conditions else "always"))
    rows += _schedule_part_rows(exe)
    try:  # cpu: the generated module (imported; Numba compiles on the first call, not here)
        module = getattr(exe, "module", None)
    except Exception as e:  # noqa: BLE001 - an unusable cache directory: say so, as a call would
        rows.append(("program", f"not loaded: {type(e).__name__}: {e}"))
        module = None
    if module is not None and hasattr(module, "kernel"):
        rows.append(("serial build", "kernel (Numba njit)"))
        if hasattr(module, "kernel_parallel"):
            rows.append(("parallel build", "kernel_parallel (Numba prange), for large calls"))
    if not rows and getattr(exe, "source", "") is None:
        rows.append(("program", "the NumPy reference interpreter (no code generation)"))
    return rows


def _schedule_part_rows(exe) -> list:
    """One row per part of ``exe.schedule`` (TileLang executables; nothing for the others)."""
    if "schedule" not in dir(type(exe)):
        return []
    try:
        schedule = exe.schedule
    except Exception as e:  # noqa: BLE001 - the display says why instead of failing the notebook cell
        return [("schedule", f"unavailable: {type(e).__name__}: {e}")]
    last = len(schedule.parts) - 1
    return [("schedule: general program" if k == last else f"schedule: part {k + 1}", part.describe())
            for k, part in enumerate(schedule.parts)]


def _lines(text: str) -> int:
    return text.count("\n") + 1


def _source_text(exe) -> tuple:
    """(summary, text) of the generated source, never compiling anything: showing an executable must not
    start TileLang's compiler for every specialisation (``source`` does, to add the target code TileLang
    writes), so a TileLang executable shows its programs, the general one and each specialisation's."""
    program = getattr(exe, "program", None)
    if isinstance(program, str):
        parts = [program] + [f"# specialization {getattr(s, 'name', '?')}\n{s.program}"
                             for s in getattr(exe, "specializations", ()) or ()]
        text = "\n".join(parts)
        return f"TileLang program ({_lines(text)} lines; .source adds the code TileLang generates from it)", text
    try:
        source = exe.source
    except Exception as e:  # noqa: BLE001 - the display says why instead of failing the notebook cell
        return "source unavailable", f"{type(e).__name__}: {e}"
    if source is None:
        return "no generated source", "this target interprets the graph"
    return f"source ({_lines(source)} lines)", source


def executable_rows(exe) -> list:
    record = compile_record(exe)
    graph = exe.graph
    return [("kernel", graph.name), ("target", exe.target), ("signature", _signature(graph)),
            ("compile", _seconds(None if record is None else record.cold_s)),
            ("cache hit", "unknown" if record is None else ("yes" if record.cache_hit else "no"))]


def executable_html(exe) -> str:
    summary, text = _source_text(exe)
    schedule = schedule_rows(exe)
    parts = [f"<div class='intent-executable'><strong>{esc(exe.target)}</strong> executable "
             f"<code>{esc(exe.graph.name)}</code>", fields(executable_rows(exe), "intent-fields")]
    if schedule:
        parts.append(table(("part", "schedule"), schedule, "intent-schedule"))
    parts += [collapsed(summary, text), "</div>"]
    return "".join(parts)


def executable_lines(exe) -> list:
    lines = [repr(exe)] + [f"  {k}: {v}" for k, v in executable_rows(exe)]
    lines += [f"  {k}: {v}" for k, v in schedule_rows(exe)]
    return lines


class ExecutableDisplay(RichDisplay):
    """Mixin: a compiled executable's notebook display (target, schedule, compile time, cache hit, source
    behind a summary). Needs ``graph`` and ``target``; reads ``source``, ``program``, ``specializations``."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return executable_html(self)

    def _pretty_lines(self) -> list:
        return executable_lines(self)


# --- intent.verify ------------------------------------------------------------------------------------------

def _limit(policy) -> str:
    parts = [f"{name} <= {value}" for name, value in (("ulps", policy.ulps), ("abs", policy.absolute),
                                                        ("rel", policy.relative)) if value is not None]
    return " or ".join(parts) if parts else "bit for bit"


def verify_rows(result) -> list:
    """One row per output: name, dtype and shape, policy, its limit, deviation, mismatches, verdict."""
    rows = []
    for o in result.outputs:
        d = o.comparison.deviations
        rows.append((o.name, f"{o.dtype}{list(o.shape)}", o.policy.policy_id, _limit(o.policy),
                     f"abs={d.absolute} ulps={d.ulps}", o.comparison.mismatches,
                     "passed" if o.passed else "FAILED", o.policy.reason))
    return rows


VERIFY_HEADER = ("output", "type", "policy", "limit", "max deviation", "mismatches", "verdict", "why")


def verification_html(result) -> str:
    verdict = "PASSED" if result.passed else "FAILED"
    return (f"<div class='intent-verify'><strong>verify {esc(result.kernel)}</strong>: {esc(result.target)} vs "
            f"{esc(result.oracle_target)} oracle -&gt; <strong>{verdict}</strong>"
            f"{table(VERIFY_HEADER, verify_rows(result), 'intent-verify-outputs')}</div>")


class KernelVerificationDisplay(RichDisplay):
    """Mixin: ``intent.verify``'s result as a per-output table (policy, deviation, verdict)."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return verification_html(self)

    def _pretty_lines(self) -> list:
        return str(self).splitlines()


# --- verification reports -----------------------------------------------------------------------------------

OUTCOMES = ("passed", "failed", "error", "blocked", "deferred")  # evidence.Outcome values, in column order
REPORT_HEADER = ("operation", *OUTCOMES)


def _evidence_name(e) -> str:
    return e.plan.operation if e.plan is not None else f"subject:{e.subject.name}"


def report_rows(summary: dict) -> list:
    """The per-operation rows of ``VerificationReport.summary()``: operations with a failed, errored or
    blocked case first (most such cases first), then the others in catalogue order."""
    rows = [(name, *(counts.get(o, 0) for o in OUTCOMES)) for name, counts in summary.items()]
    bad = [r for r in rows if any(r[2:5])]
    bad.sort(key=lambda r: -sum(r[2:5]))
    return bad + [r for r in rows if not any(r[2:5])]


def failure_rows(evidence) -> list:
    """One row per failing operation: its worst case (largest ulp deviation), that deviation and the
    tolerance it was held to (a case that errored or was blocked gives its reason)."""
    worst: dict = {}
    for e in evidence:
        if e.outcome.value not in ("failed", "error", "blocked"):
            continue
        name = _evidence_name(e)
        ulps = -1 if e.comparison is None or e.comparison.deviations.ulps is None else e.comparison.deviations.ulps
        if name not in worst or ulps > worst[name][0]:
            worst[name] = (ulps, e)
    rows = []
    for name, (_, e) in worst.items():
        if e.comparison is not None:
            d = e.comparison.deviations
            deviation = f"abs={d.absolute} rel={d.relative} ulps={d.ulps}"
        else:
            deviation = "-"
        tol = e.policy.tolerance if e.policy is not None else None
        tolerance = "-" if e.policy is None else ("bit for bit" if tol is None else
                                                  f"abs={tol.absolute} rel={tol.relative} ulps={tol.ulps}")
        rows.append((name, e.case_id, e.outcome.value, deviation, tolerance, e.reason))
    return rows


FAILURE_HEADER = ("operation", "worst case", "outcome", "deviation", "tolerance", "reason")


def report_html(report) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    profile = report.target_profile.profile_id
    if report.emulated:
        profile += f" on {report.carrier}"
    parts = [f"<div class='intent-report'><strong>verification report</strong> {esc(profile)} -&gt; "
             f"<strong>{verdict}</strong>",
             table(REPORT_HEADER, report_rows(report.summary()), "intent-report-operations")]
    failures = failure_rows(report.evidence)
    if failures:
        parts.append(table(FAILURE_HEADER, failures, "intent-report-failures"))
    parts.append("</div>")
    return "".join(parts)


def report_lines(report) -> list:
    carrier = f" on {report.carrier}" if report.emulated else ""
    lines = [f"verification report {report.target_profile.profile_id}{carrier}: "
             f"{'PASSED' if report.passed else 'FAILED'}",
             "  " + "  ".join(f"{h:>8}" for h in REPORT_HEADER)]
    lines += ["  " + "  ".join(f"{c:>8}" for c in row) for row in report_rows(report.summary())]
    lines += [f"  worst {r[0]}: {r[1]} {r[2]} {r[3]} (tolerance {r[4]}) {r[5]}".rstrip()
              for r in failure_rows(report.evidence)]
    return lines


class ReportDisplay(RichDisplay):
    """Mixin: a verification report as its per-operation outcome table, failures first, then each failing
    operation's worst deviation and tolerance."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return report_html(self)

    def _pretty_lines(self) -> list:
        return report_lines(self)
