"""Requirement: backend verification selects one explicit target profile; reports are immutable and written
atomically as canonical UTF-8 JSONL. Also the CLI and ``intent.verify``."""
from __future__ import annotations

import json
import os

import attrs
import numpy as np
import pytest

import intent_trace as intent
from intent_trace import I, cli, compiler
from intent_trace.oracle import SCHEMA_VERSION, Outcome, Tolerance, VerificationReport, verify_backend
from intent_trace.oracle.verification import report as R


@pytest.fixture
def stubbed_stages(monkeypatch, oracle_result, stage_two):
    """verify_backend with the session's stage runs (the stages themselves are tested in test_stages.py)."""
    calls = []
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: calls.append(("oracle", p.profile_id)) or oracle_result)
    monkeypatch.setattr(R, "run_target_stage", lambda p, o, **kw: calls.append(("target", p.profile_id)) or stage_two)
    return calls


@pytest.mark.parametrize("target, output", [(None, None), (3, None), (b"cpu-compiled", None),
                                            ("cpu-compiled", 5), ("cpu-compiled", ["x"])])
def test_verify_backend_rejects_invalid_types(target, output, stubbed_stages):
    with pytest.raises(TypeError):
        verify_backend(target, output=output)
    assert not stubbed_stages


def test_verify_backend_rejects_an_unknown_target_before_anything(tmp_path, stubbed_stages):
    out = tmp_path / "report.jsonl"
    out.write_text("earlier report\n")
    with pytest.raises(ValueError, match="unknown verification profile"):
        verify_backend("cuda", output=out)
    assert out.read_text() == "earlier report\n" and not stubbed_stages
    assert os.listdir(tmp_path) == ["report.jsonl"]


def test_verify_backend_requires_the_provider_runtime_before_running(stubbed_stages, monkeypatch):
    monkeypatch.setattr(compiler, "targets", lambda: ("generic", "cpu"))
    with pytest.raises(RuntimeError, match="tilelang"):
        verify_backend("metal-tilelang")
    assert not stubbed_stages


def test_verify_backend_binds_both_stages_into_one_schema_v3_report(tmp_path, stubbed_stages):
    out = tmp_path / "report.jsonl"
    report = verify_backend("cpu-compiled", output=str(out))
    assert stubbed_stages == [("oracle", "cpu-compiled"), ("target", "cpu-compiled")]
    assert isinstance(report, VerificationReport) and report.schema_version == SCHEMA_VERSION == 3
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        report.schema_version = 2
    raw = out.read_bytes()
    lines = raw.decode("utf-8").splitlines()
    assert raw.endswith(b"\n") and raw.decode("utf-8") == report.to_jsonl()
    records = [json.loads(line) for line in lines]
    for line, record in zip(lines, records):  # canonical: sorted keys, no spaces
        assert line == json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    kinds = [r["record"] for r in records]
    assert kinds[0] == "report" and records[0]["schema_version"] == 3
    assert {"classification", "subject_classification", "evidence", "certificate", "receipt"} <= set(kinds)
    assert kinds.count("certificate") == len(report.certificates)
    assert kinds.count("receipt") == len(report.receipts)
    assert records[0]["passed"] is False  # the doctored stage-two run has blocked and error evidence


def test_inspect_a_local_report_with_deferred_work(tmp_path, stubbed_stages, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = verify_backend("cpu-compiled")
    deferred = [e for e in report.target.evidence if e.outcome is Outcome.DEFERRED]
    assert deferred and all(e.reason for e in deferred)
    assert os.listdir(tmp_path) == []  # nothing persisted without a destination


def test_io_error_leaves_the_earlier_file_intact(tmp_path, stubbed_stages, monkeypatch):
    out = tmp_path / "report.jsonl"
    out.write_text("earlier report\n")

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(R.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        verify_backend("cpu-compiled", output=out)
    assert out.read_text() == "earlier report\n"
    assert os.listdir(tmp_path) == ["report.jsonl"]  # no temporary file left behind


def test_write_atomically_replaces_only_the_destination(tmp_path):
    out = tmp_path / "r.jsonl"
    R.write_atomically(out, "é\n")
    assert out.read_bytes() == "é\n".encode("utf-8") and os.listdir(tmp_path) == ["r.jsonl"]
    with pytest.raises(OSError):
        R.write_atomically(tmp_path / "missing-dir" / "r.jsonl", "x")
    assert os.listdir(tmp_path) == ["r.jsonl"]


# --- the command line ------------------------------------------------------------------------------

def test_cli_verify_prints_a_summary_and_fails_on_blocked_evidence(stubbed_stages, capsys, tmp_path):
    out = tmp_path / "r.jsonl"
    code = cli.main(["verify", "cpu-compiled", "--output", str(out)])
    text = capsys.readouterr()
    assert code == 1  # the doctored run holds blocked and error evidence
    assert "Stage One" in text.out and "Stage Two" in text.out and "operation" in text.out
    assert "blocked" in text.out and "subject:hierarchical-contraction" in text.out
    assert out.exists()


def test_cli_progress_bar_redraws_on_a_terminal_and_logs_otherwise():
    import io

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, log = Tty(), io.StringIO()
    for stream in (tty, log):
        bar = cli.ProgressBar(stream)
        for done in range(4):
            bar("oracle", done, 3, f"case {done}")
        bar("target", 3, 3, "done")
    assert tty.getvalue().count("\r") == 5 and "[" + "#" * 30 + "] 3/3" in tty.getvalue()
    assert log.getvalue() == "oracle stage: 3 obligations\ntarget stage: 3 obligations\n"


def test_cli_verify_passes_when_every_record_passes(monkeypatch, capsys, oracle_result):
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: oracle_result)
    report_stage = attrs.evolve(oracle_result.report, stage=R.VerificationStage.TARGET)
    monkeypatch.setattr(R, "run_target_stage", lambda p, o, **kw: report_stage)
    assert cli.main(["verify", "cpu-compiled"]) == 0
    assert "PASSED" in capsys.readouterr().out


def test_cli_verify_rejects_an_unknown_profile(capsys):
    assert cli.main(["verify", "no-such-profile"]) == 2
    assert "unknown verification profile" in capsys.readouterr().err


# --- intent.verify (beyond the spec) ------------------------------------------------------------------

@intent.kernel
def scaled(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], s: I.f32):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * s + 1.0


