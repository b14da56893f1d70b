"""Cost against chain length (a script, not a test): every ARES mode and Entail-Prev on ClaimTrees-L chains.

    python -m eval.bench_cost --backbone claimtrees-oracle --premise-selection relevant --prior 0.95 \\
        --lengths 10,20,50 --n 20 --json eval/results/real/cost_oracle_relevant_p95.json --plot cost.png
    python -m eval.bench_cost --backbone default --lengths 10,20,30,60 --n 20 --json cost_default_p1.json

For each length L and each method (ARES in auto, exact and sample mode; Entail-Prev) it reports the (premises,
hypothesis) pairs that reach the backbone per step and per Hoeffding budget m * N(m), the encoder pairs of a model
backbone, the wall time per step (one timed run each, on a cold backbone cache), and ARES's certificate. Numbers
depend on the machine: the output names it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from ares_rerank.data.claimtrees import load_claimtrees
from ares_rerank.estimator.config import AresConfig

from ares_rerank import load_backbone
from .bench_perf import benchmark, certificate_text, machine_description
from ares_rerank.utils.io import write_atomic
from ares_rerank.evaluation.plots import plot_cost_vs_length
from ares_rerank.evaluation.report import markdown_table


__all__ = ["cost_rows", "cost_series", "main"]

MODES = ("auto", "exact", "sample")


def cost_rows(backbone: Any, lengths: Sequence[int], n: int, prior: float = 1.0, eps: float = 0.1,
              delta: float = 0.1, premise_selection: str | None = None) -> list[dict[str, Any]]:
    """One row per (L, method): pairs per step, pairs / (m N), encoder pairs, seconds, certificate."""
    rows = []
    for length in lengths:
        chains = load_claimtrees(n, length=length)
        runs = [(f"ARES {mode}", "ares", AresConfig(prior=prior, eps=eps, delta=delta, mode=mode)) for mode in MODES]
        runs.append(("Entail-Prev", "entail-prev", AresConfig()))
        for label, method, config in runs:
            res = benchmark(chains, backbone, (method,), config, repeats=1, premise_selection=premise_selection)
            r = res["methods"][method]
            rows.append({
                "length": length, "method": label, "chains": n, "steps": res["num_steps"],
                "pairs_per_step": r["pairs"] / res["num_steps"], "pairs_per_budget": r["pairs_per_budget"],
                "encoder_pairs": r.get("encoder_pairs"), "seconds": r["seconds"],
                "seconds_per_step": r["seconds"] / res["num_steps"], "certificate": r.get("certificate"),
            })
    return rows


def cost_series(rows: Sequence[dict[str, Any]]) -> dict[str, dict[int, tuple[float, float]]]:
    """``{method: {L: (pairs per step, seconds per step)}}`` for
    :func:`~ares_rerank.evaluation.plots.plot_cost_vs_length`."""
    series: dict[str, dict[int, tuple[float, float]]] = {}
    for row in rows:
        series.setdefault(row["method"], {})[row["length"]] = (row["pairs_per_step"], row["seconds_per_step"])
    return series


def cost_markdown(rows: Sequence[dict[str, Any]]) -> str:
    encoder = any(row["encoder_pairs"] is not None for row in rows)
    header = ["L", "method", "pairs / step", "pairs / (m N)", "wall s", "wall / Entail-Prev"]
    header += ["encoder pairs"] if encoder else []
    baseline = {row["length"]: row["seconds"] for row in rows if row["method"] == "Entail-Prev"}
    table = []
    for row in rows:
        cells = [row["length"], row["method"], f"{row['pairs_per_step']:.2f}", f"{row['pairs_per_budget']:.4f}",
                 f"{row['seconds']:.2f}", f"{row['seconds'] / baseline[row['length']]:.2f}x"]
        table.append(cells + ([row["encoder_pairs"]] if encoder else []))
    notes = [f"- L = {row['length']}, {row['method']}: {certificate_text(row['certificate'])}"
             for row in rows if row["certificate"]]
    return markdown_table(header, table) + "\n\n" + "\n".join(notes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.bench_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", default="claimtrees-oracle")
    parser.add_argument("--premise-selection", default=None, help="Wrap the backbone in this selection (relevant).")
    parser.add_argument("--lengths", default="10,20,50", help="Comma-separated ClaimTrees lengths L.")
    parser.add_argument("--n", type=int, default=20, help="Chains per length.")
    parser.add_argument("--prior", type=float, default=1.0)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--json", default=None, help="Write the rows to this JSON file.")
    parser.add_argument("--plot", default=None, help="Write the cost-against-length figure to this PNG.")
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    backbone = load_backbone(args.backbone)
    rows = cost_rows(backbone, lengths, args.n, args.prior, args.eps, args.delta, args.premise_selection)
    selection = f" behind {args.premise_selection!r} selection" if args.premise_selection else ""
    title = f"{args.backbone}{selection}, prior {args.prior}, eps = delta = {args.eps}/{args.delta}"
    print(f"{title}; {args.n} chains per length; {machine_description()}\n")
    print(cost_markdown(rows))
    if args.json:
        payload = {"backbone": args.backbone, "premise_selection": args.premise_selection, "prior": args.prior,
                   "eps": args.eps, "delta": args.delta, "machine": machine_description(), "rows": rows}
        write_atomic(Path(args.json), json.dumps(payload, indent=1))
    if args.plot:
        plot_cost_vs_length(cost_series(rows), args.plot, title=title)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
