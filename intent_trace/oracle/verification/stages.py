"""Stage One (Generic certifies the CPU oracle) and Stage Two (the CPU oracle validates a target).

Both stages walk the validated catalogue, run one case at a time and keep going after any error of
one case (the spec's recoverable RuntimeError and ValueError, and every other Exception: a KeyError in a
target's run is error evidence too), so one broken witness never hides another. Certificates are
issued only from complete, passing evidence, and Stage Two trusts a certificate only after
re-deriving it from the evidence it names (``authority``).
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib

import numpy as np

from ... import compiler
from .acceptance import case_envelopes, case_policy, compare_outputs
from .layouts import evidence_layouts
from .annex_f import annex_f_case
from .authority import certify, reconstruct_authority
from . import emulation
from .cases import Case, execute, operation_cases, subject_case
from .catalogue import f64_authority
from .comparison import exact_policy
from .evidence import CompilationReceipt, Evidence, OracleStageResult, Outcome, StageReport
from .profiles import ORACLE_PROFILE_ID, _resolve, catalogue_for, operation, verification_profile
from .records import VerificationClass as VC, VerificationStage
from .witnesses import operation_kernel, subject_kernels

# Any exception of one case becomes error evidence and the other cases run (a KeyError in a target run once
# aborted the whole stage with no report). KeyboardInterrupt and SystemExit are not Exceptions: they stop.
RECOVERABLE = (Exception,)
REFERENCE_TARGET = "generic"

# Non-public test seam: ``{VerificationStage: fn(case, outputs) -> outputs}`` applied to the candidate's
# results (the CPU oracle's in Stage One, the target's in Stage Two). Only tests set it, to plant a wrong
# result or a recoverable error; no API takes it.
_result_alterations: dict = {}

_progress = contextvars.ContextVar("intent_trace_verification_progress", default=None)


@contextlib.contextmanager
def reporting_progress(callback):
    """Within the block, stages call ``callback(stage_value, done, total, label)`` after each obligation."""
    token = _progress.set(callback)
    try:
        yield
    finally:
        _progress.reset(token)


def _tick(stage, done: int, total: int, label: str) -> None:
    callback = _progress.get()
    if callback is not None:
        callback(stage.value, done, total, label)


# --- running one case -------------------------------------------------------------------------

class _Runner:
    """Compiles witness kernels for one profile (once per kernel) and records a receipt per specialisation. With
    ``emulate`` the target's programs run on its host emulator (``emulation``), and ``host_math`` keeps, per
    receipt, the library functions the emulator ran as the host's libm."""

    def __init__(self, profile_id: str, target: str, emulate: bool = False):
        self.profile_id, self.target, self.emulate = profile_id, target, emulate
        self._executables: dict = {}
        self.receipts: dict = {}
        self.host_math: dict = {}  # receipt id -> host libm functions of its program (emulated runs only)

    def prefetch(self, kernels) -> None:
        """Compile ``kernels``' programs before their cases run, in parallel where the target's builder can
        (``precompile``: TileLang's programs in worker processes); the cases then find them compiled."""
        precompile = getattr(compiler.builder_for(self.target), "precompile", None)
        if precompile is not None and not self.emulate:
            precompile([self.executable(k) for k in kernels])

    def executable(self, kernel):
        exe = self._executables.get(kernel)
        if exe is None:
            options = {"emulate": True} if self.emulate else {}
            exe = self._executables[kernel] = compiler.compile(kernel, target=self.target, **options)
        return exe

    def run(self, kernel, logical, plan, case: Case, arrays) -> tuple:
        """(flat outputs, unwritten element count per output, receipt id) of one case."""
        exe = self.executable(kernel)
        outputs, unwritten = execute(exe, case, arrays)
        return outputs, unwritten, self._receipt(exe, logical, plan, case, arrays)

    def _receipt(self, exe, logical, plan, case: Case, arrays) -> str:
        spec = tuple((str(a.dtype), tuple(s)) for a, s in zip(arrays, case.shapes))
        graph_digest = hashlib.sha256(str(exe.graph).encode()).hexdigest()
        source = getattr(exe, "source", None)
        source_digest = None if source is None else hashlib.sha256(str(source).encode()).hexdigest()
        kernel_id = logical.kernel_id if logical is not None else f"subject.{case.case_id.split('/')[1]}"
        key = (kernel_id, graph_digest, spec)
        carrier = (self.profile_id, self.target) + (("emulated",) if self.emulate else ())
        receipt_id = hashlib.sha256(repr(carrier + key).encode()).hexdigest()[:20]
        if receipt_id not in self.receipts:
            version = _provider_version(self.target) + (", emulated on the host" if self.emulate else "")
            self.receipts[receipt_id] = CompilationReceipt(
                receipt_id, self.profile_id, self.target, kernel_id, "v1" if logical is None else logical.variant,
                None if plan is None else plan.plan_id, spec, graph_digest, source_digest, version)
            if self.emulate:
                self.host_math[receipt_id] = emulation.host_functions(exe)
        return receipt_id


