"""How few backbone inputs could any estimator with ARES's guarantee ask? (a script, not a test)

    python -m eval.bench_floor --task prmbench --sample 20 --backbone default \\
        --backbone-options '{"overlong_steps": "truncate"}' \\
        --json eval/results/real/floor_prmbench_sample20_default.json
    python -m eval.bench_floor --task claimtrees --length 60 --n 30 --backbone default

ARES's cost is the number of distinct inputs (selected premises, step) it sends the backbone. This script draws the
spec's i.i.d. trajectories itself (section 2 of ARES_SPEC: base claims kept with probability ``--prior``, step k
accepted with probability q_k of the premises accepted before it; N = ceil(ln(2m/delta) / (2 eps^2)) per chain),
through the backbone's public ``entailment_probs`` and its premise selection, with no code of the estimator, and
records every trajectory's value and input at every step. From them it sizes, per step, the fewest trajectories that
any estimator certifying ``|tau_k - estimate| <= eps`` could get by with, and counts the distinct inputs among that
many trajectories:

- the spread term ``(z * sd_k / eps)^2``: the normal approximation at the step's own standard deviation of values
  over the mask distribution, as if that deviation were known in advance (no real bound is this tight);
- the range term ``ln(1 / delta') / -ln(1 - 2 eps)``: whatever the values seen, a mass of 2 eps at the far end of
  [0, 1] that no trajectory has hit yet would move the mean by 2 eps, and it stays unseen with probability
  (1 - 2 eps)^n; a certificate for values in [0, 1] known only to lie there must wait that long;

each at ``delta' = delta / m`` (every step at once, as ARES certifies) and, looser still, at ``delta'`` = delta (one
step at a time). A sampler's floor is the larger term, capped at N. An exact enumeration needs no trajectories: it
asks the heaviest inputs until they hold 1 - 2 eps of the step's mass (the midpoint of the certified interval is then
within eps), estimated here from the drawn trajectories' frequencies. A step's floor is the smaller of the two.

The floor is not a theorem (the spread term takes each step's variance as known, and an estimator may use more than
black-box values), but it sits below the finite-sample bounds that known estimators meet, so a cost target under it
calls for a backbone that is surer or a larger eps, not for a better estimator. ARES (``--mode``, auto by default)
and Entail-Prev then run side by side on the same chains and backbone (as ``eval.bench_perf``) for their actual pairs
and wall time. Inputs are counted after premise selection, before a model's window policy (as ARES's pairs are).
Numbers depend on the machine: the output names it.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from ares_rerank.backbones.selection import premise_selector
from ares_rerank.chain import Chain
from ares_rerank.estimator.config import sample_size
from ares_rerank.utils.io import write_atomic

from .bench_perf import benchmark, run_header, run_record


__all__ = ["floor_counts", "floor_markdown", "main", "sample_trajectories"]


def sample_trajectories(chain: Chain, backbone: Any, num: int, prior: float = 1.0,
                        seed: int = 0) -> list[tuple[np.ndarray, list[tuple]]]:
    """``num`` i.i.d. ARES trajectories of ``chain``: per step, every trajectory's value and input key.

    The key is what the backbone reads (the premises its selection keeps, and the step): two trajectories with one
    key are one backbone input. Values come from ``backbone.entailment_probs`` (one call per step, distinct inputs
    only).
    """
    rng = np.random.default_rng(seed)
    select = premise_selector(backbone)
    base = list(chain.base_claims)
    included = [[c for c in base if rng.random() < prior] for _ in range(num)]
    steps = []
    for step in chain.steps:
        keys = []
        for claims in included:
            kept = select(claims, step) if select is not None else range(len(claims))
            keys.append((tuple(claims[i] for i in kept), step))
        distinct = list(dict.fromkeys(keys))
        answers = backbone.entailment_probs([list(k[0]) for k in distinct], [step] * len(distinct))
        value_of = dict(zip(distinct, (float(a) for a in answers)))
        values = np.array([value_of[k] for k in keys])
        steps.append((values, keys))
        for claims, q in zip(included, values):
            if rng.random() < q:
                claims.append(step)
    return steps


def floor_counts(steps: Sequence[tuple[np.ndarray, list[tuple]]], eps: float, delta: float,
                 simultaneous: bool = True) -> tuple[int, int]:
    """``(floor, all)``: distinct inputs among each step's floor-many trajectories (module docstring), and among all
    of them (what i.i.d. sampling with memoization asks), summed over the steps of one chain."""
    level = delta / len(steps) if simultaneous else delta
    z = NormalDist().inv_cdf(1 - level / 2)
    range_term = math.log(1 / level) / -math.log(1 - 2 * eps)
    floor = every = 0
    for values, keys in steps:
        spread_term = (z * float(values.std()) / eps) ** 2
        n = min(len(keys), max(1, math.ceil(max(spread_term, range_term))))
        sampled = len(set(keys[:n]))  # trajectories are i.i.d.: the first n are a draw of n
        counts = sorted(Counter(keys).values(), reverse=True)
        exact = int(np.searchsorted(np.cumsum(counts), (1 - 2 * eps) * len(keys))) + 1
        floor += min(sampled, exact, len(counts))
        every += len(counts)
    return floor, every


def floor_markdown(result: dict[str, Any]) -> str:
    """The floors beside what ARES and Entail-Prev asked, as pairs and as wall time at ARES's seconds per pair."""
    per_pair = result["ares_seconds"] / result["ares_pairs"]
    prev_pairs, prev_seconds = result["entail_prev_pairs"], result["entail_prev_seconds"]
    rows = [("i.i.d. sampling, memoized (this script's draw)", result["sampled"]),
            ("floor, every step at once (delta / m)", result["floor_all_steps"]),
            ("floor, one step at a time (delta)", result["floor_one_step"]),
            (f"ARES, {result['mode']} mode (measured)", result["ares_pairs"])]
    lines = ["| inputs asked | pairs | / Entail-Prev's | wall / Entail-Prev's (at ARES's seconds per pair) |",
             "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {pairs} | {pairs / prev_pairs:.2f}x | {pairs * per_pair / prev_seconds:.2f}x |"
              for label, pairs in rows]
    lines.append(f"| Entail-Prev (measured) | {prev_pairs} | 1.00x | 1.00x |")
    lines.append(f"\nMeasured wall: ARES {result['ares_seconds']:.1f} s, Entail-Prev {prev_seconds:.1f} s "
                 f"({result['ares_seconds'] / prev_seconds:.2f}x); ARES {per_pair * 1000:.1f} ms per pair, "
                 f"Entail-Prev {prev_seconds / prev_pairs * 1000:.1f} ms.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from ares_rerank.commands import options
    from ares_rerank.commands.eval import add_arguments, task_from_args

    parser = argparse.ArgumentParser(prog="python -m eval.bench_floor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--json", default=None, help="Also write the figures to this JSON file.")
    args = parser.parse_args(argv)
    task = task_from_args(args)
    backbone = options.backbone_from_args(args)
    config = options.config_from_args(args)
    chains = task.chains
    totals = {"floor_all_steps": 0, "floor_one_step": 0, "sampled": 0}
    for i, chain in enumerate(chains):
        steps = sample_trajectories(chain, backbone, sample_size(chain.num_steps, config.eps, config.delta),
                                    config.prior, config.seed + i)
        both, every = floor_counts(steps, config.eps, config.delta, simultaneous=True)
        one, _ = floor_counts(steps, config.eps, config.delta, simultaneous=False)
        totals["floor_all_steps"] += both
        totals["floor_one_step"] += one
        totals["sampled"] += every
    measured = benchmark(chains, backbone, ("ares", "entail-prev"), config, repeats=1)
    ares, prev = measured["methods"]["ares"], measured["methods"]["entail-prev"]
    result = {**run_record(task, args, config), "num_chains": len(chains), "num_steps": measured["num_steps"],
              "seed": config.seed, **totals, "ares_pairs": ares["pairs"], "ares_seconds": ares["seconds"],
              "entail_prev_pairs": prev["pairs"], "entail_prev_seconds": prev["seconds"]}
    print(run_header(result) + "\n")
    print(floor_markdown(result))
    if args.json:
        write_atomic(args.json, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
