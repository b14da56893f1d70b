"""Judge an entailment head under ARES and Entail-Prev on in-domain and held-out sets (numbers for the README).

    python -m training.evaluate_head --head default --out runs/default_head/eval.json
    python -m training.evaluate_head --head runs/default_head/head --sets claimtrees-5,3char-10 --n 20

Every set uses generator indices ``0 .. n-1`` (the paper's "first N examples"); the training mix starts at index
one million, so none of these chains, nor their names / templates where held out, was trained on. Macro-F1 follows
the spec's protocol (:func:`ares_rerank.evaluation.protocol.cross_validate`: 5-fold CV threshold over chains). ARES runs with
``prior=1.0`` in ``auto`` mode (exact, falling back to sampling when pruning would exceed eps). The head's window
policy statistics are reported per set (ClaimTrees-25 and up go through it when premises do not fit).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ares_rerank.chain import Chain
from ares_rerank.data import load_claimtrees, load_recipes
from ares_rerank.estimator import AresConfig
from ares_rerank.scoring import score_chains
from ares_rerank.training.mix import HELDOUT_TEMPLATES, TRAIN_LENGTHS


__all__ = ["EVAL_SETS", "evaluate_head", "main"]


def _vanilla(length: int, **kwargs: Any) -> Callable[[int], list[Chain]]:
    return lambda n: load_claimtrees(n, length, **kwargs)


# name -> (loader of the first n chains, group for the report)
EVAL_SETS: dict[str, tuple[Callable[[int], list[Chain]], str]] = {
    "claimtrees-5": (_vanilla(5), "in-distribution"),
    "claimtrees-10": (_vanilla(10), "in-distribution"),
    "claimtrees-20": (_vanilla(20), "in-distribution"),
    "claimtrees-7": (_vanilla(7), "held-out length"),
    "claimtrees-14": (_vanilla(14), "held-out length"),
    "claimtrees-30": (_vanilla(30), "held-out length, beyond window"),
    "claimtrees-50": (_vanilla(50), "held-out length, beyond window"),
    "3char-10": (_vanilla(10, name_length=3), "held-out names (3 characters)"),
    "3char-20": (_vanilla(20, name_length=3), "held-out names (3 characters)"),
    "reworded-10": (_vanilla(10, templates=HELDOUT_TEMPLATES["given"]), "held-out rewording"),
    "recipes": (lambda n: load_recipes(n), "out of domain (not in the mix)"),
}
DEFAULT_N = {"claimtrees-30": 50, "claimtrees-50": 50, "recipes": 50}


def _set_result(chains: list[Chain], backbone: Any, config: AresConfig) -> dict[str, Any]:
    from ares_rerank.evaluation.protocol import cross_validate

    labels = [list(c.labels) for c in chains]
    out: dict[str, Any] = {"num_chains": len(chains), "num_steps": sum(len(y) for y in labels)}
    for method in ("ares", "entail-prev"):
        stats_before = dict(vars(backbone.stats)) if hasattr(backbone, "stats") else {}
        start = time.time()
        scores = score_chains(chains, backbone, method=method, config=config)
        cv = cross_validate([s.step_scores for s in scores], labels)
        stats = {k: v - stats_before.get(k, 0) for k, v in vars(backbone.stats).items()} if stats_before else {}
        out[method] = {"f1": cv.f1, "f1_se": cv.f1_se, "precision": cv.precision, "recall": cv.recall,
                       "evaluations": sum(s.evaluations for s in scores), "seconds": round(time.time() - start, 1),
                       "window": {k: stats[k] for k in ("pairs_windowed", "premises_dropped") if k in stats}}
    return out


def evaluate_head(backbone: Any, sets: Sequence[str], n: int | None = None, config: AresConfig | None = None,
                  log: Callable[[str], None] = print) -> dict[str, Any]:
    """ARES and Entail-Prev macro-F1 of ``backbone`` on each named set of :data:`EVAL_SETS`.

    Args:
        backbone: Any backbone (e.g. ``load_backbone("default")``).
        sets: Names from :data:`EVAL_SETS`.
        n: Chains per set (``None``: 100, or 50 for ClaimTrees-30/50 and recipes).
        config: ARES settings; default ``AresConfig(prior=1.0, mode="auto")``.

    Returns:
        ``{set name: {"group", "num_chains", "num_steps", "ares": {...}, "entail-prev": {...}}}``.
    """
    config = config or AresConfig(prior=1.0, mode="auto")
    unknown = [s for s in sets if s not in EVAL_SETS]
    if unknown:
        raise ValueError(f"sets {unknown} are unknown: choose from {sorted(EVAL_SETS)}.")
    results = {}
    for name in sets:
        loader, group = EVAL_SETS[name]
        chains = loader(n or DEFAULT_N.get(name, 100))
        results[name] = {"group": group, **_set_result(chains, backbone, config)}
        r = results[name]
        log(f"{name:14s} {group:32s} ARES {r['ares']['f1']:.3f} +- {r['ares']['f1_se']:.3f}   "
            f"Entail-Prev {r['entail-prev']['f1']:.3f}   ({r['ares']['seconds'] + r['entail-prev']['seconds']:.0f}s)")
    return results


def markdown_table(results: dict[str, Any]) -> str:
    """The results as a markdown table (one row per set)."""
    lines = ["| set | group | chains | ARES macro-F1 | Entail-Prev macro-F1 | ARES evaluations | windowed pairs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        windowed = r["ares"]["window"].get("pairs_windowed", "-")
        lines.append(f"| {name} | {r['group']} | {r['num_chains']} | {r['ares']['f1']:.3f} ± {r['ares']['f1_se']:.3f} "
                     f"| {r['entail-prev']['f1']:.3f} ± {r['entail-prev']['f1_se']:.3f} | {r['ares']['evaluations']} "
                     f"| {windowed} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.evaluate_head", description=__doc__.split("\n")[0])
    parser.add_argument("--head", default="default", help="'default' (the shipped head) or a head folder.")
    parser.add_argument("--sets", default=",".join(EVAL_SETS), help=f"Comma-separated, from {list(EVAL_SETS)}.")
    parser.add_argument("--n", type=int, default=None, help="Chains per set (default 100; 50 for 30/50/recipes).")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default).")
    parser.add_argument("--out", default=None, help="Write the results JSON here (and a .md table beside it).")
    args = parser.parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    from ares_rerank.backbones.loading import load_backbone

    backbone = load_backbone(args.head, kind="nli", device="cpu")
    results = evaluate_head(backbone, [s for s in args.sets.split(",") if s], args.n)
    meta = {"head": args.head, "train_lengths": list(TRAIN_LENGTHS), "ares": {"prior": 1.0, "mode": "auto"}}
    table = markdown_table(results)
    print(table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
        Path(args.out).with_suffix(".md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