def _provider_version(target: str) -> str:
    module = {"cpu": "numba", "generic": "numpy"}.get(target, "tilelang")
    return f"{module} {importlib.import_module(module).__version__}"


def _evidence(stage, profile_id, logical, plan, subject, case: Case, outcome, reason="", **kw) -> Evidence:
    hashes = case.inputs.input_hashes
    return Evidence(stage, profile_id, logical, plan, subject, case.verification_class, case.case_id, outcome,
                    reason, hashes, hashes, case.shapes, case.output_shapes, case.contraction_length, case.seed, **kw)


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _run_case(stage, profile_id, logical, plan, subject, case, reference, candidate, reference_kernel,
              candidate_kernel, alteration=None, reference_plan=None) -> Evidence:
    """Run ``case`` on the reference and the candidate and compare; any recoverable error becomes evidence."""
    policy = None
    try:
        policy = case_policy(case, plan, stage, reference_plan) if plan is not None else exact_policy()
        envelopes = case_envelopes(case, reference_plan or plan) if policy.envelope_digest else None
        ref_out, ref_unwritten, _ = reference.run(reference_kernel, logical, reference_plan or plan, case,
                                                  case.inputs.oracle_arrays())
        out, unwritten, receipt = candidate.run(candidate_kernel, logical, plan, case, case.inputs.target_arrays())
        if alteration is not None:
            out = alteration(case, out)
    except RECOVERABLE as e:
        return _evidence(stage, profile_id, logical, plan, subject, case, Outcome.ERROR, _error_text(e), policy=policy,
                         reference_plan=reference_plan)
    if case.expected is not None:  # analytic: both paths against the independent expectation
        expected = (np.asarray(case.expected, np.float32),)
        comparison = compare_outputs(expected, out, case.output_dtypes)
        reference_comparison = compare_outputs(expected, ref_out, case.output_dtypes)
        ref_ok = policy.accepts(reference_comparison)
        ok = policy.accepts(comparison) and ref_ok
        reason = "" if ref_ok else f"the reference ({reference.target}) disagrees with the analytic expectation"
    else:
        comparison = compare_outputs(ref_out, out, case.output_dtypes, envelopes)
        ok, reason, reference_comparison = policy.accepts(comparison), "", None
    unwritten_total = sum(unwritten) + sum(ref_unwritten)
    if unwritten_total:
        ok = False
        who = [f"{n} by the candidate ({candidate.target})" for n in [sum(unwritten)] if n] + \
              [f"{n} by the reference ({reference.target})" for n in [sum(ref_unwritten)] if n]
        reason = f"output elements never written: {', '.join(who)}"
    if not ok and not reason:
        reason = f"{comparison.mismatches} mismatching elements outside {policy.policy_id}" + (
            "" if comparison.envelope is None else
            f" (worst element {comparison.envelope.index}: {comparison.envelope.ratio:.3g} x its own envelope)")
    return _evidence(stage, profile_id, logical, plan, subject, case, Outcome.PASSED if ok else Outcome.FAILED, reason,
                     policy=policy, comparison=comparison, reference_plan=reference_plan, receipt_id=receipt,
                     synchronized=True, reference_comparison=reference_comparison, unwritten=unwritten_total,
                     layouts=evidence_layouts(case, reference.target, candidate.target))


def _deferred_evidence(stage, profile_id, c, reference, candidate) -> list:
    """A deferred plan's one DEFERRED record, plus what can still be checked: it runs anyway.

    Accuracy stays deferred, but the record carries the measured deviation of the candidate from the
    reference on ordinary inputs (information, not a gate), and the exact special values of T4's C99
    Annex F list are a separate SPECIAL_VALUES obligation against an independent table (``annex_f``),
    so a vendor ``exp`` that returns 0 fails.
    """
    op = operation(c.plan.operation)
    kernel = operation_kernel(op, c.plan)
    reason, extra = c.reason, {}
    try:
        (case,) = operation_cases(op, c.plan, (VC.BIT_EXACT,))
        ref_out, _, _ = reference.run(kernel, c.kernel, c.plan, case, case.inputs.oracle_arrays())
        out, unwritten, receipt = candidate.run(kernel, c.kernel, c.plan, case, case.inputs.target_arrays())
        comparison = compare_outputs(ref_out, out, case.output_dtypes)
        d = comparison.deviations
        reason += (f" [information, not a gate: {comparison.mismatches} of {case.output_shapes[0][0]} results "
                   f"differ from {reference.target}, max {d.ulps} ulp]")
        hashes = case.inputs.input_hashes
        extra = dict(target_input_hashes=hashes, oracle_input_hashes=hashes, shapes=case.shapes,
                     output_shapes=case.output_shapes, seed=case.seed, comparison=comparison, receipt_id=receipt,
                     synchronized=True, unwritten=sum(unwritten))
    except RECOVERABLE as e:
        reason += f" [information run failed: {_error_text(e)}]"
    out = [Evidence(stage, profile_id, c.kernel, c.plan, None, None, f"{c.plan.plan_id}/deferred", Outcome.DEFERRED,
                    reason, **extra)]
    try:
        special = annex_f_case(c.plan)
    except RECOVERABLE as e:
        return out + [_unprepared(stage, profile_id, c.kernel, c.plan, None, VC.SPECIAL_VALUES, e)]
    if special is not None:
        out.append(_run_case(stage, profile_id, c.kernel, c.plan, None, special, reference, candidate, kernel, kernel,
                             _result_alterations.get(stage)))
    return out


