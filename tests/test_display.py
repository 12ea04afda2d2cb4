"""Requirement (issue 20, item 2): executables, ``intent.verify`` results and verification reports have notebook
displays (``_repr_html_``, ``_repr_pretty_``) whose HTML is well formed, escaped (a name cannot inject markup) and
holds the expected rows, while ``str``/``repr`` stay what a terminal shows."""
from __future__ import annotations

from html.parser import HTMLParser

import attrs
import numpy as np
from IPython.lib.pretty import pretty

import intent_trace as intent
from intent_trace import I, compiler, display
from intent_trace.oracle.verification.comparison import Comparison, Deviations, Tolerance, TolerancePolicy
from intent_trace.oracle.verification.evidence import Evidence, OracleStageResult, Outcome, StageReport
from intent_trace.oracle.verification.profiles import verification_profile
from intent_trace.oracle.verification.records import PlanKey, Subject, VerificationStage
from intent_trace.oracle.verification.report import VerificationReport

EVIL = "<script>alert('x')</script>"


class Parsed(HTMLParser):
    """The HTML's tags (balanced, checked as it goes), its text, and its tables as rows of cell texts."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.stack, self.tags, self.text, self.tables = [], [], [], {}
        self._table = self._row = self._cell = None
        self.feed(text)
        self.close()
        assert not self.stack, f"unclosed tags {self.stack}"

    def handle_starttag(self, tag, attrs_):
        self.stack.append(tag)
        self.tags.append(tag)
        if tag == "table":
            self._table = []
            self.tables[dict(attrs_).get("class", f"table{len(self.tables)}")] = self._table
        elif tag == "tr":
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:] or 'nothing'}"
        self.stack.pop()
        if tag in ("td", "th"):
            self._row.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def handle_startendtag(self, tag, attrs_):
        raise AssertionError(f"self-closing <{tag}/> in the display")


def parse(text: str) -> Parsed:
    parsed = Parsed(text)
    assert set(parsed.tags) <= {"div", "strong", "code", "table", "thead", "tbody", "tr", "th", "td", "details",
                                "summary", "pre"}, parsed.tags
    return parsed


@intent.kernel
def affine(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], a: I.f32):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * a + 1.0


def test_executable_display_on_every_target(target):
    exe = intent.compile(affine, target=target)
    parsed = parse(exe._repr_html_())
    rows = dict(parsed.tables["intent-fields"])
    assert rows["kernel"] == "affine" and rows["target"] == target
    assert rows["signature"] == "x: In[f32, (N,)], y: Out[f32, (N,)], a: f32"
    assert rows["compile"].endswith(" ms") or rows["compile"].endswith(" s")
    assert rows["cache hit"] in ("yes", "no")
    assert parsed.tables["intent-schedule"][0] == ["part", "schedule"] and len(parsed.tables["intent-schedule"]) > 1
    assert "details" in parsed.tags and "summary" in parsed.tags
    shown = getattr(exe, "program", None) or exe.source  # TileLang: its program; cpu: the Numba module
    if shown is not None:  # behind the summary, as text (a TileLang prelude's #include <...> escaped)
        assert shown in "".join(parsed.text)
    assert repr(exe) == f"<{target} executable affine>"  # the plain text is unchanged
    shown = pretty(exe)
    assert shown.startswith(repr(exe) + "\n") and f"  target: {target}" in shown


def test_tilelang_display_shows_the_general_programs_launch():
    exe = intent.compile(affine, target="tilelang-c")
    schedule = parse(exe._repr_html_()).tables["intent-schedule"]
    part, launch = schedule[1]
    assert part == "general program" and launch.startswith("with T.Kernel(1") and launch in exe.program.splitlines()[
        next(i for i, line in enumerate(exe.program.splitlines()) if line.startswith("def kernel(")) + 1]


def test_showing_a_tilelang_executable_compiles_nothing(monkeypatch):
    """The display shows the TileLang program without starting TileLang's compiler (``source`` would compile the
    general program and every specialisation)."""
    from intent_trace.backends.tilelang import target as tilelang_target

    @intent.kernel
    def shown(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * x[d]

    def refuse(*args, **kwargs):
        raise AssertionError("the display compiled a program")

    monkeypatch.setattr(tilelang_target, "compile_program", refuse)
    exe = intent.compile(shown, target="tilelang-c")
    parsed = parse(exe._repr_html_())
    assert exe.program in "".join(parsed.text)
    assert any(t.startswith("TileLang program (") for t in parsed.text)
    pretty(exe)


def test_tilelang_display_lists_each_specialization_and_when_it_runs():
    """A CUDA executable's tiled specialisations (none on tilelang-c: a stand-in with the attributes
    TileLangExecutable exposes, specializations of cuda_access.Specialization's fields)."""
    from intent_trace.backends.tilelang.cuda_access import Specialization

    @intent.kernel
    def mm(a: I.In[I.f32, ("M", "K")], b: I.In[I.f32, ("K", "N")], c: I.Out[I.f32, ("M", "N")]):
        c[:, :] = I.matmul(a[:, :], b[:, :], acc_dtype=I.f32)

    exe = intent.compile(mm, target="tilelang-c")
    names = [ev.extent.name for ev in exe.graph.extents]
    specs = (Specialization(f"tiled{EVIL}", "# tiled program <T>", ((0, 128), (1, 64))),
             Specialization("fixed", "# fixed program", (), ((2, 32),)))
    fake = type("Shown", (display.ExecutableDisplay,), {})()
    fake.__dict__.update(graph=exe.graph, target="tilelang-cuda", program=exe.program, specializations=specs)
    parsed = parse(fake._repr_html_())
    schedule = parsed.tables["intent-schedule"]
    assert schedule[2:] == [[f"specialization tiled{EVIL}", f"when {names[0]} % 128 == 0, {names[1]} % 64 == 0"],
                            ["specialization fixed", f"when {names[2]} == 32"]]
    text = "".join(parsed.text)
    assert f"# specialization tiled{EVIL}\n# tiled program <T>" in text and "script" not in parsed.tags


