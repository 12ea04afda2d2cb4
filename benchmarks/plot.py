"""Bar charts of the benchmarks' JSON lines: each case's ratio against its reference, the 1.0 line, its target.

Every benchmark script takes ``--plot FILE.png`` (:func:`add_plot_argument`, :func:`finish`) and prints its
JSON line as before; the chart is drawn from that line, so a saved line can be drawn later too:
``python benchmarks/plot.py result.json out.png``. Needs matplotlib (``pip install intent_trace[plot]``).

A case is a top-level object of the line with a ratio, higher is better (``ratio``: the GPU cases against
PyTorch or copy bandwidth; ``speedup_vs_numpy``/``speed_vs_numpy``: the CPU cases against NumPy), and
optionally its target (``target_ratio``, ``target_speedup``, ``target_speed_vs_numpy``) and reference
(``reference``). A case whose ratio is null (not measured on this build) is drawn as an empty slot, labelled.
Bars: green where the target is met, orange where it is not, blue where the case has no target.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import NamedTuple

RATIO_KEYS = ("ratio", "speedup_vs_numpy", "speed_vs_numpy")
TARGET_KEYS = ("target_ratio", "target_speedup", "target_speed_vs_numpy")


class Case(NamedTuple):
    name: str
    ratio: float | None
    target: float | None
    reference: str


def cases(result: dict) -> list:
    """The plottable cases of one benchmark line, in the line's order."""
    found = []
    for name, value in result.items():
        if not isinstance(value, dict):
            continue
        key = next((k for k in RATIO_KEYS if k in value), None)
        if key is None:
            continue
        target = next((value[k] for k in TARGET_KEYS if value.get(k) is not None), None)
        reference = value.get("reference") or ("NumPy" if key.endswith("numpy") else "reference")
        found.append(Case(name, value[key], target, reference))
    return found


def plot(result: dict, path: str, title: str | None = None) -> str:
    """Draw ``result``'s cases (a benchmark's JSON line, parsed) into the PNG ``path``; returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    shown = cases(result)
    if not shown:
        raise ValueError(f"benchmark {result.get('benchmark', '?')}: no case with a ratio to plot")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(shown) + 2), 4.5), constrained_layout=True)
    xs = range(len(shown))
    heights = [c.ratio if c.ratio is not None else 0.0 for c in shown]
    # grey: not measured; blue: no target; green: the target is met; orange: it is not
    colors = ["#b0b0b0" if c.ratio is None else "#1565c0" if c.target is None else
              ("#2e7d32" if c.ratio >= c.target else "#ef6c00") for c in shown]
    bars = ax.bar(xs, heights, color=colors, width=0.6)
    for x, bar, c in zip(xs, bars, shown):
        label = "not measured" if c.ratio is None else f"{c.ratio:.2f}x"
        ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                    xytext=(0, 3), textcoords="offset points", fontsize=8)
        if c.target is not None:
            ax.hlines(c.target, x - 0.4, x + 0.4, colors="#c62828", linewidth=2.5,
                      label="target" if "target" not in ax.get_legend_handles_labels()[1] else None)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="1.0 (as fast as the reference)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{c.name}\nvs {c.reference}" for c in shown], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("ratio vs reference (higher is better)")
    ax.set_title(title or f"benchmark {result.get('benchmark', '')}")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_ylim(0, max([1.0] + [h for h in heights] + [c.target or 0 for c in shown]) * 1.2)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_plot_argument(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--plot", metavar="FILE.png", help="also draw each case's ratio vs its reference into FILE.png")
    parser.add_argument("--title", help="the chart's title (default: the benchmark, its machine and date)")
    return parser


def machine() -> str:
    """This host's CPU model and core count (Linux: /proc/cpuinfo), else the platform's machine name."""
    import os
    import platform

    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model or platform.machine()}, {os.cpu_count()} cores"


def default_title(result: dict) -> str:
    import datetime

    where = result.get("device") or machine()
    return f"{result.get('benchmark', 'benchmark')} on {where}, {datetime.date.today().isoformat()}"


def finish(result: dict, args) -> None:
    """Print the benchmark's JSON line (as the scripts always have) and draw it when ``--plot`` was given."""
    print(json.dumps(result))
    if getattr(args, "plot", None):
        plot(result, args.plot, args.title or default_title(result))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="draw a saved benchmark JSON line")
    parser.add_argument("json", help="a file holding one benchmark's JSON line")
    parser.add_argument("png")
    parser.add_argument("--title")
    args = parser.parse_args(argv)
    with open(args.json) as f:
        result = json.loads(f.read().strip().splitlines()[-1])
    plot(result, args.png, args.title or default_title(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
