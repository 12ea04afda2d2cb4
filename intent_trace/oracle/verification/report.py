"""``verify_backend``: one schema-v3 report binding both stages, certificates and receipts; atomic JSONL.

The report is built completely in memory first; only then, if the caller named a destination, is
it written to a temporary file beside that path and renamed over it, so a failure (an I/O error,
an interrupted run) leaves any earlier report intact and no temporary file behind.
"""
from __future__ import annotations

import os
import tempfile

import attrs

from ...caches import CacheUse, check_cache_dir, verification_caches
from ...display import ReportDisplay
from .emulation import check_emulate
from .evidence import OracleStageResult, Outcome, StageReport, canonical_json
from .profiles import ORACLE_PROFILE_ID, catalogue_for, verification_profile
from .records import VerificationProfile, VerificationStage
from .stages import require_runtime, run_oracle_stage, run_target_stage

SCHEMA_VERSION = 3
FAILING = (Outcome.FAILED, Outcome.ERROR, Outcome.BLOCKED)


@attrs.frozen
class VerificationReport(ReportDisplay):
    schema_version: int
    target_profile: VerificationProfile
    oracle_profile: VerificationProfile
    classifications: tuple
    subject_classifications: tuple
    oracle: OracleStageResult
    target: StageReport
    caches: CacheUse | None = None  # which compile cache the run used (a kept directory or a temporary one)

    @property
    def emulated(self) -> bool:
        """Whether Stage Two ran the target's programs on its host emulator (``verify_backend(..., emulate=True)``):
        evidence about the programs, not about the device (verification/emulation.py says what it shows)."""
        return self.target.emulated

    @property
    def carrier(self) -> str:
        """The target's carrier as the summaries name it: ``tilelang-metal``, or ``tilelang-metal (emulated on the
        host)``."""
        return self.target_profile.carrier + (" (emulated on the host)" if self.emulated else "")

    @property
    def certificates(self) -> tuple:
        return self.oracle.certificates

    @property
    def receipts(self) -> tuple:
        """Every distinct compilation receipt of both stages, in order (verifying cpu-compiled as a target
        compiles the oracle's own specialisations again: one receipt each, not two)."""
        return tuple({r.receipt_id: r for r in self.oracle.report.receipts + self.target.receipts}.values())

    @property
    def evidence(self) -> tuple:
        return self.oracle.report.evidence + self.target.evidence

    @property
    def passed(self) -> bool:
        """No failed, errored or blocked evidence in either stage (deferred plans are explicit, not failures)."""
        return not any(e.outcome in FAILING for e in self.evidence)

    def summary(self, stage: VerificationStage = VerificationStage.TARGET) -> dict:
        """operation (or ``subject:name``) -> {outcome: count} for one stage, in catalogue order."""
        report = self.oracle.report if stage is VerificationStage.ORACLE else self.target
        table: dict = {}
        for e in report.evidence:
            name = e.plan.operation if e.plan is not None else f"subject:{e.subject.name}"
            row = table.setdefault(name, {o.value: 0 for o in Outcome})
            row[e.outcome.value] += 1
        return table

    def lines(self):
        """The canonical JSONL records: a header, classifications, evidence, certificates, receipts."""
        yield {"record": "report", "schema_version": self.schema_version,
               "target_profile": self.target_profile.to_json(), "oracle_profile": self.oracle_profile.to_json(),
               "oracle_counts": self.oracle.report.counts(), "target_counts": self.target.counts(),
               "passed": self.passed, "compile_cache": None if self.caches is None else self.caches.to_json(),
               "carrier_emulated": self.emulated}
        for c in self.classifications:
            yield {"record": "classification", **c.to_json()}
        for s in self.subject_classifications:
            yield {"record": "subject_classification", **s.to_json()}
        for e in self.evidence:
            yield {"record": "evidence", **e.to_json()}
        for cert in self.certificates:
            yield {"record": "certificate", **cert.to_json()}
        for r in self.receipts:
            yield {"record": "receipt", **r.to_json()}

    def to_jsonl(self) -> str:
        return "".join(canonical_json(line) + "\n" for line in self.lines())


def check_output(output) -> None:
    """TypeError / ValueError for a destination ``write_atomically`` could not replace, raised before anything
    runs: a directory, something that is not a regular file, a missing parent or a file as parent, or a
    directory where no file can be created (``/proc``, read-only). The check creates and removes one probe
    file beside the destination, as the write itself will."""
    if output is None:
        return
    if not isinstance(output, (str, os.PathLike)):
        raise TypeError(f"output must be a str or path-like destination, or None; got {type(output).__name__}")
    path = os.path.abspath(os.fspath(output))
    if os.path.isdir(path):
        raise ValueError(f"output {path} is a directory, not a report file")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise ValueError(f"output {path} exists and is not a regular file")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise ValueError(f"output {path}: its directory {parent} does not exist or is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".intent-trace-report-", suffix=".probe", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"output {path}: no file can be written in {parent} ({e.strerror or e})") from None


def _file_mode(path: str) -> int:
    """The mode the destination keeps: an existing file's, else what ``open`` would create (0666 less umask);
    mkstemp's 0600 would otherwise replace it."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def write_atomically(path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) or leave it untouched: temp file in the same directory, then rename."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    mode = _file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=".intent-trace-report-", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def verify_backend(target, *, output=None, cache_dir=None, emulate=False) -> VerificationReport:
    """Run Stage One on cpu-compiled, then Stage Two on the ``target`` profile; return (and optionally write) the report.

    ``emulate=True`` runs Stage Two's target programs on the carrier's host emulator (metal-tilelang: the generated
    Metal source as host C++, ``backends/tilelang/metal_emulation``); the report records it (``emulated``, the
    JSONL header's ``carrier_emulated``) and classifies results that rest on the host's libm (:mod:`.emulation`).

    Compiled kernels go to ``cache_dir`` (or ``$INTENT_TRACE_CACHE_DIR``), kept for later runs, or by default to a
    temporary directory removed afterwards (``intent_trace.caches``); the report records which.
    """
    if type(target) is not str:  # an exact string selector (not a subclass)
        raise TypeError(f"verify_backend takes a str target profile_id, got {type(target).__name__}")
    check_output(output)
    check_cache_dir(cache_dir)
    profile = verification_profile(target)  # unknown: ValueError before anything runs or is written
    if not profile.serves(VerificationStage.TARGET):
        raise ValueError(f"profile {target} is not registered as a target")
    check_emulate(profile, emulate)  # before anything runs or is written
    oracle_profile = verification_profile(ORACLE_PROFILE_ID)
    # the redirect comes first: the completeness check and the runtime check import the compilers, and
    # TileLang creates its cache directories when it is imported
    with verification_caches(cache_dir) as caches:
        cat = catalogue_for(profile)
        require_runtime(profile, emulate)
        oracle = run_oracle_stage(oracle_profile)
        target_report = run_target_stage(profile, oracle, emulate=emulate)
    report = VerificationReport(SCHEMA_VERSION, profile, oracle_profile, cat.classifications, cat.subjects, oracle,
                                target_report, caches)
    if output is not None:
        write_atomically(output, report.to_jsonl())
    return report
