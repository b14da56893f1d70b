"""PNG figures: macro-F1 against chain length per method (the paper's long-chain figure), the per-step scores of
one chain, ARES's sample efficiency, and the cost of each ARES mode against chain length.

    python -m ares_rerank.evaluation.plots long-chains ares-eval/claimtrees-*__claimtrees-oracle.json \\
        --out long_chains.png

matplotlib is imported inside each function (Agg backend, no display needed).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from .report import METHOD_NAMES


__all__ = [
    "long_chain_series",
    "plot_accuracy_vs_n",
    "main",
    "plot_cost_vs_length",
    "plot_long_chains",
    "plot_sample_efficiency",
    "plot_step_scores",
]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def long_chain_series(results: Sequence[dict[str, Any]]) -> dict[str, dict[int, tuple[float, float]]]:
    """``{method: {L: (macro-F1, SE)}}`` from runner results of vanilla ClaimTrees runs at several lengths."""
    series: dict[str, dict[int, tuple[float, float]]] = {}
    for res in results:
        length = res["task"]["info"].get("length")
        if length is None:
            raise ValueError(f"results of {res['task']['name']!r} name no ClaimTrees length; pass vanilla runs only.")
        for method, m in res["methods"].items():
            series.setdefault(method, {})[int(length)] = (m["macro"]["f1"], m["macro"]["f1_se"])
    return series


def plot_long_chains(
    series: dict[str, dict[int, tuple[float, float]]],
    path: str | Path,
    paper: dict[str, dict[int, float]] | None = None,
    title: str = "ClaimTrees: macro-F1 vs chain length",
) -> Path:
    """Macro-F1 (± SE) against L per method; ``paper`` values drawn dashed for comparison."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for method, points in series.items():
        ls = sorted(points)
        ax.errorbar(ls, [points[L][0] for L in ls], yerr=[points[L][1] for L in ls], marker="o", capsize=3,
                    label=METHOD_NAMES.get(method, method))
    for name, points in (paper or {}).items():
        ls = sorted(points)
        ax.plot(ls, [points[L] for L in ls], linestyle="--", marker="x", alpha=0.7, label=f"paper: {name}")
    ax.set_xlabel("chain length L (states; L - 1 steps)")
    ax.set_ylabel("macro-F1 (5-fold CV)")
    ax.set_ylim(0.0, 1.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def plot_step_scores(
    scores: dict[str, Sequence[float]], labels: Sequence[int], path: str | Path, title: str = "Per-step scores"
) -> Path:
    """Each method's per-step score of one chain; unsound steps (gold) shaded."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    steps = range(1, len(labels) + 1)
    for k, y in zip(steps, labels):
        if y:
            ax.axvspan(k - 0.5, k + 0.5, color="red", alpha=0.08, lw=0)
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    for i, (method, values) in enumerate(scores.items()):  # distinct markers: methods often overlap exactly
        marker, line = styles[i % len(styles)]
        ax.plot(list(steps), list(values), marker=marker, linestyle=line, markersize=8 - 1.5 * (i % 4), alpha=0.85,
                label=METHOD_NAMES.get(method, method))
    ax.set_xlabel("step (shaded = gold unsound)")
    ax.set_ylabel("score (tau for ARES)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xticks(list(steps))
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_sample_efficiency(rows: Sequence[tuple[str, float, float]], path: str | Path,
                           title: str = "ARES backbone evaluations per chain") -> Path:
    """Bars of actual distinct evaluations beside the Hoeffding budget ``m * N(m)`` (log scale), per setting."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    names = [r[0] for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r[1] for r in rows], width=0.4, label="actual (distinct evaluations)")
    ax.bar([i + 0.2 for i in x], [r[2] for r in rows], width=0.4, label="budget m * N(m)")
    for i, r in enumerate(rows):
        ax.text(i - 0.2, r[1], f"{r[1] / r[2]:.3f}x", ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=20, fontsize=8)
    ax.set_ylabel("per chain (log)")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_cost_vs_length(series: dict[str, dict[int, tuple[float, float]]], path: str | Path,
                        title: str = "Cost against chain length") -> Path:
    """Two panels against chain length L: backbone pairs per step and wall seconds per step, one line per method.

    Args:
        series: ``{label: {L: (pairs per step, seconds per step)}}``, e.g. from ``eval.bench_cost``.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, points in series.items():
        lengths = sorted(points)
        for ax, i in zip(axes, (0, 1)):
            ax.plot(lengths, [points[L][i] for L in lengths], marker="o", label=label)
    for ax, name in zip(axes, ("backbone pairs per step", "wall seconds per step")):
        ax.set_xlabel("chain length L (states)")
        ax.set_ylabel(name)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    return _save(fig, path)


def plot_accuracy_vs_n(results: dict[str, Any], path: str | Path, rows: Sequence[str] | None = None,
                       title: str | None = None) -> Path:
    """Best-of-N accuracy against N (log2 axis) from :func:`~ares_rerank.evaluation.bon.evaluate_bon` results:
    one line per row (default: every row), pass@N dashed as the ceiling, with SE bars."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ns = results["n_values"]
    styles = ["o", "s", "^", "D", "v", "P", "X", "*"]
    for i, row in enumerate(rows or list(results["rows"])):
        cells = results["rows"][row]
        ceiling = row == "pass@N"
        ax.errorbar(ns, [100 * cells[str(n)][0] for n in ns], yerr=[100 * cells[str(n)][1] for n in ns],
                    marker=styles[i % len(styles)], capsize=3, linestyle="--" if ceiling else "-",
                    color="black" if ceiling else None, alpha=0.85, label=row)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns])
    ax.set_xlabel("N (candidates per problem)")
    ax.set_ylabel("accuracy % (mean ± SE over problems)")
    ax.set_ylim(0, 102)
    ax.set_title(title or f"Best-of-N: {results['task']['name']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:  # noqa: ANN001 - a matplotlib Figure
    from ..utils.io import atomic_open

    path = Path(path)
    fig.tight_layout()
    with atomic_open(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ares_rerank.evaluation.plots", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="figure", required=True)
    lc = sub.add_parser("long-chains", help="Macro-F1 vs L from runner JSONs of vanilla ClaimTrees runs.")
    lc.add_argument("results", nargs="+", help="Runner result JSON files (one per length).")
    lc.add_argument("--out", required=True, help="PNG path.")
    se = sub.add_parser("efficiency", help="ARES evaluations vs budget from runner JSONs.")
    se.add_argument("results", nargs="+")
    se.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    results = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.results]
    if args.figure == "long-chains":
        print(plot_long_chains(long_chain_series(results), args.out))
    else:
        efficiency = [(r["task"]["name"], r["methods"]["ares"]["efficiency"])
                      for r in results if "ares" in r["methods"]]
        rows = [(name, e["actual_per_chain"], e["theoretical_per_chain"]) for name, e in efficiency]
        if not rows:
            raise SystemExit("none of the results has an 'ares' method: run the runner with --methods ares,...")
        print(plot_sample_efficiency(rows, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