def test_cpu_display_names_its_builds():
    @intent.kernel
    def rows(x: I.In[I.f32, ("M", "N")], y: I.Out[I.f32, ("M",)]):
        for r in I.parallel(I.domain(0, x.shape[0])):
            y[r] = I.reduce.sum(x[r, I.domain(0, x.shape[1])], axis=0)

    for kernel in (affine, rows):
        exe = intent.compile(kernel, target="cpu")
        schedule = dict(parse(exe._repr_html_()).tables["intent-schedule"][1:])
        assert schedule["serial build"] == "kernel (Numba njit)"
        has_parallel = hasattr(exe.module, "kernel_parallel")
        assert ("parallel build" in schedule) == has_parallel
    assert has_parallel  # the parallel loop gets a prange build
    generic = dict(parse(intent.compile(affine, target="generic")._repr_html_()).tables["intent-schedule"][1:])
    assert generic == {"program": "the NumPy reference interpreter (no code generation)"}


def test_compile_records_cold_time_and_the_in_process_cache_hit():
    @intent.kernel
    def fresh(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] + 2.0

    first = intent.compile(fresh, target="cpu")
    record = display.compile_record(first)
    assert record is not None and record.cold_s > 0 and not record.cache_hit and record.compiles == 1
    assert dict(parse(first._repr_html_()).tables["intent-fields"])["cache hit"] == "no"
    again = intent.compile(fresh, target="cpu")
    assert again is first
    record = display.compile_record(first)
    assert record.cache_hit and record.compiles == 2 and record.last_s > 0
    assert dict(parse(first._repr_html_()).tables["intent-fields"])["cache hit"] == "yes"
    # generic builds a new executable per compile: never a hit
    g1, g2 = intent.compile(fresh, target="generic"), intent.compile(fresh, target="generic")
    assert g1 is not g2 and not display.compile_record(g2).cache_hit


def test_an_executable_built_without_compile_says_so():
    exe = compiler.builder_for("generic")(affine.trace())
    rows = dict(parse(exe._repr_html_()).tables["intent-fields"])
    assert rows["compile"].startswith("not recorded") and rows["cache hit"] == "unknown"


def test_executable_html_escapes_kernel_and_parameter_names():
    graph = affine.trace()
    params = (attrs.evolve(graph.params[0], name=EVIL),) + graph.params[1:]
    exe = compiler.builder_for("generic")(attrs.evolve(graph, name=EVIL, params=params))
    parsed = parse(exe._repr_html_())
    assert "script" not in parsed.tags
    rows = dict(parsed.tables["intent-fields"])
    assert rows["kernel"] == EVIL and rows["signature"].startswith(f"{EVIL}: In[f32")


def _verified():
    x = np.arange(5, dtype=np.float32)
    return intent.verify(affine, "cpu", x, np.zeros(5, np.float32), 3.0)


def test_verify_result_html_has_one_row_per_output():
    result = _verified()
    parsed = parse(result._repr_html_())
    header, *rows = parsed.tables["intent-verify-outputs"]
    assert header == list(display.VERIFY_HEADER)
    assert len(rows) == 1
    name, dtype, policy, limit, deviation, mismatches, verdict, why = rows[0]
    assert (name, dtype, verdict, mismatches) == ("y", "float32[5]", "passed", "0")
    assert policy == result.outputs[0].policy.policy_id and why == result.outputs[0].policy.reason
    assert deviation == "abs=0.0 ulps=0"
    assert "PASSED" in "".join(parsed.text)
    assert str(result).startswith("verify affine: cpu vs cpu oracle -> PASSED")  # unchanged plain text
    assert pretty(result) == str(result)


