"""Requirement (issue 20, item 1): ``examples/quickstart.ipynb`` runs in a real Jupyter kernel (nbclient driving an
ipykernel of this interpreter) with no cell erroring and the expected outputs present, and it stays in sync with
``examples/quickstart.py`` (the same kernels, the same checks).

The kernel is this interpreter (``sys.executable``) through a kernel spec written to a temporary directory and
handed to nbclient's kernel manager: nothing is registered with the user's Jupyter, and nothing needs a network.
"""
from __future__ import annotations

import ast
import json
import pathlib
import sys

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import intent_trace as intent

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
SCRIPT = ROOT / "examples" / "quickstart.py"
KERNEL_NAME = "intent-trace-test"


def _code(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def _tagged(nb, tag: str):
    found = [c for c in nb.cells if tag in c.metadata.get("tags", ())]
    assert len(found) == 1, f"one cell tagged {tag!r} expected, found {len(found)}"
    return found[0]


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def _html(cell) -> str:
    return "".join(o.data.get("text/html", "") for o in cell.outputs
                   if o.output_type in ("execute_result", "display_data"))


def test_notebook_has_every_kernel_and_check_of_the_script():
    """Every @intent.kernel / @intent.fn function of quickstart.py appears verbatim in the notebook, and so do
    the script's NumPy references and acceptance checks."""
    script = SCRIPT.read_text()
    code = _code(nbformat.read(NOTEBOOK, as_version=4))
    tree = ast.parse(script)
    kernels = [node for node in tree.body if isinstance(node, ast.FunctionDef)
               and any(ast.unparse(d) in ("intent.kernel", "intent.fn") for d in node.decorator_list)]
    assert {k.name for k in kernels} >= {"softplus", "scaled_softplus", "reverse_cumsum"}
    for k in kernels:
        start = k.decorator_list[0].lineno - 1
        source = "\n".join(script.splitlines()[start:k.end_lineno])
        assert source in code, f"kernel {k.name} of quickstart.py is not in the notebook"
    checks = [line.strip() for line in script.splitlines()
              if line.strip().startswith(("want = ", "want_cumsum = ", "err = ", "ok = ", "x = ", "v = "))]
    assert len(checks) == 6
    for line in checks:
        assert line in code, f"quickstart.py's check {line!r} is not in the notebook"


def _kernel_manager(tmp_path) -> KernelManager:
    spec_dir = tmp_path / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "intent_trace test kernel", "language": "python",
        # this checkout's intent_trace, whichever copy is installed; IPython's profile in the temporary directory
        "env": {"PYTHONPATH": str(ROOT), "IPYTHONDIR": str(tmp_path / "ipython")},
    }))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tmp = tmp_path_factory.mktemp("jupyter")
    with pytest.MonkeyPatch.context() as mp:  # connection files in the temporary directory, not under $HOME
        mp.setenv("JUPYTER_RUNTIME_DIR", str(tmp / "runtime"))
        client = NotebookClient(nb, km=_kernel_manager(tmp), timeout=600, kernel_name=KERNEL_NAME,
                                allow_errors=False, resources={"metadata": {"path": str(ROOT)}})
        client.execute()  # raises CellExecutionError naming the cell when one fails
    return nb


def test_notebook_runs_without_errors(executed):
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert all(c.execution_count for c in executed.cells if c.cell_type == "code")


def test_notebook_shows_the_graph(executed):
    text = _stdout(_tagged(executed, "graph"))
    assert text.startswith("kernel scaled_softplus(x: In[f32, (M, N)], y: Out[f32, (M, N)], scale: f32)\n")
    assert "log1p" in text and "kernel reverse_cumsum(x: In[f32, (N,)], y: Out[f32, (N,)])" in text
    assert "<pre class='intent-kir'>kernel scaled_softplus(" in _html(_tagged(executed, "graph-display"))


def test_notebook_lists_the_targets_and_runs_every_runnable_one(executed):
    text = _stdout(_tagged(executed, "targets"))
    runnable = intent.runnable_targets()
    assert f"runnable targets: {', '.join(runnable)}" in text
    for target in set(intent.targets()) - set(runnable):
        assert f"{target}: not run here (" in text
    ran = _stdout(_tagged(executed, "run")).splitlines()
    assert [line.split(":")[0].strip() for line in ran] == list(runnable)
    assert all(line.endswith("-> ok") for line in ran)


def test_notebook_shows_the_generated_source_and_the_executable(executed):
    cell = _tagged(executed, "source")
    shown = intent.runnable_targets()[-1]
    assert _stdout(cell).startswith("# Generated by intent_trace")
    page = _html(cell)
    assert "class='intent-executable'" in page and f"<strong>{shown}</strong> executable" in page
    assert "<details><summary>" in page and "# Generated by intent_trace" in page


def test_notebook_shows_the_verification_summary(executed):
    cell = _tagged(executed, "verify")
    shown = intent.runnable_targets()[-1]
    assert _stdout(cell).startswith(f"verify scaled_softplus: {shown} vs cpu oracle -> PASSED\n")
    assert "class='intent-verify'" in _html(cell)
    assert "class='intent-bench'" in _html(_tagged(executed, "bench"))
