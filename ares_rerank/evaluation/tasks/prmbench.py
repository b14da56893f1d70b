"""PRMBench: math solutions (PRM800K) with errors inserted by GPT-4o, every erroneous step annotated.

Task metadata:
    name: PRMBench (Song et al. 2025, "PRMBench: A Fine-grained and Challenging Benchmark for Process-Level
        Reward Models"), the ``test_p1`` files (718 records, 8 error types), the ``test_p2`` files
        (``split="test_p2"``, the same fields) or the ``train_p1_first400`` files.
    source: ``<data>/prmbench/prm800k_{test_p1,test_p2,train_p1_first400}_4o_<type>.jsonl`` (ssmisya/PRMBench,
        Apache-2.0), a single file, or a hub id when online.
    chain: base claims = the question (one claim); steps = ``modified_process`` with a leading ``"1."`` numbering
        stripped (empty steps dropped, labels moved with their steps).
    labels: step i (1-based) is unsound iff i is in ``error_steps`` (PRMBench annotates every erroneous step, so no
        propagation is added).
    twins: the ``original_process`` of the same record (the sound chain of best-of-2), all labels 0.
    question: by default each process gets the question it was written for: ``modified_question`` for the modified
        process (missing-condition and other records change the question) and ``original_question`` for the
        original; ``question="question"`` uses the ``question`` field for both.
    out-of-range labels: 21 test records (78 over all 16 files) name an ``error_steps`` entry beyond the number of
        steps (the annotation and the process disagree). ``out_of_range="skip"`` (default) drops those records;
        ``"ignore"`` keeps them and drops only the out-of-range indices. The count is reported in ``info``.
"""

from __future__ import annotations

import os
from typing import Any

from ...chain import Chain
from ...data.paths import shared_data_dir

from .base import TaskData, first_unsound, records_from, strip_numbering


__all__ = ["load_task", "prmbench_chains"]

# split -> the files of it in a PRMBench folder: test_p1 (the evaluation set), test_p2 (the second test part, the same
# fields) and train_p1_first400.
_PATTERNS = {"test": "prm800k_test_p1_4o_*.jsonl", "test_p2": "prm800k_test_p2_4o_*.jsonl",
             "train": "prm800k_train_p1_first400_4o_*.jsonl"}


def _steps_and_labels(process: list[str], error_steps: set[int]) -> tuple[list[str], list[int]]:
    pairs = [(strip_numbering(s), int(i in error_steps)) for i, s in enumerate(process, 1)]
    pairs = [(s, y) for s, y in pairs if s]
    return [s for s, _ in pairs], [y for _, y in pairs]


def prmbench_chains(record: dict[str, Any], question: str = "paired") -> tuple[Chain, Chain]:
    """The (original, modified) chains of one PRMBench record; out-of-range error steps are ignored here.

    Args:
        record: One PRMBench record.
        question: ``"paired"`` (each process with its own question) or ``"question"`` (the ``question`` field).

    Returns:
        ``(original chain with all-sound labels, modified chain with per-step labels)``.
    """
    if question not in ("paired", "question"):
        raise ValueError(f"question={question!r} is unknown: use 'paired' (default) or 'question'.")
    rid = f"prmbench-{record.get('classification', '')}-{record.get('idx', '')}"
    q_orig = record["question"] if question == "question" else record.get("original_question", record["question"])
    q_mod = record["question"] if question == "question" else record.get("modified_question", record["question"])
    steps, labels = _steps_and_labels(record["modified_process"], {int(e) for e in record["error_steps"]})
    orig_steps, _ = _steps_and_labels(record["original_process"], set())
    meta = {"task": "prmbench", "classification": record.get("classification"), "idx": record.get("idx")}
    modified = Chain([q_mod], steps, labels=labels, id=rid, meta=meta)
    original = Chain([q_orig], orig_steps, labels=[0] * len(orig_steps), id=f"{rid}-original", meta=meta)
    return original, modified


def _check_split_files(source: str | os.PathLike[str], split: str) -> None:
    """A folder without the files of ``split`` but with another split's: a FileNotFoundError naming the split to
    pass."""
    from pathlib import Path

    folder = Path(source).expanduser()
    if not folder.is_dir() or any(folder.glob(_PATTERNS[split])):
        return
    present = [name for name, pattern in _PATTERNS.items() if any(folder.glob(pattern))]
    if present:
        raise FileNotFoundError(f"path={str(source)!r} holds no PRMBench {split} files ({_PATTERNS[split]}) but holds "
                                f"the {' and '.join(present)} split: pass split={present[0]!r} (--split {present[0]}).")


def load_task(
    n: int | None = None,
    *,
    path: str | os.PathLike[str] | None = None,
    split: str = "test",
    classifications: list[str] | None = None,
    question: str = "paired",
    out_of_range: str = "skip",
    data_dir: str | os.PathLike[str] | None = None,
) -> TaskData:
    """PRMBench records as modified chains (per-step labels) with their original twins (best-of-2).

    Args:
        n: Keep the first ``n`` records after filtering (files in sorted name order, lines in order); ``None`` = all.
        path: A file, a folder, or a hub id; ``None`` = ``<data_dir>/prmbench``.
        split: ``"test"`` (``test_p1``, the evaluation set), ``"test_p2"`` (PRMBench's second test part) or
            ``"train"`` (``train_p1_first400``) inside a folder.
        classifications: Keep only these error types (e.g. ``["circular", "confidence"]``); ``None`` = all.
        question: See :func:`prmbench_chains`.
        out_of_range: ``"skip"`` records naming an error step beyond the last step, or ``"ignore"`` those indices.
        data_dir: The shared data folder (used when ``path`` is ``None``).

    Returns:
        A :class:`TaskData` with ``twins`` (original processes) and ``first_errors``.
    """
    if split not in _PATTERNS:
        raise ValueError(f"split={split!r} is unknown: use {', '.join(map(repr, _PATTERNS))}.")
    if out_of_range not in ("skip", "ignore"):
        raise ValueError(f"out_of_range={out_of_range!r} is unknown: use 'skip' (default) or 'ignore'.")
    source = path if path is not None else shared_data_dir("prmbench", data_dir)
    _check_split_files(source, split)
    records = records_from(source, _PATTERNS[split], hub_split=split,
                           required=("question", "original_process", "modified_process", "error_steps"))
    if classifications:
        known = sorted({str(r.get("classification")) for r in records if r.get("classification") is not None})
        unknown = [c for c in classifications if c not in known]
        if unknown:
            raise ValueError(f"classifications={unknown} are not error types of PRMBench {split}: use some of {known}.")
        records = [r for r in records if r.get("classification") in set(classifications)]
    in_range = [all(int(e) <= len(r["modified_process"]) for e in r["error_steps"]) for r in records]
    num_out = in_range.count(False)
    if out_of_range == "skip":
        records = [r for r, ok in zip(records, in_range) if ok]
    records = records if n is None else records[:n]
    pairs = [prmbench_chains(r, question) for r in records]
    chains = [m for _, m in pairs]
    first = [first_unsound(c.labels) for c in chains]
    kinds = "-".join(sorted(classifications)) if classifications else "all"
    key = f"prmbench-{split}-{kinds}-{question}-{out_of_range}"
    info = {
        "split": split, "question": question, "out_of_range": out_of_range, "records_out_of_range": num_out,
        "records_skipped": num_out if out_of_range == "skip" else 0, "classifications": classifications,
    }
    return TaskData("PRMBench", key, chains, twins=[o for o, _ in pairs], first_errors=first, info=info)