def test_verify_result_html_escapes_and_shows_failures():
    result = _verified()
    out = attrs.evolve(result.outputs[0], name=EVIL, passed=False,
                       policy=attrs.evolve(result.outputs[0].policy, reason="<b>why</b>", ulps=4))
    bad = attrs.evolve(result, kernel=EVIL, outputs=(out,))
    parsed = parse(bad._repr_html_())
    assert "script" not in parsed.tags and "b" not in parsed.tags
    row = parsed.tables["intent-verify-outputs"][1]
    assert row[0] == EVIL and row[3] == "ulps <= 4" and row[6] == "FAILED" and row[7] == "<b>why</b>"
    assert f"verify {EVIL}" in "".join(parsed.text) and "FAILED" in "".join(parsed.text)


# --- verification reports ---------------------------------------------------------------------------------

def _plan(operation: str) -> PlanKey:
    return PlanKey.from_plan_like({"operation": operation, "operands": [("x", "f32")], "compute_dtype": "f32",
                                   "output_dtype": "f32"})


def _evidence(name, case, outcome, ulps=None, reason="", tolerance=None):
    plan = _plan(name) if not name.startswith("subject:") else None
    subject = Subject("movement", name.removeprefix("subject:"), ("gather",), "compact") if plan is None else None
    comparison = None if ulps is None else Comparison(Deviations(ulps * 1e-7, ulps * 1e-7, ulps), 1 if ulps else 0,
                                                      0, 0)
    policy = None if tolerance is False else TolerancePolicy("p", tolerance, "d")
    return Evidence(VerificationStage.TARGET, "cpu-compiled", None, plan, subject, None, case, outcome, reason,
                    comparison=comparison, policy=policy)


def _report(evidence) -> VerificationReport:
    profile = verification_profile("cpu-compiled")
    stage = StageReport("cpu-compiled", VerificationStage.TARGET, tuple(evidence), ())
    oracle = OracleStageResult(StageReport("cpu-compiled", VerificationStage.ORACLE, (), ()), ())
    return VerificationReport(3, profile, profile, (), (), oracle, stage)


def test_report_html_lists_failures_first_with_their_worst_deviation_and_tolerance():
    tol = Tolerance(ulps=2)
    report = _report([
        _evidence("add", "add-1", Outcome.PASSED, ulps=0, tolerance=None),
        _evidence("add", "add-2", Outcome.DEFERRED, reason="plan deferred", tolerance=False),
        _evidence(EVIL, "evil-1", Outcome.FAILED, ulps=3, tolerance=tol),
        _evidence(EVIL, "evil-2", Outcome.FAILED, ulps=9, tolerance=tol),
        _evidence(EVIL, "evil-3", Outcome.PASSED, ulps=1, tolerance=tol),
        _evidence("exp", "exp-1", Outcome.ERROR, reason="<i>boom</i>", tolerance=False),
        _evidence("subject:gather", "g-1", Outcome.BLOCKED, reason="no runtime", tolerance=False),
    ])
    parsed = parse(report._repr_html_())
    assert "script" not in parsed.tags and "i" not in parsed.tags
    header, *rows = parsed.tables["intent-report-operations"]
    assert header == ["operation", "passed", "failed", "error", "blocked", "deferred"]
    # failing operations first (most failing cases first), then the rest in catalogue order
    assert rows == [[EVIL, "1", "2", "0", "0", "0"], ["exp", "0", "0", "1", "0", "0"],
                    ["subject:gather", "0", "0", "0", "1", "0"], ["add", "1", "0", "0", "0", "1"]]
    header, *failures = parsed.tables["intent-report-failures"]
    assert header == list(display.FAILURE_HEADER)
    by_op = {r[0]: r for r in failures}
    assert set(by_op) == {EVIL, "exp", "subject:gather"}
    assert by_op[EVIL][1:5] == ["evil-2", "failed", "abs=9e-07 rel=9e-07 ulps=9", f"abs=inf rel=inf ulps=2"]
    assert by_op["exp"][2:] == ["error", "-", "-", "<i>boom</i>"]
    assert "FAILED" in "".join(parsed.text)
    shown = pretty(report)
    assert shown.splitlines()[0] == "verification report cpu-compiled: FAILED"
    assert "worst subject:gather: g-1 blocked" in shown


def test_a_passing_report_has_no_failure_table():
    report = _report([_evidence("add", "add-1", Outcome.PASSED, ulps=0)])
    parsed = parse(report._repr_html_())
    assert "intent-report-failures" not in parsed.tables
    assert parsed.tables["intent-report-operations"][1] == ["add", "1", "0", "0", "0", "0"]
    assert "PASSED" in "".join(parsed.text)
