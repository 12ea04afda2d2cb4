"""The KIR printer: golden files compared verbatim, determinism, and the notebook hooks.

The golden kernels live in ``golden_kernels.py`` so that the source lines in the print stay put.
To regenerate the golden files after a deliberate printer change, run
``python tests/graph/test_printer.py --regen`` and review the diff by eye.
"""
from __future__ import annotations

import html
import importlib.util
import pathlib
import sys

import pytest

import intent_trace as intent
from intent_trace import I

HERE = pathlib.Path(__file__).parent
GOLDEN_DIR = HERE / "golden"


def _load_golden_kernels():
    spec = importlib.util.spec_from_file_location("golden_kernels", HERE / "golden_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gk = _load_golden_kernels()


def _printed(name: str) -> str:
    kernel, constexprs = gk.GOLDEN[name]
    return str(kernel.trace(**constexprs)) + "\n"


@pytest.mark.parametrize("name", sorted(gk.GOLDEN))
def test_printer_matches_golden_file(name):
    want = (GOLDEN_DIR / f"{name}.txt").read_text(encoding="utf-8")
    assert _printed(name) == want


def test_printer_golden_files_all_have_a_kernel():
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.txt")) == sorted(gk.GOLDEN)


def test_printer_shows_types_extents_provenance_and_lines():
    text = _printed("window_provenance")
    assert text.startswith("kernel window_provenance(x: In[f32, (N,)], coords: Out[index, (3, 2)]")
    assert "  extents N: index" in text
    assert "⟨indices of %0 axis 0: m = (((a1 * 3) + a0) + start)⟩" in text
    assert "# golden_kernels.py:" in text and "(in window_coords)" in text


def test_printer_is_deterministic_across_prints_and_traces():
    for name, (kernel, constexprs) in gk.GOLDEN.items():
        g = kernel.trace(**constexprs)
        assert str(g) == str(g), name
    # A fresh trace of a fresh kernel object prints the same text (names come from print order, not ids).
    fresh = intent.kernel(gk.scale_rows.fn)
    assert str(fresh.trace()) == str(gk.scale_rows.trace())


def test_printer_names_do_not_leak_between_graphs():
    a, b = gk.scale_rows.trace(), gk.gather_pairs.trace()
    before = str(a)
    str(b)
    assert str(a) == before
    assert str(a).count("%0:") == 1


@intent.kernel
def _tagged(x: I.In[I.f32, ("N",)], y: I.Out[I.f32, ("N",)], TAG: I.Constexpr[str] = "a<b & c>d"):
    d = I.domain(0, x.shape[0])
    y[d] = x[d] * 2.0


def test_printer_repr_html_escapes_markup():
    g = _tagged.trace()
    text = str(g)
    assert "<b & c>" in text  # the constexpr value is printed in the header ...
    out = g._repr_html_()
    assert out.startswith("<pre") and out.endswith("</pre>")
    inner = out[out.index(">") + 1:-len("</pre>")]
    assert "<" not in inner and ">" not in inner  # ... and escaped in HTML
    assert "&amp;" in inner and "&lt;b" in inner and "c&gt;" in inner
    assert html.unescape(inner) == text


def test_printer_repr_pretty_prints_the_text():
    class Printer:
        def __init__(self):
            self.parts = []

        def text(self, s):
            self.parts.append(s)

    g = gk.first_over.trace()
    p = Printer()
    g._repr_pretty_(p, False)
    assert "".join(p.parts) == str(g)


def test_printer_repr_is_a_short_summary():
    g = gk.scale_rows.trace()
    assert repr(g) == "<KernelGraph scale_rows: 3 params, 8 nodes>"


def _regen() -> None:
    GOLDEN_DIR.mkdir(exist_ok=True)
    for name in gk.GOLDEN:
        (GOLDEN_DIR / f"{name}.txt").write_text(_printed(name), encoding="utf-8")
        print(f"wrote {GOLDEN_DIR / name}.txt")


if __name__ == "__main__" and "--regen" in sys.argv:
    _regen()
