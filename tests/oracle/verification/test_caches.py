"""Local verification writes only an optional caller destination: compile caches go to a temporary root
(removed afterwards) unless the caller names a directory to keep (``cache_dir=`` / ``--cache-dir`` /
``$INTENT_TRACE_CACHE_DIR``), and the report records which."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from intent_trace import caches
from intent_trace.oracle import verify_backend
from intent_trace.oracle.verification import report as R

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# verify_backend("c-tilelang") through its real path (profile checks, the runtime check that imports TileLang,
# the cache redirect), with stages that compile and run fresh kernels on cpu and tilelang-c: every cache the
# targets have is used (the generated module, Numba's machine code, the PCH, TileLang's kernel cache), without
# paying for the full catalogue (test_end_to_end runs that).
_SCRIPT = textwrap.dedent("""
    import json, os
    import numpy as np
    import intent_trace as intent
    from intent_trace import I, caches
    from intent_trace.oracle.verification import report as R
    from intent_trace.oracle.verification.evidence import OracleStageResult, StageReport
    from intent_trace.oracle.verification.records import VerificationStage

    @intent.kernel
    def fresh_kernel_for_cache_test(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)]):
        d = I.domain(0, x.shape[0])
        y[d] = x[d] * 3.0 + 0.5

    seen = {}

    def compile_and_run(target):
        y = np.zeros(5, np.float32)
        intent.compile(fresh_kernel_for_cache_test, target=target)(np.arange(5, dtype=np.float32), y)
        assert y.tolist() == [0.5, 3.5, 6.5, 9.5, 12.5], y
        root = seen["root"] = caches.cache_root()
        seen["inside"] = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)

    def oracle(profile):
        compile_and_run("cpu")
        return OracleStageResult(StageReport("cpu-compiled", VerificationStage.ORACLE, (), ()), ())

    def target(profile, oracle_result, **kw):
        compile_and_run("tilelang-c")
        return StageReport("c-tilelang", VerificationStage.TARGET, (), ())

    R.run_oracle_stage, R.run_target_stage = oracle, target
    report = R.verify_backend("c-tilelang")
    print(json.dumps({"root": seen["root"], "source": report.caches.source, "inside": seen["inside"],
                      "left": os.path.exists(seen["root"])}))
""")


def _home_entries(home) -> list:
    """Every file and directory below ``home`` (an empty directory is a write too)."""
    return sorted(os.path.relpath(os.path.join(d, n), home) for d, dirs, fs in os.walk(home) for n in dirs + fs)


def test_a_default_verification_writes_nothing_under_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (caches.ENV_VAR, caches.TILELANG_ENV_VAR)}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PYTHONPATH=ROOT, TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["source"] == "temporary" and not result["left"]  # removed afterwards
    # the caches really were used, under the temporary root
    assert any(p.startswith("numba-") and p.endswith(".py") for p in result["inside"]), result["inside"]
    assert any(p.startswith("tilelang" + os.sep) for p in result["inside"]), result["inside"]
    assert _home_entries(home) == []  # nothing under $HOME, not even an empty directory
    assert sorted(os.listdir(tmp_path)) == ["home"]  # and no temporary directory left behind


def test_a_caller_cache_directory_is_kept_and_recorded(tmp_path, monkeypatch, oracle_result, stage_two):
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: oracle_result)
    monkeypatch.setattr(R, "run_target_stage", lambda p, o, **kw: stage_two)
    kept = tmp_path / "kept"
    report = verify_backend("cpu-compiled", cache_dir=kept)
    assert report.caches.source == "argument" and report.caches.kept and os.path.isdir(kept)
    assert report.caches.to_json() == {"source": "argument", "kept": True, "root": str(kept)}
    monkeypatch.setenv(caches.ENV_VAR, str(tmp_path / "from-env"))
    assert verify_backend("cpu-compiled").caches.source == "environment"
    monkeypatch.delenv(caches.ENV_VAR)
    report = verify_backend("cpu-compiled")
    assert report.caches.source == "temporary" and not os.path.exists(report.caches.root)
    assert '"compile_cache":{"kept":false,"root":null,"source":"temporary"}' in report.to_jsonl().splitlines()[0]


def test_the_redirect_covers_tilelang_and_is_undone(tmp_path, monkeypatch):
    monkeypatch.setenv(caches.TILELANG_ENV_VAR, "/somewhere/else")
    before = caches.cache_root()
    with caches.verification_caches(tmp_path / "c") as use:
        assert caches.cache_root() == use.root == str(tmp_path / "c")
        assert os.environ[caches.TILELANG_ENV_VAR] == os.path.join(use.root, "tilelang")
        from intent_trace.oracle.numba.target import cache_dir
        assert cache_dir().startswith(use.root)
    assert caches.cache_root() == before and os.environ[caches.TILELANG_ENV_VAR] == "/somewhere/else"


@pytest.mark.parametrize("bad, error", [(5, TypeError), (b"x", TypeError)])
def test_a_cache_dir_of_the_wrong_type_is_rejected_before_anything_runs(bad, error, monkeypatch):
    ran = []
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: ran.append(p))
    with pytest.raises(error):
        verify_backend("cpu-compiled", cache_dir=bad)
    assert not ran


def test_an_unusable_cache_dir_is_rejected_before_anything_runs(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(R, "run_oracle_stage", lambda p: ran.append(p))
    f = tmp_path / "file"
    f.write_text("x")
    for bad in (f, f / "below"):
        with pytest.raises(ValueError, match="cache directory"):
            verify_backend("cpu-compiled", cache_dir=bad)
    assert not ran
