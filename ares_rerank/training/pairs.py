"""Entailment pairs from labelled chains, as ``datasets.Dataset`` rows, split by chain.

Each step of a chain gives pairs ``(premises, hypothesis=step, label)`` with ``label = 1`` when the premises entail
the step:

- **sound prefix**: every base claim plus the earlier steps labelled sound; the label is the step's gold label
  (``1 - unsound``). This is the input ARES gives a step when the earlier steps are judged correctly.
- **full prefix** (needs an oracle): every earlier claim, sound or not (Entail-Prev's input).
- **random subsets** (needs an oracle), ARES-style: half of the subsets keep every base claim (prior 1) and drop each
  earlier step with a random rate; the other half keep every claim with one random rate. The label comes from the
  oracle, which knows entailment for any subset: for ClaimTrees a step ``P -> Q`` is entailed iff its rule and its
  precondition (the fact ``P`` or an included step concluding ``P``) are in the subset
  (:class:`~ares_rerank.backbones.oracle.ClaimTreesOracle`; recipe chains:
  :class:`~ares_rerank.backbones.oracle.RecipeOracle`).
- **minimal pairs** (needs an oracle, optional): for each entailed sound-prefix pair, the same premises minus ONE
  selected claim whose removal makes the step unentailed (for ClaimTrees: the rule, or the claim that gives the
  precondition). Each such negative differs from a positive by one claim, which is exactly the decision a head
  must get right inside ARES when an earlier step is rejected.

Chains without an oracle (e.g. PRMBench-style data, where only the gold step labels are known) give sound-prefix
pairs only: nothing tells us whether a step follows from an arbitrary subset.

Every premise list goes through the premise-selection stage the backbone uses at inference
(:func:`~ares_rerank.backbones.selection.get_selector`), so training sees exactly what scoring will, and with an oracle
the label is the truth of the **selected** premises: what the head can read. (On the ClaimTrees mix selection almost
never changes the truth; where it drops a needed claim, a head cannot see the evidence and must not be taught to
guess it.) Pairs are deduplicated on (selected premises, hypothesis) within a split. Chains are split by id, or by
their ``meta["split_group"]`` (a recipe graph), **before** any pair is built (:func:`split_chains`), so no chain, and
no recipe, contributes to two splits.
"""

from __future__ import annotations

import hashlib
import os
import random
from functools import lru_cache
from typing import Any, Callable, Sequence

from ..backbones.base import Backbone, call_backbone
from ..backbones.selection import PremiseSelector, apply_selector, get_selector
from ..chain import Chain


__all__ = ["PAIR_KINDS", "build_pairs", "chain_pairs", "generated_oracle", "pairs_dataset", "split_chains",
           "subset_masks"]

PAIR_KINDS = ("sound_prefix", "full_prefix", "subset", "minimal")
OracleFor = Callable[[Chain], "Backbone | None"]


def _stable_seed(*parts: Any) -> int:
    return int(hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:15], 16)


def split_chains(
    chains: Sequence[Chain],
    fractions: dict[str, float],
    seed: int = 0,
    group: Callable[[Chain], str] | None = None,
) -> dict[str, list[Chain]]:
    """Split chains by id (or by group, e.g. the recipe) into named parts; ``"train"`` gets the rest.

    Args:
        chains: Chains with unique ids.
        fractions: Share of groups per named split, e.g. ``{"val": 0.1, "test": 0.1}``.
        seed: Seed of the shuffle of the groups.
        group: The split unit; default ``chain.meta["split_group"]`` where a chain has one (the mix's recipe chains:
            their recipe graph), else the chain id. All chains of one group land in the same split.

    Returns:
        ``{"train": [...], **{name: [...]}}``, chains in input order within each split.
    """
    ids = [c.id for c in chains]
    if any(i is None for i in ids) or len(set(ids)) != len(ids):
        raise ValueError("split_chains needs chains with unique, non-None ids (the split unit): set Chain(id=...).")
    if "train" in fractions or any(not 0 <= f < 1 for f in fractions.values()) or sum(fractions.values()) >= 1:
        raise ValueError(
            f"fractions={fractions!r}: name the held-out splits (not 'train') with shares summing below 1."
        )
    key = group or (lambda c: str(c.meta.get("split_group") or c.id))
    groups = sorted({key(c) for c in chains})
    random.Random(seed).shuffle(groups)
    where: dict[str, str] = {}
    start = 0
    for name, share in fractions.items():
        count = max(1, round(share * len(groups))) if share > 0 else 0
        for g in groups[start:start + count]:
            where[g] = name
        start += count
    out: dict[str, list[Chain]] = {"train": [], **{name: [] for name in fractions}}
    for chain in chains:
        out[where.get(key(chain), "train")].append(chain)
    return out


