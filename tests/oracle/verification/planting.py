"""Plant faults through a target's compiled executable: the real kernel runs, then the fault rewrites what it
wrote (or what it was given), exactly as a miscompiled target would. Nothing goes through a private seam of
the verifier, so a verifier that only checks what a seam hands it cannot pass these tests by accident."""
from __future__ import annotations

import contextlib

from intent_trace import compiler
from intent_trace.oracle.verification import catalogue as C
from intent_trace.oracle.verification.profiles import operation
from intent_trace.oracle.verification.witnesses import operation_kernel


class PlantedExecutable:
    """A compiled executable whose call goes through ``fault(run, kernel, args)``: ``run()`` is the real call
    on ``args`` and ``run(*other)`` the real call on other arguments (a fault may skip it, call it, then
    rewrite the outputs in ``args``, or raise)."""

    def __init__(self, exe, kernel, fault):
        self._exe, self._kernel, self._fault = exe, kernel, fault

    def __call__(self, *args):
        return self._fault(lambda *other: self._exe(*(other or args)), self._kernel, args)

    def __getattr__(self, name):
        return getattr(self._exe, name)


@contextlib.contextmanager
def planted(monkeypatch, target: str, fault):
    """Within the block, every kernel compiled for ``target`` runs through ``fault`` (see PlantedExecutable)."""
    real = compiler.compile

    def compile(kernel, target_name=compiler.DEFAULT_TARGET, **options):
        target_name = options.pop("target", target_name)
        exe = real(kernel, target=target_name, **options)
        return PlantedExecutable(exe, kernel, fault) if target_name == target else exe

    with monkeypatch.context() as m:
        m.setattr(compiler, "compile", compile)
        yield


def stage_one(plan_id: str) -> list:
    """Stage One evidence of one plan (every class), on fresh runners."""
    from intent_trace.oracle import classify_profile_plans
    from intent_trace.oracle.verification import stages
    from intent_trace.oracle.verification.records import VerificationStage

    c = next(c for c in classify_profile_plans("cpu-compiled") if c.plan.plan_id == plan_id)
    return stages._plan_evidence(VerificationStage.ORACLE, "cpu-compiled", c, stages._Runner("cpu-compiled", "generic"),
                                 stages._Runner("cpu-compiled", "cpu"), None, None)


def plan(plan_id: str):
    """(Operation, PlanKey) of a catalogue plan id."""
    for op in C.OPERATIONS:
        for p in op.plans:
            if p.plan_id == plan_id:
                return op, p
    raise KeyError(plan_id)


def kernel_of(plan_id: str):
    op, p = plan(plan_id)
    return operation_kernel(op, p)


def only(plan_id: str, fault):
    """A fault ``fault(run, args)`` for the witness kernel of one plan; every other kernel runs unchanged."""
    kernel = kernel_of(plan_id)

    def restricted(run, k, args):
        if k is not kernel:
            return run()
        return fault(run, args)
    return restricted


def is_case(args, case) -> bool:
    """Whether a call's inputs are the decoded payloads of ``case`` (bit for bit)."""
    inputs = case.inputs.target_arrays()
    return len(args) >= len(inputs) and all(
        a.shape == tuple(s) and a.tobytes() == x.tobytes() for a, x, s in zip(args, inputs, case.shapes))


def after(rewrite):
    """A fault that runs the real kernel, then ``rewrite(args)`` its outputs in place."""
    def fault(run, args):
        run()
        rewrite(args)
    return fault


__all__ = ["PlantedExecutable", "planted", "plan", "kernel_of", "only", "after", "is_case", "stage_one", "operation"]
