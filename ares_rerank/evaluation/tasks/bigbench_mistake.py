"""BIG-Bench Mistake: chain-of-thought traces of PaLM 2 on five BIG-Bench tasks, with the first logical mistake.

Task metadata:
    name: BIG-Bench Mistake (Tyen et al. 2024, "LLMs cannot find reasoning errors, but can correct them given the
        error location"); tasks dyck_languages, logical_deduction, multistep_arithmetic, tracking_shuffled_objects,
        word_sorting (2,186 traces).
    source: ``<data>/bigbench_mistake/<task>.jsonl`` (WHGTyen/BIG-Bench-Mistake, Apache-2.0), a file, or a hub id.
    chain: base claims = ``input`` (one claim); steps = ``steps`` (empty steps dropped, the index moved with them).
    labels: ``mistake_index`` is the 0-based FIRST mistake (null = no mistake); annotators stopped there, so later
        steps carry no annotation of their own. Default ``labels="propagate"``: that step and every later one is
        unsound, following the ARES paper's definition (a step built on an unsound step carries a propagated error
        and is unsound; ClaimTrees and CaptainCookRecipes are labelled the same way). ``labels="first"`` marks only
        the first mistake (later steps count as sound: use it only to compare with first-mistake-only work).
        ProcessBench's first-error metric needs no such choice and is reported as well.
"""

from __future__ import annotations

import os
from typing import Any

from ...chain import Chain
from ...data.paths import shared_data_dir

from .base import TaskData, labels_from_first_error, records_from


__all__ = ["BBM_TASKS", "bbm_chain", "load_task"]

BBM_TASKS = ("dyck_languages", "logical_deduction", "multistep_arithmetic", "tracking_shuffled_objects", "word_sorting")


def bbm_chain(record: dict[str, Any], labels: str = "propagate", id: str | None = None) -> Chain:
    """One BIG-Bench Mistake record as a labelled chain (``meta["first_error"]`` = the mistake, -1 if none)."""
    if labels not in ("propagate", "first"):
        raise ValueError(f"labels={labels!r} is unknown: use 'propagate' (default) or 'first'.")
    raw = [str(s) for s in record["steps"]]
    mistake = record.get("mistake_index")
    kept = [i for i, s in enumerate(raw) if s.strip()]
    first = -1 if mistake is None else next((j for j, i in enumerate(kept) if i >= int(mistake)), -1)
    steps = [raw[i].strip() for i in kept]
    meta = {"task": "bigbench_mistake", "source": record.get("_source"), "first_error": first}
    y = labels_from_first_error(len(steps), first, propagate=labels == "propagate")
    return Chain([str(record["input"]).strip()], steps, labels=y, id=id, meta=meta)


def load_task(
    n: int | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    tasks: list[str] | None = None,
    labels: str = "propagate",
    data_dir: str | os.PathLike[str] | None = None,
) -> TaskData:
    """BIG-Bench Mistake traces as labelled chains.

    Args:
        n: Keep the first ``n`` traces (task files in sorted name order, lines in order); ``None`` = all.
        path: A file, a folder, or a hub id; ``None`` = ``<data_dir>/bigbench_mistake``.
        tasks: Keep only these tasks (file stems, e.g. ``["word_sorting"]``); ``None`` = all five.
        labels: ``"propagate"`` (default) or ``"first"``; see the module docstring.
        data_dir: The shared data folder (used when ``path`` is ``None``).

    Returns:
        A :class:`TaskData` with ``first_errors`` = the mistake index (-1 = no mistake).
    """
    unknown = sorted(set(tasks or ()) - set(BBM_TASKS))
    if unknown:
        raise ValueError(f"tasks={tasks!r} has unknown tasks {unknown}: use some of {list(BBM_TASKS)}.")
    source = path if path is not None else shared_data_dir("bigbench_mistake", data_dir)
    records = records_from(source, "*.jsonl", hub_split="train", required=("input", "steps"))
    if tasks:
        records = [r for r in records if r["_source"].removesuffix(".jsonl") in set(tasks)]
    records = records if n is None else records[:n]
    chains = [bbm_chain(r, labels, id=f"bbm-{r['_source'].removesuffix('.jsonl')}-{i}") for i, r in enumerate(records)]
    key = f"bbm-{'-'.join(sorted(tasks)) if tasks else 'all'}-{labels}"
    info = {"labels": labels, "tasks": tasks or list(BBM_TASKS)}
    return TaskData(
        "BIG-Bench Mistake", key, chains, first_errors=[c.meta["first_error"] for c in chains], info=info
    )
