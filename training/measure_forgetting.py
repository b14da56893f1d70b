"""Measure what ``ares-rerank adapt`` keeps on wordings nobody tuned to: the previous defaults and the guarded ones,
side by side in one run (issue 51).

    python -m training.measure_forgetting --out /tmp/forgetting --threads 2 --seeds 0,1,2
    python -m training.measure_forgetting --out /tmp/f --seeds 0 --n 20 --lengths 7 --max_steps 20   # reduced

Per seed: 50 labelled chains (lengths 5-16, generator indices from 20,000 + 1,000 seed) of a target wording drawn by
a generator of :mod:`training.unseen_wordings` (``--generator``: ``generated``, written after the guard's first
defaults were fixed, on whose wordings 0 and 1 the columns below were compared; ``later``, written after the defaults
were chosen, for the final measurement), adapted from the shipped head twice with the same seed: ``before`` = the
previous defaults (no fresh-wording guard, no forgetting check: ``guard_chains=0, check_chains=0``), ``after`` = the
command's defaults. Then the shipped head and both adapted heads under ARES (prior 1, auto mode; 5-fold CV macro-F1
and at the threshold 0.5) on the first ``n`` evaluation chains (generator indices 0..n-1) of: the target wording at
each of ``--lengths``, a second generated wording not in the 50 chains (L = 10), the paper's wording (L = 10) and,
with ``--recipes``, the held-out recipe graphs. Prints per-seed rows and mean +- spread (max - min over seeds) per
set, with the adapt wall times and the load average; writes ``results.json`` after every measurement. Run again
into the same ``--out`` with the same settings, it continues a stopped run (heads adapted and sets measured are
reused), so a loaded machine can take it in bounded parts. ``--configs`` adds columns that change one default each
(:data:`CONFIGS`: replay share, averaging weight, steps, guard chains, check chains), e.g.
``--configs after,replay-0.7,weight-0.5,steps-120``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from ares_rerank.utils.io import write_atomic
from training.unseen_wordings import GENERATORS


__all__ = ["CONFIGS", "DEFAULT_CONFIGS", "main", "measure_set", "summary_table"]

# The adapt keywords of each column; "after" is the command's defaults. The others change one default each (the
# issue's "measure what helps"): more replay, a lower or no averaging, twice the steps, twice the guard's chains, and
# the check on the 24 chains it had until the sweep of training/results/adapt_forgetting_seeds012_sweep.md (whose
# "check-48" column is today's "after"); run them with --configs (not run by default).
CONFIGS: dict[str, dict[str, Any]] = {
    "before": {"guard_chains": 0, "check_chains": 0},
    "after": {},
    "replay-0.7": {"replay_share": 0.7},
    "weight-0.5": {"adapted_weight": 0.5},
    "weight-1.0": {"adapted_weight": 1.0},
    "steps-120": {"max_steps": 120},
    "guard-80": {"guard_chains": 80},
    "check-24": {"check_chains": 24},
}
DEFAULT_CONFIGS = ("before", "after")
TRAIN_LENGTHS = (5, 6, 8, 10, 12, 16)
FIRST_INDEX = 20_000


def _write_chains(path: Path, templates: Any, seed: int, n: int = 50) -> Path:
    from ares_rerank.data import load_claimtrees

    lines = []
    for i in range(n):
        chain = load_claimtrees(1, TRAIN_LENGTHS[i % len(TRAIN_LENGTHS)], start=FIRST_INDEX + 1000 * seed + i,
                                templates=templates)[0]
        lines.append(json.dumps({"id": f"target-{i}", "base_claims": list(chain.base_claims),
                                 "steps": list(chain.steps), "labels": list(chain.labels)}))
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def measure_set(chains: list[Any], backbone: Any) -> dict[str, float]:
    """ARES (prior 1, auto mode) CV macro-F1 and macro-F1 at the threshold 0.5 of ``chains``."""
    from ares_rerank.estimator.config import AresConfig
    from ares_rerank.evaluation.protocol import cross_validate, macro_prf
    from ares_rerank.scoring import score_chains

    scores = score_chains(chains, backbone, method="ares", config=AresConfig(prior=1.0, mode="auto"),
                          show_progress_bar=False)
    labels = [list(c.labels) for c in chains]
    flat = [x for s in scores for x in s.step_scores]
    return {"cv": cross_validate([s.step_scores for s in scores], labels).f1,
            "at_0.5": macro_prf([y for row in labels for y in row], [int(x <= 0.5) for x in flat])[2]}


def _sets(target: Any, other: Any, lengths: Sequence[int], n: int, recipes: bool) -> dict[str, list[Any]]:
    from ares_rerank.data import load_claimtrees, load_recipes
    from ares_rerank.training.mix import HELDOUT_RECIPES

    sets = {f"target wording, L = {k}": load_claimtrees(n, k, templates=target) for k in lengths}
    sets["other wording, L = 10"] = load_claimtrees(n, 10, templates=other)
    sets["paper wording, L = 10"] = load_claimtrees(n, 10)
    if recipes:
        sets["held-out recipes"] = [c for c in load_recipes(100) if c.meta["recipe"] in HELDOUT_RECIPES]
    return sets


def _earlier(out: Path, record: dict[str, Any]) -> dict[str, Any]:
    """What an earlier run into ``out`` with the same wordings, ``n`` and steps measured (a stopped run is continued:
    its adapted heads and numbers are reused, nothing else), else ``{}``."""
    path = out / "results.json"
    if not path.is_file():
        return {}
    earlier = json.loads(path.read_text())
    same = all(earlier.get(k) == record[k] for k in ("target", "other", "n", "max_steps"))
    if same:
        print(f"continuing the run in {out} (its adapted heads and measured sets are reused)", flush=True)
    return earlier if same else {}


def summary_table(results: dict[str, Any]) -> str:
    """Mean +- spread (max - min) over seeds of every set and head: CV macro-F1, and at 0.5 in brackets."""
    ran = {label for seed in results.values() for got in seed.get("sets", {}).values() for label in got}
    heads = ("shipped", *(label for label in CONFIGS if label in ran))
    lines = ["| set | " + " | ".join(f"{h} head" if h == "shipped" else f"adapted, {h}" for h in heads) + " |",
             "| --- |" + " --- |" * len(heads)]
    names = list(dict.fromkeys(name for seed in results.values() for name in seed.get("sets", {})))
    for name in names:
        cells = []
        for head in heads:
            got = [seed["sets"][name][head] for seed in results.values() if head in seed.get("sets", {}).get(name, {})]
            if not got:
                cells.append("-")
                continue
            cv, fixed = [g["cv"] for g in got], [g["at_0.5"] for g in got]
            cells.append(f"{sum(cv) / len(cv):.3f} ± {max(cv) - min(cv):.3f} ({sum(fixed) / len(fixed):.3f} ± "
                         f"{max(fixed) - min(fixed):.3f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.measure_forgetting", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="Folder for the chains, the adapted heads and results.json.")
    parser.add_argument("--seeds", default="0,1,2", help="Comma-separated seeds (training chains and adapt --seed).")
    parser.add_argument("--generator", default="generated", choices=sorted(GENERATORS),
                        help="Which wording generator of training/unseen_wordings.py draws both wordings: "
                             "'generated' (the defaults were chosen on its wordings 0 and 1) or 'later' (written "
                             "after the defaults were fixed; the final measurement).")
    parser.add_argument("--target", type=int, default=0, help="the generator's seed of the adapted-to wording.")
    parser.add_argument("--other", type=int, default=1, help="the generator's seed of the second wording.")
    parser.add_argument("--n", type=int, default=100, help="Evaluation chains per set.")
    parser.add_argument("--lengths", default="7,25", help="Lengths of the target wording's evaluation sets.")
    parser.add_argument("--recipes", action="store_true", help="Also the held-out recipe graphs (needs the data).")
    parser.add_argument("--max_steps", type=int, default=None, help="adapt --max_steps for both (default: its own).")
    parser.add_argument("--data_dir", default=None, help="adapt --data_dir (the folder holding recipe_graphs/).")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default).")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help=f"Comma-separated columns to adapt, from {list(CONFIGS)} (default: before,after; a "
                             "later run into the same --out adds the others).")
    args = parser.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    if not configs or any(c not in CONFIGS for c in configs):
        parser.error(f"--configs {args.configs!r}: choose from {list(CONFIGS)}.")
    if args.n < 5:
        parser.error(f"--n {args.n}: at least 5 chains per set (the CV has 5 folds).")
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    from ares_rerank.backbones.loading import load_backbone
    from ares_rerank.training.adapt import adapt_head
    target, other = GENERATORS[args.generator](args.target), GENERATORS[args.generator](args.other)
    out = Path(args.out)
    sets = _sets(target, other, [int(k) for k in args.lengths.split(",") if k], args.n, args.recipes)
    shipped = load_backbone("default", kind="nli", device="cpu")
    record: dict[str, Any] = {"target": asdict(target), "other": asdict(other), "n": args.n, "seeds": {},
                              "max_steps": args.max_steps, "shipped": {}}
    earlier = _earlier(out, record)
    extra = {"max_steps": args.max_steps} if args.max_steps else {}
    for name, chains in sets.items():  # the shipped head once: its scores do not depend on the seed
        record["shipped"][name] = earlier.get("shipped", {}).get(name) or measure_set(chains, shipped)
        print("shipped", name, record["shipped"][name], flush=True)
        write_atomic(out / "results.json", json.dumps(record, indent=2) + "\n")
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        chains_file = _write_chains(out / f"target-50-seed{seed}.jsonl", target, seed)
        entry: dict[str, Any] = {"sets": {name: {"shipped": record["shipped"][name]} for name in sets}, "adapt": {}}
        record["seeds"][str(seed)] = entry
        done = earlier.get("seeds", {}).get(str(seed), {})
        for label, config in CONFIGS.items():
            if label not in configs:
                entry["adapt"].update({label: done["adapt"][label]} if label in done.get("adapt", {}) else {})
                entry["sets"] = {name: {**got, **({label: done["sets"][name][label]} if label in
                                                  done.get("sets", {}).get(name, {}) else {})}
                                 for name, got in entry["sets"].items()}
                continue
            folder = out / f"seed{seed}-{label}"
            if label in done.get("adapt", {}) and (folder / "report.json").is_file():  # adapted by an earlier run
                entry["adapt"][label] = done["adapt"][label]
            else:
                start, load = time.time(), os.getloadavg()[0]
                adapted = adapt_head("default", chains_file, folder, overwrite_output_dir=True,
                                     torch_threads=args.threads, seed=seed, data_dir=args.data_dir, progress=False,
                                     **{**extra, **config})  # a column's own steps win over --max_steps
                entry["adapt"][label] = {"wall_seconds": round(time.time() - start, 1), "load_average_at_start": load,
                                         "load_average_at_end": os.getloadavg()[0],
                                         "forgetting_check": adapted.report.get("forgetting_check")}
                write_atomic(out / "results.json", json.dumps(record, indent=2) + "\n")
            backbone = load_backbone(str(folder / "head"), kind="nli", device="cpu")
            for name, chains in sets.items():
                entry["sets"][name][label] = (done.get("sets", {}).get(name, {}).get(label)
                                              or measure_set(chains, backbone))
                print(f"seed {seed} {label}", name, entry["sets"][name][label], flush=True)
                write_atomic(out / "results.json", json.dumps(record, indent=2) + "\n")
    table = summary_table(record["seeds"])
    walls = {label: [s["adapt"][label]["wall_seconds"] for s in record["seeds"].values() if label in s["adapt"]]
             for label in CONFIGS if any(label in s["adapt"] for s in record["seeds"].values())}
    note = (f"\n\n{len(record['seeds'])} seed(s), {args.n} chains per set; adapt wall seconds "
            + "; ".join(f"{k}: {v}" for k, v in walls.items()) + f"; load average now {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores. CV macro-F1 mean ± spread (max - min), at the threshold 0.5 in brackets.")
    write_atomic(out / "results.md", table + note + "\n")
    print(table + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