def _unprepared(stage, profile_id, logical, plan, subject, cls, error) -> Evidence:
    name = plan.plan_id if plan is not None else f"subject/{subject.name}"
    return Evidence(stage, profile_id, logical, plan, subject, cls, f"{name}/{cls.value}/prepare", Outcome.ERROR,
                    _error_text(error))


# --- Stage One ------------------------------------------------------------------------------------

def run_oracle_stage(profile) -> OracleStageResult:
    """Compare the CPU oracle with Generic for every active plan, class and subject; certify what passed."""
    profile = _resolve(profile)
    if not profile.serves(VerificationStage.ORACLE):
        raise ValueError(f"profile {profile.profile_id} is not registered for the oracle stage")
    cat = catalogue_for(profile)  # completeness raises before anything runs
    stage = VerificationStage.ORACLE
    reference, oracle = _Runner(profile.profile_id, REFERENCE_TARGET), _Runner(profile.profile_id, profile.target)
    evidence = []
    total = len(cat.classifications) + len(cat.subjects)
    for i, c in enumerate(cat.classifications):
        if not c.active:
            evidence.extend(_deferred_evidence(stage, profile.profile_id, c, reference, oracle))
        else:
            evidence.extend(_plan_evidence(stage, profile.profile_id, c, reference, oracle, None,
                                           _result_alterations.get(stage)))
        _tick(stage, i + 1, total, c.plan.plan_id)
    for i, s in enumerate(cat.subjects):
        evidence.extend(_subject_evidence(stage, profile.profile_id, s.subject, reference, oracle,
                                          _result_alterations.get(stage)))
        _tick(stage, len(cat.classifications) + i + 1, total, f"subject {s.subject.name}")
    evidence = tuple(evidence)
    certificates = tuple(certify(profile.profile_id, cat, evidence))
    receipts = tuple(oracle.receipts.values())
    return OracleStageResult(StageReport(profile.profile_id, stage, evidence, receipts), certificates)


def _plan_evidence(stage, profile_id, c, reference, candidate, reference_plan, alteration) -> list:
    op = operation(c.plan.operation)
    kernel = operation_kernel(op, c.plan)
    ref_kernel = kernel if reference_plan is None else operation_kernel(op, reference_plan)
    out = []
    for cls in c.classes:
        try:
            cases = operation_cases(op, c.plan, (cls,))
            if not cases:
                raise ValueError(f"no witness of class {cls.value} for {c.plan.plan_id}")
        except RECOVERABLE as e:
            out.append(_unprepared(stage, profile_id, c.kernel, c.plan, None, cls, e))
            continue
        for case in cases:
            if case.broadcast is not None:  # the same op with one operand loop-invariant
                out.append(_run_case(stage, profile_id, c.kernel, c.plan, None, case, reference, candidate,
                                     operation_kernel(op, reference_plan or c.plan, case.broadcast),
                                     operation_kernel(op, c.plan, case.broadcast), alteration, reference_plan))
                continue
            out.append(_run_case(stage, profile_id, c.kernel, c.plan, None, case, reference, candidate,
                                 ref_kernel, kernel, alteration, reference_plan))
    return out


def _subject_evidence(stage, profile_id, subject, reference, candidate, alteration) -> list:
    try:
        kernel = subject_kernels()[subject.name]
        case = subject_case(subject, kernel)
    except RECOVERABLE as e:
        return [_unprepared(stage, profile_id, None, None, subject, VC.BIT_EXACT, e)]
    return [_run_case(stage, profile_id, None, None, subject, case, reference, candidate, kernel, kernel,
                      alteration)]


# --- Stage Two ------------------------------------------------------------------------------------

def _certified(c, authority) -> tuple:
    """(the reference plan of classification ``c``, its certificate or None, the classes the certificate lacks)."""
    reference_plan = f64_authority(c.plan) or c.plan
    cert = authority.get(reference_plan)
    missing = () if cert is None else tuple(cls for cls in c.classes if cls not in cert.classes)
    return reference_plan, cert, missing


