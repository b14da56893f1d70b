"""Step-level search against best-of-N on the simulated step generator (a script, not a test).

    python -m eval.bench_search                                   # ClaimTrees, rule oracle, 200 problems, N <= 16
    python -m eval.bench_search --task recipes --backbone default --n 12 --max-n 4

Runs :func:`ares_rerank.evaluation.search.evaluate_search`: plain best-of-N, best-of-N with hard early rejection,
beam search and DVTS, each scored by streaming ARES on the backbone, over the seeded simulated policy of
:mod:`ares_rerank.evaluation.simulated` (a step error with probability p per problem, then carried on). Writes
``<out>/<name>.json`` and ``.md`` (the accuracy-against-N table, steps / tokens per problem, early rejection's exact
savings) and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Sequence

from ares_rerank import load_backbone
from ares_rerank.evaluation.search import SEARCH_METHODS, evaluate_search, search_markdown
from ares_rerank.evaluation.simulated import claimtrees_simulation, recipes_simulation


__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.bench_search", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=("claimtrees", "recipes"), default="claimtrees")
    parser.add_argument("--backbone", default=None,
                        help="load_backbone name (default: claimtrees-oracle for claimtrees, default for recipes).")
    parser.add_argument("--n", type=int, default=None, help="Problems (default 200 ClaimTrees, 12 recipes).")
    parser.add_argument("--max-n", type=int, default=16, help="Largest N (default 16).")
    parser.add_argument("--beam-width", type=int, default=4, help="m of beam search and DVTS (default 4).")
    parser.add_argument("--p-range", type=float, nargs=2, default=(0.05, 0.3),
                        help="Per-problem step error probability range (default 0.05 0.3).")
    parser.add_argument("--methods", nargs="+", default=list(SEARCH_METHODS), choices=SEARCH_METHODS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("eval/results/search"))
    args = parser.parse_args(argv)
    if args.task == "claimtrees":
        task = claimtrees_simulation(args.n or 200, args.p_range, seed=args.seed)
        name = args.backbone or "claimtrees-oracle"
    else:
        from ares_rerank.training.mix import HELDOUT_RECIPES

        task = recipes_simulation(args.n or 12, args.p_range, recipes=HELDOUT_RECIPES, seed=args.seed)
        name = args.backbone or "default"
    began = time.perf_counter()
    results = evaluate_search(task, load_backbone(name), methods=args.methods, max_n=args.max_n,
                              beam_width=args.beam_width, seed=args.seed, backbone_name=name)
    results["seconds"] = time.perf_counter() - began
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{task.name.lower()}-n{len(task.problems)}-N{args.max_n}-s{args.seed}__{name}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    markdown = search_markdown(results)
    (args.out / f"{stem}.md").write_text(markdown + "\n")
    print(markdown)
    print(f"\n{results['seconds']:.0f} s; wrote {args.out / stem}.json / .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
