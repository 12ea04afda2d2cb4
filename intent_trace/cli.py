"""``intent-trace``: the command line. ``intent-trace verify PROFILE [--output FILE] [--cache-dir DIR] [--emulate]``.

Prints a progress bar (stderr) while the stages run and a summary table per operation at the end;
exits 1 when any evidence failed, errored or was blocked, 2 on a usage or setup error (an unusable
``--output`` or ``--cache-dir`` is one, reported before anything runs). Third-party libraries' log
output (TileLang prints a line per compiled kernel) is silenced while the stages run, so the progress
bar and the summary stay readable.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time

# loggers of the compilers verification drives; their INFO lines are not the user's business here
THIRD_PARTY_LOGGERS = ("tilelang", "tvm", "numba", "torch")

_OUTCOMES = ("passed", "failed", "error", "blocked", "deferred")


class ProgressBar:
    """One status line, redrawn in place on a terminal; a line per stage elsewhere (logs stay readable)."""

    def __init__(self, stream):
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.last_stage = None

    def __call__(self, stage: str, done: int, total: int, label: str) -> None:
        if self.tty:
            width = 30
            filled = width * done // max(total, 1)
            text = f"\r{stage:>6} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:60]:<60}"
            self.stream.write(text)
            if done == total:
                self.stream.write("\n")
            self.stream.flush()
        elif stage != self.last_stage:
            self.stream.write(f"{stage} stage: {total} obligations\n")
            self.stream.flush()
        self.last_stage = stage


def summary_table(title: str, table: dict) -> str:
    names = list(table)
    width = max([len("operation")] + [len(n) for n in names])
    head = f"{'operation':<{width}}  " + "  ".join(f"{o:>8}" for o in _OUTCOMES)
    rows = [title, head, "-" * len(head)]
    totals = dict.fromkeys(_OUTCOMES, 0)
    for name in names:
        counts = table[name]
        rows.append(f"{name:<{width}}  " + "  ".join(f"{counts[o]:>8}" for o in _OUTCOMES))
        for o in _OUTCOMES:
            totals[o] += counts[o]
    rows.append("-" * len(head))
    rows.append(f"{'total':<{width}}  " + "  ".join(f"{totals[o]:>8}" for o in _OUTCOMES))
    return "\n".join(rows)


@contextlib.contextmanager
def quiet_third_party_logs(level=logging.WARNING):
    """Within the block, the compilers' loggers drop records below ``level`` (and TileLang does not announce
    each compilation); everything is restored afterwards."""
    loggers = [logging.getLogger(name) for name in THIRD_PARTY_LOGGERS]
    saved = [lg.level for lg in loggers]
    saved_env = os.environ.get("TILELANG_PRINT_ON_COMPILATION")
    os.environ["TILELANG_PRINT_ON_COMPILATION"] = "0"
    for lg in loggers:
        lg.setLevel(max(level, lg.getEffectiveLevel()))
    try:
        yield
    finally:
        for lg, lv in zip(loggers, saved):
            lg.setLevel(lv)
        if saved_env is None:
            os.environ.pop("TILELANG_PRINT_ON_COMPILATION", None)
        else:
            os.environ["TILELANG_PRINT_ON_COMPILATION"] = saved_env


def _verify(args) -> int:
    from .caches import check_cache_dir
    from .oracle.verification import VerificationStage, reporting_progress, verify_backend
    from .oracle.verification.report import check_output

    started = time.monotonic()
    try:  # usage errors first, before anything is imported from the compilers or run
        check_output(args.output)
        check_cache_dir(args.cache_dir)
    except (ValueError, TypeError) as e:
        print(f"intent-trace verify: {e}", file=sys.stderr)
        return 2
    try:
        with reporting_progress(ProgressBar(sys.stderr)), quiet_third_party_logs():
            report = verify_backend(args.profile, output=args.output, cache_dir=args.cache_dir, emulate=args.emulate)
    except (ValueError, RuntimeError, TypeError) as e:
        print(f"intent-trace verify: {e}", file=sys.stderr)
        return 2
    print(summary_table(f"Stage One: cpu-compiled oracle vs generic ({len(report.certificates)} certificates)",
                        report.summary(VerificationStage.ORACLE)))
    print()
    carrier = f" on {report.carrier}" if report.emulated else ""
    print(summary_table(f"Stage Two: {report.target_profile.profile_id}{carrier} vs the cpu-compiled oracle",
                        report.summary(VerificationStage.TARGET)))
    print()
    verdict = "PASSED" if report.passed else "FAILED"
    where = f"; report written to {args.output}" if args.output else ""
    if report.caches is not None:
        where += (f"; compiled kernels kept in {report.caches.root}" if report.caches.kept else
                  "; compiled in a temporary cache, removed (--cache-dir DIR keeps them for the next run)")
    if report.emulated:
        verdict += f" ({report.carrier}: evidence about the programs, not the device)"
    print(f"{verdict}: {len(report.evidence)} evidence records, {len(report.receipts)} compilation receipts, "
          f"{time.monotonic() - started:.1f} s{where}")
    if not report.passed:
        for e in report.evidence:
            if e.outcome.value in ("failed", "error", "blocked"):
                print(f"  {e.outcome.value:>7} {e.stage.value} {e.case_id}: {e.reason}")
    return 0 if report.passed else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="intent-trace", description="intent_trace command line")
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="verify a target profile against the certified CPU oracle")
    verify.add_argument("profile", help="target profile id, e.g. cpu-compiled, c-tilelang, cuda-tilelang")
    verify.add_argument("--output", metavar="FILE", help="write the schema-v3 report as JSONL (atomically)")
    verify.add_argument("--cache-dir", metavar="DIR", default=None,
                        help="keep compiled kernels in DIR between runs (default: $INTENT_TRACE_CACHE_DIR, else a "
                             "temporary directory removed afterwards)")
    verify.add_argument("--emulate", action="store_true",
                        help="run Stage Two's target programs on the carrier's host emulator (metal-tilelang: the "
                             "generated Metal source as host C++; no Mac needed); the report records it")
    args = parser.parse_args(argv)
    if args.command == "verify":
        return _verify(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
