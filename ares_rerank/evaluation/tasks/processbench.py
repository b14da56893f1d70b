"""Any file in ProcessBench format: ``problem``, ``steps`` (list of strings), ``label`` (0-based first error, -1).

Task metadata:
    name: ProcessBench (Zheng et al. 2024, "ProcessBench: Identifying Process Errors in Mathematical Reasoning")
        and any data set written in its format.
    source: a ``.json`` / ``.jsonl`` file, a folder of them, or a hub id when online (e.g. ``Qwen/ProcessBench``
        with split ``gsm8k``, ``math``, ``olympiadbench`` or ``omnimath``).
    chain: base claims = ``problem`` (one claim); steps = ``steps`` (empty steps dropped, the index moved with them).
    labels: the label step and every later one unsound (propagation, as for BIG-Bench Mistake), for the per-step
        protocol; ``labels="first"`` marks only the first error.
    metric: ProcessBench's own (predict the first flagged step or -1; accuracy on erroneous and on correct
        samples; F1 = harmonic mean), reported beside the per-step macro-F1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...chain import Chain

from .base import TaskData, labels_from_first_error, records_from


__all__ = ["load_task", "processbench_chain"]


def processbench_chain(record: dict[str, Any], labels: str = "propagate", id: str | None = None) -> Chain:
    """One ProcessBench-format record as a labelled chain (``meta["first_error"]``: -1 = correct)."""
    if labels not in ("propagate", "first"):
        raise ValueError(f"labels={labels!r} is unknown: use 'propagate' (default) or 'first'.")
    missing = [k for k in ("problem", "steps", "label") if k not in record]
    if missing:
        raise ValueError(
            f"record {id or ''!r} lacks {missing}: ProcessBench format needs 'problem', 'steps' and 'label'."
        )
    raw = [str(s) for s in record["steps"]]
    label = int(record["label"])
    if label < -1 or label >= len(raw):
        raise ValueError(f"record {id or ''!r} has label={label} for {len(raw)} steps: use -1 or a 0-based step index.")
    kept = [i for i, s in enumerate(raw) if s.strip()]
    first = -1 if label == -1 else next((j for j, i in enumerate(kept) if i >= label), -1)
    steps = [raw[i].strip() for i in kept]
    meta = {"task": "processbench", "first_error": first, "source": record.get("_source")}
    y = labels_from_first_error(len(steps), first, propagate=labels == "propagate")
    return Chain([str(record["problem"]).strip()], steps, labels=y, id=id or record.get("id"), meta=meta)


def load_task(
    n: int | None = None, *, path: str | os.PathLike[str], split: str | None = None, labels: str = "propagate"
) -> TaskData:
    """Records of a ProcessBench-format source as labelled chains.

    Args:
        n: Keep the first ``n`` records; ``None`` = all.
        path: A ``.json`` / ``.jsonl`` file, a folder of them, or a hub id (needs ``split`` and the network).
        split: The hub split (ProcessBench: ``gsm8k``, ``math``, ``olympiadbench``, ``omnimath``).
        labels: ``"propagate"`` (default) or ``"first"``.

    Returns:
        A :class:`TaskData` with ``first_errors`` = the ``label`` field (after dropping empty steps).
    """
    if path is None:
        raise ValueError(
            "path=None: ProcessBench needs path= a file, a folder, or a hub id such as 'Qwen/ProcessBench'."
        )
    records = records_from(path, "*.json*", hub_split=split)
    records = records if n is None else records[:n]
    chains = [processbench_chain(r, labels, id=str(r.get("id", f"processbench-{i}"))) for i, r in enumerate(records)]
    name = Path(str(path)).stem + (f"-{split}" if split else "")
    return TaskData(
        f"ProcessBench-format ({name})", f"processbench-{name}-{labels}", chains,
        first_errors=[c.meta["first_error"] for c in chains], info={"path": str(path), "split": split},
    )