def _target_kernels(cat, authority) -> list:
    """The witness kernels Stage Two will run on the target: the active, certified plans' and the subjects'."""
    kernels = []
    for c in cat.classifications:
        _, cert, missing = _certified(c, authority)
        if c.active and cert is not None and not missing:
            try:
                kernels.append(operation_kernel(operation(c.plan.operation), c.plan))
            except RECOVERABLE:  # its cases report it
                continue
    names = subject_kernels()
    kernels += [names[s.subject.name] for s in cat.subjects
                if authority.get(s.subject) is not None and s.subject.name in names]
    return kernels


def require_runtime(profile, emulate: bool = False) -> None:
    """Raise the actionable RuntimeError when the profile's provider or runtime (or, with ``emulate``, its host
    emulator) is missing."""
    available = compiler.targets()
    if profile.target not in available:
        raise RuntimeError(f"verification profile {profile.profile_id} needs the {profile.target!r} target, which this "
                           f"build does not provide yet (available targets: {', '.join(available)}); its plans are "
                           f"classified, but nothing can execute on it")
    if emulate:
        emulation.require_emulator()
        return
    check = getattr(compiler.builder_for(profile.target), "require_runtime", None)
    if check is not None:
        check()


def run_target_stage(profile, oracle_result, *, emulate: bool = False) -> StageReport:
    """Verify every active target plan and subject against the CPU oracle, behind rebuilt certificates. With
    ``emulate`` the target's programs run on its host emulator and the evidence is classified as
    :mod:`.emulation` says (the report records the emulated carrier)."""
    profile = _resolve(profile)
    emulation.check_emulate(profile, emulate)
    if not profile.serves(VerificationStage.TARGET):
        raise ValueError(f"profile {profile.profile_id} is not registered for the target stage")
    if not isinstance(oracle_result, OracleStageResult):
        raise TypeError(f"run_target_stage needs the OracleStageResult of run_oracle_stage, got "
                        f"{type(oracle_result).__name__}")
    if oracle_result.report.profile_id != ORACLE_PROFILE_ID or oracle_result.report.stage is not VerificationStage.ORACLE:
        raise ValueError(f"the oracle result must come from the {ORACLE_PROFILE_ID} oracle stage")
    cat = catalogue_for(profile)
    require_runtime(profile, emulate)
    authority = reconstruct_authority(oracle_result)
    stage = VerificationStage.TARGET
    oracle = _Runner(ORACLE_PROFILE_ID, verification_profile(ORACLE_PROFILE_ID).target)
    target = _Runner(profile.profile_id, profile.target, emulate)
    target.prefetch(_target_kernels(cat, authority))
    evidence = []
    total = len(cat.classifications) + len(cat.subjects)
    for i, c in enumerate(cat.classifications):
        _tick(stage, i, total, c.plan.plan_id)
        if not c.active:
            evidence.extend(_deferred_evidence(stage, profile.profile_id, c, oracle, target))
            continue
        reference_plan, cert, missing = _certified(c, authority)
        if cert is None or missing:
            why = (f"no valid cpu-compiled certificate for {reference_plan.plan_id}: "
                   f"{authority.why_not(reference_plan)}" if cert is None else
                   f"the certificate of {reference_plan.plan_id} lacks {', '.join(m.value for m in missing)}")
            evidence.extend(Evidence(stage, profile.profile_id, c.kernel, c.plan, None, cls,
                                     f"{c.plan.plan_id}/{cls.value}/blocked", Outcome.BLOCKED, why,
                                     reference_plan=reference_plan) for cls in c.classes)
            continue
        evidence.extend(_plan_evidence(stage, profile.profile_id, c, oracle, target, reference_plan,
                                       _result_alterations.get(stage)))
    for i, s in enumerate(cat.subjects):
        _tick(stage, len(cat.classifications) + i, total, f"subject {s.subject.name}")
        if authority.get(s.subject) is None:
            evidence.append(Evidence(stage, profile.profile_id, None, None, s.subject, VC.BIT_EXACT,
                                     f"subject/{s.subject.name}/blocked", Outcome.BLOCKED,
                                     f"no valid cpu-compiled certificate for subject {s.subject.name}: "
                                     f"{authority.why_not(s.subject)}"))
            continue
        evidence.extend(_subject_evidence(stage, profile.profile_id, s.subject, oracle, target,
                                          _result_alterations.get(stage)))
    _tick(stage, total, total, "done")
    evidence = [emulation.classify(e, target.host_math.get(e.receipt_id, ())) for e in evidence]
    return StageReport(profile.profile_id, stage, tuple(evidence), tuple(target.receipts.values()), emulate)
