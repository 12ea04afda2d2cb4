"""Snapshot the generated text of every kernel the tests, examples and benchmarks define, for diffing a
code-generator refactor: what a change to the generators does to their output, kernel by kernel.

    python tools/codegen_snapshot.py OUT_DIR                      # write the snapshot
    python tools/codegen_snapshot.py OUT_DIR --tests tests/kernels # ... and the graphs those tests trace
    python tools/codegen_snapshot.py --compare BEFORE AFTER        # per target: same, renamed, different
    diff -r BEFORE_DIR AFTER_DIR                                   # the change's effect on the generated text

The kernels are the ``Kernel`` objects at module level in every module that pytest's collection of
``tests/`` imports (test modules and their support modules; pytest imports them, so their import paths are
pytest's own), in ``examples/*.py`` and in ``benchmarks/*.py``. A kernel with constexprs is traced with the
values a module's ``CONSTEXPRS`` dict gives by kernel name (the examples name theirs), else with its
defaults; one that still needs values is listed in ``SKIPPED.txt``.

Many kernels are made inside test functions (factories over constexpr-like Python values, parametrised
cases). ``--tests PATH...`` also runs those tests, on the generic target only (``INTENT_TRACE_TEST_TARGETS=
generic``: no compiler runs, except in tests that name another target themselves), and snapshots every graph
traced meanwhile, named by its kernel's definition and a digest of its printed KIR (which the code generators
do not shape, so the names of a before and an after snapshot agree).

Per kernel and per ``checks`` in (True, False) it writes the cpu target's generated module
(``intent.compile(k, target="cpu").source``, its code-generator digest line blanked: that digest hashes the
package's sources, so it changes with any edit) and the TileLang program text for tilelang-c, tilelang-cuda
and tilelang-metal (``backends.tilelang.target.generate``). A generator that raises writes the exception's type
and message instead, so a refactor that changes which kernels lower (or how they fail) shows in the diff too.

``--compare`` sorts the files both snapshots have, per target, into identical, the same but for the names of
generated locals (``v17`` -> ``t17``: a rename that moves no number), and different (listed in full).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TILELANG_TARGETS = ("tilelang-c", "tilelang-cuda", "tilelang-metal")
_DIGEST = re.compile(r"^# code generator .*$", re.MULTILINE)


class _Modules:
    """A pytest plugin that keeps the modules collection imported (``sys.modules`` once it is done)."""

    def __init__(self):
        self.modules: list = []

    def pytest_collection_finish(self, session):
        self.modules = [m for m in list(sys.modules.values()) if _under(m, ("tests",))]


def _under(module, folders) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    try:
        rel = Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return False
    return rel.parts[0] in folders and rel.suffix == ".py"


def _test_modules() -> list:
    import pytest

    plugin = _Modules()
    os.environ.setdefault("INTENT_TRACE_VALIDATE", "1")  # as the suite traces
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")], plugins=[plugin])
    if code not in (0, 5):
        raise SystemExit(f"collecting tests/ failed (pytest exit {code})")
    return plugin.modules


def _script_modules() -> list:
    import importlib.util

    out = []
    for folder in ("examples", "benchmarks"):
        for path in sorted((ROOT / folder).glob("*.py")):
            spec = importlib.util.spec_from_file_location(f"_snapshot_{folder}_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as e:  # noqa: BLE001 (a script that needs what this machine lacks)
                print(f"skipping {path.relative_to(ROOT)}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            out.append(module)
    return out


def kernels(modules) -> tuple:
    """({key: (kernel, constexprs)}, [skipped keys]): key is ``path::name`` of the kernel's definition."""
    from intent_trace.kernel import Kernel

    constexprs: dict = {}
    for m in modules:
        given = getattr(m, "CONSTEXPRS", None)
        if isinstance(given, dict):
            for name, values in given.items():
                constexprs.setdefault(name, values)
    found, skipped, seen = {}, [], set()
    for m in modules:
        for value in list(vars(m).values()):
            if not isinstance(value, Kernel) or id(value) in seen:
                continue
            seen.add(id(value))
            key = _where(value)
            given = dict(constexprs.get(value.name, {}))
            if value.missing_constexprs(given):
                skipped.append(key)
                continue
            found[key] = (value, given)
    return dict(sorted(found.items())), sorted(skipped)


class _Traces:
    """A pytest plugin that records every graph traced while the tests run: {name: graph}, first seen kept."""

    def __init__(self):
        self.graphs: dict = {}

    def pytest_sessionstart(self, session):
        import hashlib

        from intent_trace.graph.printer import format_graph

        K = sys.modules["intent_trace.kernel"]  # (the package's ``kernel`` attribute is the decorator)

        original = K._trace_kernel

        def traced(kernel, constexprs):
            graph = original(kernel, constexprs)
            digest = hashlib.sha256(format_graph(graph).encode()).hexdigest()[:16]
            self.graphs.setdefault(f"{_where(kernel)}@{digest}", graph)
            return graph

        K._trace_kernel = traced


