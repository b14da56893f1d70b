"""Files in and out: JSON lines read with line numbers in errors, and writes that never leave half a file.

Every file the package writes goes through :func:`atomic_open` / :func:`write_atomic`: the text goes to a temporary
file beside the target, which replaces the target only when the write finished, so a killed run or a full disk
leaves the old file (or none), never a torn one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, TextIO


__all__ = ["atomic_open", "read_chains", "read_jsonl", "write_atomic"]


def read_jsonl(path: str | os.PathLike[str]) -> list[tuple[int, Any]]:
    """``(line number, parsed record)`` for each non-empty line of a JSONL file (``-`` reads standard input).

    Raises:
        FileNotFoundError: The file does not exist (the message names it).
        ValueError: A line is not JSON (the message names the file and line).
    """
    if str(path) == "-":
        lines = sys.stdin.read().splitlines()
    else:
        if not Path(path).is_file():
            raise FileNotFoundError(f"input file {str(path)!r} does not exist (or is not a file).")
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    records = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append((lineno, json.loads(line)))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno} is not valid JSON ({err}).") from err
    return records


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """Open ``path`` for writing text so that it appears only complete: a temporary file beside it is moved into
    place when the ``with`` block ends without an error, and removed when it raises (the parent folder is created).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_open`."""
    with atomic_open(path) as handle:
        handle.write(text)


def read_chains(path: str | os.PathLike[str], step_separator: str | None = "\n\n", prompt_split: str = "none") -> list:
    """The chains of a JSONL file (``-`` = standard input), one per non-empty line.

    A line is ``{"base_claims": [...], "steps": [...]}`` or ``{"prompt": "...", "completion": "..."}`` (the completion
    split into steps by ``step_separator``, ``None`` = sentences; the prompt into claims by ``prompt_split``), with
    optional ``"id"`` (default: the line number), ``"labels"`` (one per step, 1 = unsound) and, with ``steps``, ``"meta"``
    (e.g. the ``rules`` of a ClaimTrees chain, which lets training build oracle pairs).

    Raises:
        ValueError: A line is not such an object; the message names the file, the line and what is missing.
    """
    from .chain import Chain

    chains = []
    for lineno, record in read_jsonl(path):
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{lineno} must be a JSON object, got {type(record).__name__}.")
        try:
            if "steps" in record:
                chain = Chain(record.get("base_claims", []), record["steps"], labels=record.get("labels"),
                              id=str(record.get("id", lineno)), meta=record.get("meta"))
            elif "completion" in record:
                chain = Chain.from_text(record.get("prompt", ""), record["completion"], step_separator=step_separator,
                                        prompt_split=prompt_split, labels=record.get("labels"),
                                        id=str(record.get("id", lineno)))
            else:
                raise ValueError("needs 'steps' (with 'base_claims') or 'completion' (with 'prompt').")
        except (TypeError, ValueError) as err:
            raise ValueError(f"{path}:{lineno} {err}") from err
        chains.append(chain)
    return chains