def test_intent_verify_compares_a_user_kernel_with_the_oracle():
    x = np.array([0.0, -0.0, 1.5, np.nan, np.inf], np.float32)
    y = np.full(5, 7.0, np.float32)
    result = intent.verify(scaled, "generic", x, y, 2.0)
    assert result.passed and result.outputs[0].name == "y" and result.outputs[0].comparison.mismatches == 0
    assert np.all(y == 7.0)  # the caller's arrays are not written
    assert "PASSED" in str(result)


def test_intent_verify_reports_a_differing_target(monkeypatch):
    real = compiler.compile

    def skewed(kernel, target="cpu", **options):
        exe = real(kernel, target=target, **options)
        if target != "generic":
            return exe

        class Skewed:
            graph = exe.graph

            def __call__(self, x, y, s):
                exe(x, y, s)
                y.view(np.uint32)[1] ^= 1

        return Skewed()

    monkeypatch.setattr(compiler, "compile", skewed)
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    result = intent.verify(scaled, "generic", x, y, 3.0)
    assert not result.passed and result.outputs[0].comparison.mismatches == 1
    loose = intent.verify(scaled, "generic", x, y, 3.0, tolerance=Tolerance(1e-3, 1e-3, 4))
    assert loose.passed
    with pytest.raises(TypeError):
        intent.verify(scaled, "generic", x, y, 3.0, tolerance=0.1)


# --- usage errors before anything runs; quiet third-party logs ------------------------------------------

@pytest.mark.parametrize("where", ["directory", "missing-parent", "file-as-parent", "proc", "proc-file"])
def test_cli_an_unusable_output_is_a_usage_error_before_anything_runs(where, tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: ran.append(p))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    output = {"directory": tmp_path, "missing-parent": tmp_path / "no" / "r.jsonl",
              "file-as-parent": a_file / "r.jsonl", "proc": "/proc/intent-trace-report.jsonl",
              "proc-file": "/proc/self/status"}[where]
    assert cli.main(["verify", "cpu-compiled", "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert "intent-trace verify: output" in err and "Traceback" not in err
    assert not ran and sorted(os.listdir(tmp_path)) == ["file"]
    with pytest.raises(ValueError):  # the API refuses it before running too
        verify_backend("cpu-compiled", output=output)
    assert not ran


def test_cli_an_unusable_cache_dir_is_a_usage_error(tmp_path, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: ran.append(p))
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert cli.main(["verify", "cpu-compiled", "--cache-dir", str(a_file)]) == 2
    assert "cache directory" in capsys.readouterr().err and not ran


def test_cli_silences_third_party_loggers_while_verifying(monkeypatch, capsys, oracle_result, stage_two):
    import logging

    def noisy_oracle(profile):
        logging.getLogger("tilelang").info("TileLang begins to compile kernel verify_add")
        logging.getLogger("tvm").info("tvm chatter")
        logging.getLogger("tilelang").error("a real problem stays visible")
        return oracle_result
    monkeypatch.setattr(R, "run_oracle_stage", noisy_oracle)
    monkeypatch.setattr(R, "run_target_stage", lambda p, o, **kw: stage_two)
    handler_stream = __import__("io").StringIO()
    handler = logging.StreamHandler(handler_stream)
    # on the loggers themselves: an imported TileLang gives its logger its own handler and stops propagation
    loggers = [logging.getLogger(n) for n in ("tilelang", "tvm")]
    for lg in loggers:
        lg.addHandler(handler)
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
    try:
        cli.main(["verify", "cpu-compiled"])
        after = [lg.level for lg in loggers]
    finally:
        for lg, lv in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(lv)
    logged = handler_stream.getvalue()
    assert "begins to compile" not in logged and "tvm chatter" not in logged
    assert "a real problem stays visible" in logged
    assert after == [logging.INFO, logging.INFO]  # restored
    assert "compiled in a temporary cache, removed" in capsys.readouterr().out


def test_the_report_keeps_the_destination_file_mode(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("old\n")
    os.chmod(out, 0o644)
    R.write_atomically(out, "new\n")
    assert out.read_text() == "new\n" and (os.stat(out).st_mode & 0o777) == 0o644
    os.chmod(out, 0o640)
    R.write_atomically(out, "newer\n")
    assert (os.stat(out).st_mode & 0o777) == 0o640
    fresh = tmp_path / "fresh.jsonl"
    umask = os.umask(0o022)
    try:
        R.write_atomically(fresh, "x\n")
    finally:
        os.umask(umask)
    assert (os.stat(fresh).st_mode & 0o777) == 0o644