def _traced_graphs(paths) -> dict:
    import pytest

    plugin = _Traces()
    os.environ["INTENT_TRACE_TEST_TARGETS"] = "generic"
    os.environ.setdefault("INTENT_TRACE_VALIDATE", "1")
    code = pytest.main(["-q", "-x", "-p", "no:cacheprovider", *paths], plugins=[plugin])
    if code != 0:
        raise SystemExit(f"the tests failed (pytest exit {code}): a snapshot of a failing suite proves nothing")
    return dict(sorted(plugin.graphs.items()))


def _where(kernel) -> str:
    code = kernel.fn.__code__
    try:
        where = Path(code.co_filename).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        where = Path(code.co_filename).name
    return f"{where}::{kernel.fn.__qualname__}:{code.co_firstlineno}"


def _stem(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", key.replace("/", "__").replace("::", "__"))


def _write(out: Path, stem: str, graph, cpu_source) -> None:
    """The four targets' text for ``graph``, with and without checks (``cpu_source(checks)``: the cpu module)."""
    from intent_trace.backends.tilelang.target import generate

    for checks in (True, False):
        suffix = "" if checks else ".nochecks"
        cpu = _text(lambda c=checks: _DIGEST.sub("# code generator <digest>", cpu_source(c)))
        (out / f"{stem}{suffix}.cpu.py").write_text(cpu)
        for target in TILELANG_TARGETS:
            text = _text(lambda t=target, c=checks: generate(graph, t, c))
            (out / f"{stem}{suffix}.{target}.py").write_text(text)


def _text(make) -> str:
    try:
        return make()
    except Exception as e:  # noqa: BLE001 (how a generator fails is part of its behaviour)
        return _error(e)


def _error(e: Exception) -> str:
    """An exception as the snapshot records it (paths below the checkout relative, so checkouts compare)."""
    return f"ERROR {type(e).__name__}: {e}\n".replace(str(ROOT) + "/", "<root>/")


def snapshot(out: Path, tests=()) -> None:
    import intent_trace as intent
    from intent_trace.oracle.numba.target import CpuExecutable

    found, skipped = kernels([*_test_modules(), *_script_modules()])
    captured = _traced_graphs(tests) if tests else {}
    out.mkdir(parents=True, exist_ok=True)
    (out / "SKIPPED.txt").write_text("".join(k + "\n" for k in skipped))
    index = []
    for key, (kernel, constexprs) in found.items():
        stem = _stem(key)
        index.append(f"{stem} {key} {constexprs!r}")
        try:
            graph = kernel.trace(**constexprs)
        except Exception as e:  # noqa: BLE001
            (out / f"{stem}.trace").write_text(_error(e))
            continue
        _write(out, stem, graph, lambda checks, k=kernel, c=constexprs: intent.compile(k, target="cpu", checks=checks,
                                                                                       **c).source)
    for key, graph in captured.items():
        stem = "traced__" + _stem(key)
        index.append(f"{stem} {key}")
        _write(out, stem, graph, lambda checks, g=graph: CpuExecutable(g, checks).source)
    (out / "INDEX.txt").write_text("".join(line + "\n" for line in index))
    print(f"{len(found)} kernels, {len(skipped)} skipped (constexprs without values), {len(captured)} graphs "
          f"traced by the tests -> {out}")


_LOCAL = re.compile(r"\b[a-z]{1,2}(\d+)\b")  # a generated local's name (v17, i4, q12), not K0, arg1, ext0


def compare(before: Path, after: Path) -> None:
    """Print, per target, how many files both snapshots have are identical, renamed (the same but for the
    prefixes of generated locals) or different, then the different ones."""
    import collections

    counts, different = collections.Counter(), []
    for f in sorted(after.iterdir()):
        b = before / f.name
        if not b.exists():
            continue
        m = re.search(r"\.(cpu|tilelang-c|tilelang-cuda|tilelang-metal)\.py$", f.name)
        target = m[1] if m else "other"
        x, y = b.read_text(), f.read_text()
        kind = "identical" if x == y else "renamed" if _LOCAL.sub(r"_\1", x) == _LOCAL.sub(r"_\1", y) else "different"
        counts[target, kind] += 1
        if kind == "different":
            different.append(f.name)
    for target in sorted({t for t, _ in counts}):
        print(target, {k: n for (t, k), n in sorted(counts.items()) if t == target})
    print("\n".join(different))


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Some generated text depends on set order (how a symbolic extent's expression prints in an allocation
        # message): one hash seed makes two snapshots comparable.
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    args = sys.argv[1:]
    if args[:1] == ["--compare"] and len(args) == 3:
        compare(Path(args[1]), Path(args[2]))
        raise SystemExit(0)
    if not args or args[0].startswith("-") or (len(args) > 1 and args[1] != "--tests"):
        raise SystemExit(__doc__)
    sys.path.insert(0, str(ROOT))
    snapshot(Path(args[0]), args[2:])
