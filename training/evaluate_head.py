"""Judge an entailment head under ARES and Entail-Prev on in-domain and held-out sets (numbers for the README).

    python -m training.evaluate_head --head default --out runs/default_head/eval.json
    python -m training.evaluate_head --head runs/default_head/head --sets claimtrees-5,3char-10 --n 20
    python -m training.evaluate_head --head oracle --sets recipes-heldout      # the rule / recipe oracle behind the
                                                                               # same premise selection: the ceiling

Every ClaimTrees set uses generator indices ``0 .. n-1`` (the paper's "first N examples"); the training mix starts at
index one million, so none of these chains, nor their names / wordings where held out, was trained on. The
CaptainCookRecipes sets use the spec's entries: ``recipes`` the first n of them (every recipe graph appears there,
training graphs included), ``recipes-heldout`` the entries among the first 100 whose graph is one of
:data:`~ares_rerank.training.mix.HELDOUT_RECIPES` (graphs the mix never uses; six distinct chains, repeated), and
``recipes-heldout-variants`` chains of those six graphs with other claims missing (an ingredient, a rule or
``We now START.``, seeded by the chain index: :func:`~ares_rerank.data.recipes.recipe_variant`). Macro-F1 follows
the spec's protocol (:func:`ares_rerank.evaluation.protocol.cross_validate`: 5-fold CV threshold over chains) and is
also reported at the fixed threshold 0.5 (``f1_at_0.5``). ARES runs with ``prior=1.0`` in ``auto`` mode (exact,
sampling the masks it drops once they pass 2 eps of mass). The head's window policy statistics are reported per set.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ares_rerank.chain import Chain
from ares_rerank.data import load_claimtrees, load_recipes
from ares_rerank.data.claimtrees import ClaimTreesTemplates
from ares_rerank.backbones.devices import DTYPES
from ares_rerank.utils.io import check_output_path, write_atomic
from ares_rerank.estimator.config import AresConfig
from ares_rerank.scoring import score_chains
from ares_rerank.training.mix import HELDOUT_RECIPES, TRAIN_LENGTHS
from ares_rerank.training.names import MULTI_WORD_PATTERN, random_names, rename_states
from ares_rerank.training.wordings import HELDOUT_TEMPLATES
from training.unseen_wordings import UNSEEN_WORDINGS


__all__ = ["EVAL_SETS", "check_sets", "evaluate_head", "main", "set_oracle"]


def _vanilla(length: int, **kwargs: Any) -> Callable[[int], list[Chain]]:
    return lambda n: load_claimtrees(n, length, **kwargs)


def _renamed(length: int, style: str) -> Callable[[int], list[Chain]]:
    """ClaimTrees-L chains (paper wording) with fresh names of a training style, seeded by the chain index."""
    def load(n: int) -> list[Chain]:
        chains = load_claimtrees(n, length)
        return [rename_states(c, random_names(length, style, random.Random(i)), f"-{style}")
                for i, c in enumerate(chains)]
    return load


def _heldout_recipes(n: int) -> list[Chain]:
    """The first-100 evaluation entries whose recipe graph is held out of training (at most ``n`` of them)."""
    return [c for c in load_recipes(100) if c.meta["recipe"] in HELDOUT_RECIPES][:n]


def _heldout_recipe_variants(n: int) -> list[Chain]:
    """``n`` chains of the held-out recipe graphs, each graph in turn, with an ingredient, a rule or START missing in
    turn (seed = chain index): many distinct held-out chains where the evaluation entries hold six."""
    from ares_rerank.data.recipes import load_recipe_graphs, recipe_variant

    graphs = [(name, graph) for name, graph in load_recipe_graphs() if name in HELDOUT_RECIPES]
    deletions = ("ingredient", "rule", "start")
    return [recipe_variant(*graphs[i % len(graphs)], seed=i, delete=deletions[(i // len(graphs)) % len(deletions)])
            for i in range(n)]


# held-out wording sets -> their key in HELDOUT_TEMPLATES (the loader and set_oracle read the same templates)
_WORDING_SETS = {"reworded-10": "given", "available-10": "available", "acquired-10": "acquired",
                 "attained-10": "attained", "procured-10": "procured", "fulfilled-10": "fulfilled",
                 "entails-10": "entails"}
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
    "multiword-10": (_renamed(10, "multi"), "unseen multi-word names"),
    **{name: (_vanilla(10, templates=HELDOUT_TEMPLATES[key]), f"held-out wording ({key})")
       for name, key in _WORDING_SETS.items()},
    # wordings for measuring `ares-rerank adapt` (training/measure_adapt.py): not in any mix, nor in the default sets
    **{f"{key}-{length}": (_vanilla(length, templates=UNSEEN_WORDINGS[key]), f"unseen wording ({key})")
       for key, length in (("ratified", 7), ("ratified", 25), ("cultivated", 10), ("kindled", 10))},
    "recipes": (lambda n: load_recipes(n), "recipes, all graphs (training graphs too)"),
    "recipes-heldout": (_heldout_recipes, "recipes, held-out graphs only"),
    "recipes-heldout-variants": (_heldout_recipe_variants, "recipes, held-out graphs, other claims missing"),
}
DEFAULT_N = {"claimtrees-30": 50, "claimtrees-50": 50, "recipes": 50, "recipes-heldout": 100,
             "recipes-heldout-variants": 60}
_SET_TEMPLATES = {**{name: HELDOUT_TEMPLATES[key] for name, key in _WORDING_SETS.items()},
                  **{name: UNSEEN_WORDINGS[name.split("-")[0]] for name in EVAL_SETS if name.split("-")[0] in
                     UNSEEN_WORDINGS}}
# The sets a plain run measures (the shipped head's card); the unseen wordings are measured by measure_adapt.
DEFAULT_SETS = [name for name in EVAL_SETS if name.split("-")[0] not in UNSEEN_WORDINGS]


def set_oracle(name: str, selection: str = "relevant:6") -> Any:
    """The ground-truth oracle of set ``name`` behind ``selection``: what a perfect head could reach there."""
    from ares_rerank.backbones.oracle import ClaimTreesOracle, RecipeOracle
    from ares_rerank.backbones.selection import SelectingBackbone

    if name.startswith("recipes"):
        from ares_rerank.data.recipes import load_recipe_graphs

        oracle: Any = RecipeOracle([g for _, g in load_recipe_graphs()])
    else:
        templates = _SET_TEMPLATES.get(name, ClaimTreesTemplates())
        if name.startswith("multiword"):
            templates = ClaimTreesTemplates(templates.rule, templates.fact, templates.step, MULTI_WORD_PATTERN)
        oracle = ClaimTreesOracle(templates)
    return SelectingBackbone(oracle, selection)


def _set_result(chains: list[Chain], backbone: Any, config: AresConfig) -> dict[str, Any]:
    from ares_rerank.evaluation.protocol import cross_validate, macro_prf

    labels = [list(c.labels) for c in chains]
    out: dict[str, Any] = {"num_chains": len(chains), "num_steps": sum(len(y) for y in labels)}
    for method in ("ares", "entail-prev"):
        stats_before = dict(vars(backbone.stats)) if hasattr(backbone, "stats") else {}
        start = time.time()
        scores = score_chains(chains, backbone, method=method, config=config)
        cv = cross_validate([s.step_scores for s in scores], labels)
        flat = [x for s in scores for x in s.step_scores]
        fixed = macro_prf([y for row in labels for y in row], [int(x <= 0.5) for x in flat])[2]
        stats = {k: v - stats_before.get(k, 0) for k, v in vars(backbone.stats).items()} if stats_before else {}
        out[method] = {"f1": cv.f1, "f1_se": cv.f1_se, "precision": cv.precision, "recall": cv.recall,
                       "f1_at_0.5": fixed,
                       "evaluations": sum(s.evaluations for s in scores), "seconds": round(time.time() - start, 1),
                       "window": {k: stats[k] for k in ("pairs_windowed", "premises_dropped") if k in stats}}
    return out


def check_sets(sets: Sequence[str]) -> None:
    """A ValueError naming every set of ``sets`` that :data:`EVAL_SETS` does not hold, and the choices."""
    unknown = [s for s in sets if s not in EVAL_SETS]
    if unknown:
        raise ValueError(f"sets {unknown} are unknown: choose from {', '.join(EVAL_SETS)}.")


def evaluate_head(backbone: Any, sets: Sequence[str], n: int | None = None, config: AresConfig | None = None,
                  log: Callable[[str], None] = print, oracle_selection: str | None = None) -> dict[str, Any]:
    """ARES and Entail-Prev macro-F1 of ``backbone`` on each named set of :data:`EVAL_SETS`.

    Args:
        backbone: Any backbone (e.g. ``load_backbone("default")``); unused with ``oracle_selection``.
        sets: Names from :data:`EVAL_SETS`.
        n: Chains per set (``None``: 100, or 50 for ClaimTrees-30/50 and recipes, 60 for recipes-heldout-variants;
            recipes-heldout: every held-out entry among the first 100).
        config: ARES settings; default ``AresConfig(prior=1.0, mode="auto")``.
        log: Where the one-line summary of each set goes.
        oracle_selection: Judge each set with its ground-truth oracle behind this premise selection
            (:func:`set_oracle`) instead of ``backbone``: the best any head behind that selection can do.

    Returns:
        ``{set name: {"group", "num_chains", "num_steps", "ares": {...}, "entail-prev": {...}}}``.
    """
    config = config or AresConfig(prior=1.0, mode="auto")
    check_sets(sets)
    results = {}
    for name in sets:
        loader, group = EVAL_SETS[name]
        chains = loader(n or DEFAULT_N.get(name, 100))
        judge = set_oracle(name, oracle_selection) if oracle_selection else backbone
        results[name] = {"group": group, **_set_result(chains, judge, config)}
        r = results[name]
        log(f"{name:15s} {group:42s} ARES {r['ares']['f1']:.3f} +- {r['ares']['f1_se']:.3f} "
            f"(t=0.5: {r['ares']['f1_at_0.5']:.3f})   Entail-Prev {r['entail-prev']['f1']:.3f}   "
            f"({r['ares']['seconds'] + r['entail-prev']['seconds']:.0f}s)")
    return results


def markdown_table(results: dict[str, Any]) -> str:
    """The results as a markdown table (one row per set)."""
    lines = ["| set | group | chains | ARES macro-F1 | ARES at t = 0.5 | Entail-Prev macro-F1 | ARES evaluations "
             "| windowed pairs |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in results.items():
        windowed = r["ares"]["window"].get("pairs_windowed", "-")
        ares, prev = r["ares"], r["entail-prev"]
        lines.append(f"| {name} | {r['group']} | {r['num_chains']} | {ares['f1']:.3f} ± {ares['f1_se']:.3f} "
                     f"| {ares['f1_at_0.5']:.3f} | {prev['f1']:.3f} ± {prev['f1_se']:.3f} "
                     f"| {ares['evaluations']} | {windowed} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.evaluate_head", description=__doc__.split("\n")[0])
    parser.add_argument("--head", default="default",
                        help="'default' (the shipped head), a head folder, or 'oracle' (each set's ground-truth "
                             "oracle behind --selection: the ceiling of any head behind that selection).")
    parser.add_argument("--selection", default="relevant:6", help="Premise selection of --head oracle.")
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS), help=f"Comma-separated, from {list(EVAL_SETS)}.")
    parser.add_argument("--n", type=int, default=None, help="Chains per set (default 100; 50 for 30/50/recipes, 60 for "
                                                             "recipes-heldout-variants).")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default).")
    parser.add_argument("--device", default="cpu", help="Where the head runs: cpu (the numbers in the docs), cuda, "
                                                        "auto, ...")
    parser.add_argument("--dtype", default="auto", choices=DTYPES,
                        help="The head's dtype (auto: bfloat16 on a CUDA GPU that has it, else float32).")
    parser.add_argument("--out", default=None, help="Write the results JSON here (and a .md table beside it).")
    args = parser.parse_args(argv)
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    from ares_rerank.backbones.loading import load_backbone

    sets = [s for s in args.sets.split(",") if s]
    try:
        check_sets(sets)
        if args.out:  # before any work
            check_output_path(args.out, flag="--out")
    except ValueError as err:
        parser.error(str(err))
    oracle = args.head == "oracle"
    try:
        backbone = None if oracle else load_backbone(args.head, kind="nli", device=args.device, dtype=args.dtype)
    except (OSError, ValueError) as err:  # a missing folder, a bad device: the message, not a traceback
        parser.error(f"--head {args.head!r}: {err}")
    dtype = str(getattr(getattr(backbone, "model", None), "dtype", "")).replace("torch.", "") or None
    meta = {"head": args.head, "device": args.device, "dtype": dtype, "train_lengths": list(TRAIN_LENGTHS),
            "ares": {"prior": 1.0, "mode": "auto"}, "sets": sets, **({"selection": args.selection} if oracle else {})}
    results: dict[str, Any] = {}

    def save(done: dict[str, Any]) -> None:  # after every set: a long run that is stopped keeps what it measured
        if args.out:
            record = {"meta": {**meta, "complete": len(done) == len(sets)}, "results": done}
            write_atomic(args.out, json.dumps(record, indent=2) + "\n")
            write_atomic(Path(args.out).with_suffix(".md"), markdown_table(done) + "\n")

    for name in sets:
        results.update(evaluate_head(backbone, [name], args.n, oracle_selection=args.selection if oracle else None))
        save(results)
    print(markdown_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
