"""What every task loader returns, and the small file helpers the loaders share."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from ...chain import Chain
from ...utils.io import read_jsonl, read_utf8


__all__ = ["TaskData", "first_unsound", "iter_records", "labels_from_first_error", "records_from", "strip_numbering"]


@dataclass
class TaskData:
    """Labelled chains of one benchmark, ready for the protocol.

    Attributes:
        name: Display name (``"ClaimTrees-10"``).
        key: A file-name-safe key naming the task and every option that changes its chains (used in cache paths).
        chains: The chains evaluated per step (each with one label per step, 1 = unsound).
        twins: For best-of-2 benchmarks, the sound twin of each chain (same order), else ``None``.
        first_errors: 0-based first unsound step per chain (-1 = none), for ProcessBench's metric; ``None`` when the
            benchmark does not define one.
        info: Notes on how the data was read (records skipped, label conventions), reported with the results.
    """

    name: str
    key: str
    chains: list[Chain]
    twins: list[Chain] | None = None
    first_errors: list[int] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, chain in enumerate(self.chains):
            if chain.labels is None:
                raise ValueError(f"task {self.name!r}: chain {i} ({chain.id}) has no labels; every chain needs them.")
        if self.twins is not None and len(self.twins) != len(self.chains):
            raise ValueError(f"task {self.name!r}: {len(self.twins)} twins for {len(self.chains)} chains.")
        if self.first_errors is not None and len(self.first_errors) != len(self.chains):
            raise ValueError(
                f"task {self.name!r}: {len(self.first_errors)} first errors for {len(self.chains)} chains."
            )

    def subsample(self, k: int, seed: int = 0) -> "TaskData":
        """``k`` examples drawn at random without replacement (seeded), kept in their original order.

        For benchmarks too slow to run whole on a CPU: the sample is the same for every method and backbone given the
        same ``seed``, its key names ``k`` and ``seed`` (so cached scores never mix samples), and ``info`` records it.
        Twins and first errors follow their chains. ``k`` at or above the task's size returns the task unchanged.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k={k!r} must be a positive integer (the number of examples to sample).")
        total = len(self.chains)
        if k >= total:
            return self
        import random

        keep = sorted(random.Random(seed).sample(range(total), k))
        pick = lambda items: None if items is None else [items[i] for i in keep]  # noqa: E731
        info = {**self.info, "sample": {"k": k, "seed": seed, "of": total}}
        return TaskData(f"{self.name} (sample {k}/{total})", f"{self.key}-sample{k}s{seed}", pick(self.chains),
                        twins=pick(self.twins), first_errors=pick(self.first_errors), info=info)


_NUMBERING = re.compile(r"^\s*\d+\.(?:\s+|$)")  # "3.5 apples" is not numbered


def strip_numbering(step: str) -> str:
    """Drop a leading ``"1. "``-style step number (PRMBench writes some steps that way) and surrounding spaces."""
    return _NUMBERING.sub("", step, count=1).strip()


def labels_from_first_error(num_steps: int, first_error: int | None, propagate: bool = True) -> list[int]:
    """Per-step labels from a first-error index: that step and (``propagate``) every later one is unsound."""
    if first_error is None or first_error < 0:
        return [0] * num_steps
    if propagate:
        return [int(i >= first_error) for i in range(num_steps)]
    return [int(i == first_error) for i in range(num_steps)]


def iter_records(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Records of a ``.jsonl`` file (one object a line, read by :func:`~ares_rerank.utils.io.read_jsonl`) or a ``.json``
    file holding a list of objects.

    Raises:
        ValueError: The file is not UTF-8 or not JSON, or a record is not an object; the message names the file.
    """
    path = Path(path)
    if path.suffix == ".json":
        try:
            data = json.loads(read_utf8(path))
        except json.JSONDecodeError as err:
            raise ValueError(f"path={str(path)!r} is not JSON ({err}); expected a list of records.") from err
        if not isinstance(data, list):
            raise ValueError(f"path={str(path)!r} holds a JSON {type(data).__name__}; expected a list of records.")
        records = [(f"record {number}", record) for number, record in enumerate(data, 1)]
    else:
        records = [(f"line {number}", record) for number, record in read_jsonl(path)]
    for where, record in records:
        if not isinstance(record, dict):
            raise ValueError(f"path={str(path)!r} {where} is a JSON {type(record).__name__}; expected one object per "
                             "record.")
        yield record


def first_unsound(labels: tuple[int, ...] | list[int]) -> int:
    """0-based index of the first unsound step, or -1."""
    return next((i for i, y in enumerate(labels) if y), -1)


def records_from(
    path: str | os.PathLike[str], pattern: str, *, hub_split: str | None = None, required: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Records from a file, from every file matching ``pattern`` in a folder (sorted by name), or from a Hugging
    Face Hub dataset id (``owner/name``; needs the network and ``datasets``).

    Args:
        path: A ``.jsonl`` / ``.json`` file, a folder, or a hub id.
        pattern: Glob for the files to read inside a folder.
        hub_split: The split to load when ``path`` is a hub id.
        required: Keys every record must have (the task's format).

    Returns:
        The records in file order, each with ``_source`` set to the file name (or hub id) it came from.

    Raises:
        ValueError: A record lacks a ``required`` key; the message names the source, the record and the keys.
    """
    target = Path(path).expanduser()
    if target.is_file():
        records = [dict(r, _source=target.name) for r in iter_records(target)]
    elif target.is_dir():
        files = sorted(target.glob(pattern), key=lambda p: p.name)
        if not files:
            raise FileNotFoundError(f"path={str(path)!r} holds no files matching {pattern!r}; point it at the data.")
        records = [dict(r, _source=f.name) for f in files for r in iter_records(f)]
    elif re.fullmatch(r"[\w.-]+/[\w.-]+", str(path)) and not str(path).startswith("."):
        records = _hub_records(str(path), hub_split)
    else:
        raise FileNotFoundError(
            f"path={str(path)!r} is neither a file, a folder nor a hub id (owner/name): pass the data's location."
        )
    for number, record in enumerate(records, 1):
        missing = [key for key in required if key not in record]
        if missing:
            raise ValueError(
                f"path={str(path)!r}: record {number} (in {record['_source']}) lacks {missing}; this task's records "
                f"need {list(required)}: is this the data of the --task you named?"
            )
    return records


def _hub_records(dataset_id: str, split: str | None) -> list[dict[str, Any]]:
    try:
        import datasets
    except ImportError as err:  # pragma: no cover - datasets is a dependency of the package
        raise ImportError("loading a hub dataset needs the `datasets` package: pip install datasets.") from err
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as err:  # offline, unknown id, unknown split: say what was asked and how to avoid the hub
        raise FileNotFoundError(
            f"path={dataset_id!r} (split={split!r}) could not be loaded from the Hugging Face Hub ({err}); "
            "download the files and pass their local path instead."
        ) from err
    return [dict(r, _source=dataset_id) for r in ds]