def subset_masks(chain: Chain, k: int, count: int, rng: random.Random) -> list[list[int]]:
    """``count`` random subsets of the claims before step ``k`` (indices into ``chain.claims``), ARES-style."""
    n = chain.num_base + k
    masks = []
    for j in range(count):
        if j % 2 == 0:  # prior 1: all base claims, earlier steps dropped at a random rate
            drop = rng.uniform(0.0, 0.6)
            masks.append(list(range(chain.num_base)) + [i for i in range(chain.num_base, n) if rng.random() >= drop])
        else:
            keep = rng.uniform(0.4, 1.0)
            masks.append([i for i in range(n) if rng.random() < keep])
    return masks


def chain_pairs(
    chain: Chain,
    selector: PremiseSelector,
    oracle: Backbone | None = None,
    subsets_per_step: int = 2,
    seed: int = 0,
    minimal_pairs: bool = False,
) -> list[dict[str, Any]]:
    """Every pair of one chain (before deduplication), with selected premises.

    Args:
        chain: A chain with gold step labels (1 = unsound).
        selector: The premise-selection stage of the backbone the pairs are for.
        oracle: A backbone that returns ground-truth 0/1 entailment for any premise subset of this chain; ``None``
            gives sound-prefix pairs only.
        subsets_per_step: Random subsets per step (with an oracle).
        seed: Seed of the subsets (combined with the chain id).
        minimal_pairs: Add the one-claim-removed negatives of entailed sound-prefix pairs (with an oracle).

    Returns:
        Rows ``{"chain_id", "step", "kind", "premises", "hypothesis", "label"}``; ``label`` 1 = entailed.
    """
    if chain.labels is None:
        raise ValueError(f"chain {chain.id!r} has no labels: pairs need gold step labels (1 = unsound).")
    rng = random.Random(_stable_seed(seed, chain.id))
    claims = chain.claims
    rows, questions = [], []
    for k, step in enumerate(chain.steps):
        sound = list(range(chain.num_base)) + [chain.num_base + j for j in range(k) if chain.labels[j] == 0]
        masks = [("sound_prefix", sound)]
        if oracle is not None:
            masks.append(("full_prefix", list(range(chain.num_base + k))))
            masks += [("subset", m) for m in subset_masks(chain, k, subsets_per_step, rng)]
        for kind, mask in masks:
            included = [claims[i] for i in mask]
            selected = [included[i] for i in apply_selector(selector, included, step)]
            rows.append({"chain_id": chain.id, "step": k, "kind": kind, "premises": selected, "hypothesis": step,
                         "label": 1 - chain.labels[k]})
            questions.append(included)
    if oracle is not None:  # the truth of what the head reads: the selected premises
        truth = call_backbone(oracle, [r["premises"] for r in rows], [r["hypothesis"] for r in rows])
        for row, value in zip(rows, truth):
            row["label"] = int(value >= 0.5)
        if minimal_pairs:
            rows += _minimal_negatives(rows, questions, selector, oracle)
    return rows


def _minimal_negatives(rows: list[dict[str, Any]], questions: list[list[str]], selector: PremiseSelector,
                       oracle: Backbone) -> list[dict[str, Any]]:
    """Entailed sound-prefix pairs with one selected claim removed, kept where the oracle says that breaks them."""
    candidates, selected_sets = [], []
    for row, included in zip(rows, questions):
        if row["kind"] != "sound_prefix" or row["label"] != 1:
            continue
        for claim in dict.fromkeys(row["premises"]):
            without = [c for c in included if c != claim]
            candidates.append(row)
            selected_sets.append([without[i] for i in apply_selector(selector, without, row["hypothesis"])])
    if not candidates:
        return []
    truth = call_backbone(oracle, selected_sets, [r["hypothesis"] for r in candidates])
    return [{**row, "kind": "minimal", "premises": selected, "label": 0}
            for row, selected, value in zip(candidates, selected_sets, truth) if value < 0.5]


@lru_cache(maxsize=64)
def _recipe_oracle(recipe: str, data_dir: str | None) -> Backbone:
    from ..backbones.oracle import RecipeOracle
    from ..data.recipes import load_recipe_graphs

    graphs = dict(load_recipe_graphs(data_dir))
    if recipe not in graphs:
        raise ValueError(f"meta['recipe']={recipe!r} is not a recipe graph of the data folder: use one of "
                         f"{sorted(graphs)}.")
    return RecipeOracle(graphs[recipe])


def generated_oracle(chain: Chain, data_dir: str | os.PathLike[str] | None = None) -> Backbone | None:
    """The ground-truth oracle that a generated chain names in ``meta["oracle"]``, else ``None``.

    ``"recipe"``: :class:`~ares_rerank.backbones.oracle.RecipeOracle` over the graph ``meta["recipe"]`` (the mix's
    recipe chains), read from ``data_dir`` (the folder holding ``recipe_graphs/``; ``None`` reads
    ``$ARES_DATA_DIR``). ClaimTrees chains carry their rules instead; their oracle comes from ``oracle_for``.
    """
    kind = chain.meta.get("oracle")
    if kind is None:
        return None
    if kind == "recipe":
        return _recipe_oracle(chain.meta["recipe"], None if data_dir is None else str(data_dir))
    raise ValueError(f"chain {chain.id!r} names meta['oracle']={kind!r}: the known oracles are 'recipe'.")


def build_pairs(
    chains: Sequence[Chain],
    premise_selection: str | PremiseSelector = "relevant",
    oracle_for: OracleFor | None = None,
    subsets_per_step: int = 2,
    seed: int = 0,
    minimal_pairs: bool = False,
    data_dir: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Deduplicated pairs of many chains (first occurrence of each (premises, hypothesis) kept).

    Args:
        chains: Labelled chains of ONE split.
        premise_selection: The backbone's selection stage (``"all"``, ``"relevant"``, ...).
        oracle_for: ``chain -> oracle backbone or None``. A chain it gives no oracle (or every chain, when it is
            ``None``) uses the oracle its generator names (:func:`generated_oracle`, e.g. the mix's recipe chains),
            else it gives sound prefixes only.
        subsets_per_step, seed, minimal_pairs: See :func:`chain_pairs`.
        data_dir: The folder holding ``recipe_graphs/`` for the generated oracles (``None`` reads
            ``$ARES_DATA_DIR``).

    Returns:
        Rows as in :func:`chain_pairs`. Identical pairs with conflicting labels raise (they would mean a broken
        oracle or contradictory gold labels).
    """
    selector = get_selector(premise_selection)
    seen: dict[tuple, int] = {}
    out: list[dict[str, Any]] = []
    for chain in chains:
        oracle = (oracle_for(chain) if oracle_for is not None else None) or generated_oracle(chain, data_dir)
        for row in chain_pairs(chain, selector, oracle, subsets_per_step, seed, minimal_pairs):
            key = (tuple(row["premises"]), row["hypothesis"])
            if key in seen:
                if seen[key] != row["label"]:
                    raise ValueError(
                        f"pair {row['hypothesis'][:60]!r} (chain {row['chain_id']!r}) has conflicting labels across "
                        "chains: check the oracle / gold labels, or build these chains' pairs separately."
                    )
                continue
            seen[key] = row["label"]
            out.append(row)
    return out


def pairs_dataset(rows: Sequence[dict[str, Any]]) -> Any:
    """Rows -> ``datasets.Dataset`` with columns chain_id, step, kind, premises, hypothesis, label."""
    from datasets import Dataset

    columns = ("chain_id", "step", "kind", "premises", "hypothesis", "label")
    return Dataset.from_dict({c: [r[c] for r in rows] for c in columns})
