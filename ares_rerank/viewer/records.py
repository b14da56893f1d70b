"""What the viewer reads: the output files of ``score``, ``rank``, ``search`` and ``eval --task bon``, their record
kind detected, checked and turned into plain view objects (no HTML here).

A file is JSON lines (``score`` / ``rank`` / ``search``) or one JSON object (``eval --task bon`` writes an indented
``<name>.json``). At most ``max_records`` records are read; the rest are counted, never parsed or held, so a huge
file costs no more memory than the records shown.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass, field
from numbers import Real
from pathlib import Path
from typing import Any, Iterator, Sequence


__all__ = [
    "KINDS",
    "BonView",
    "CandidateView",
    "ChainView",
    "PromptView",
    "StepsView",
    "detect_kind",
    "read_records",
]

#: The record kinds ``ares-rerank view`` reads, and the command that writes each.
KINDS = {"score": "ares-rerank score", "rank": "ares-rerank rank", "search": "ares-rerank search",
         "bon": "ares-rerank eval --task bon"}
#: What marks each kind (for the error that names none of them).
SIGNS = ("score: 'step_scores' and 'evaluations'; rank: 'ranking' and 'scores'; search: 'completions', 'steps' and "
         "'best_index'; eval --task bon: \"kind\": \"best-of-n\" and 'rows'")
WHOLE_FILE_LIMIT = 64 << 20  # one indented JSON object (eval's results) is read whole only up to this size


@dataclass
class StepsView:
    """The steps of one chain or candidate as shown: text (``None`` where unknown), tau, flag, gold label, bound."""

    texts: list[str | None]
    taus: list[float]
    flags: list[bool]
    first_error: int = -1
    labels: list[int] | None = None
    bounds: list[float] | None = None
    note: str | None = None  # why the text is not shown per step, when it is not


@dataclass
class ChainView:
    """One scored chain (``score``): its steps and the certificate (a :class:`~ares_rerank.chain.ChainScores`)."""

    key: str
    base_claims: list[str]
    steps: StepsView
    scores: Any


@dataclass
class CandidateView:
    """One candidate of a prompt (``rank``, ``search``, a Python ranking)."""

    index: int
    text: str
    steps: StepsView
    score: float | None
    position: int | None = None  # 1 = ranked first
    answer: Any = None
    group: int | None = None
    votes: float | None = None
    chosen: bool = False
    status: str | None = None  # search: finished / stopped / cut


@dataclass
class PromptView:
    """One prompt with its candidates side by side (``rank`` / ``search``)."""

    key: str
    prompt: str
    candidates: list[CandidateView]
    groups: list[dict[str, Any]] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    rounds: bool = False  # search: show the candidates round by round


@dataclass
class BonView:
    """``eval --task bon``'s results: accuracy@N per method and selection."""

    results: dict[str, Any]


def detect_kind(record: Any) -> str | None:
    """The kind of one output record (a key of :data:`KINDS`), or ``None`` when it is none of them."""
    if not isinstance(record, dict):
        return None
    if record.get("kind") == "best-of-n" and isinstance(record.get("rows"), dict):
        return "bon"
    if "ranking" in record and "scores" in record:
        return "rank"
    if "completions" in record and "steps" in record and "best_index" in record:
        return "search"
    if "step_scores" in record and "evaluations" in record:
        return "score"
    return None


def read_records(path: str | os.PathLike[str], max_records: int) -> tuple[list[tuple[int, Any]], int]:
    """``([(line number, record), ...], records left out)`` of an output file: at most ``max_records`` records, the
    rest counted. ``-`` reads standard input.

    Raises:
        FileNotFoundError: ``path`` is not a file.
        ValueError: A line is not JSON, or not UTF-8 (the message names the file, the line and the fix).
    """
    if str(path) != "-" and not Path(path).is_file():
        raise FileNotFoundError(f"input file {str(path)!r} does not exist (or is not a file): give the JSONL file "
                                "that ares-rerank score / rank / search wrote, or eval --task bon's <name>.json.")
    records: list[tuple[int, Any]] = []
    left_out = 0
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        if len(records) >= max_records:
            left_out += 1
            continue
        try:
            records.append((lineno, json.loads(line)))
        except json.JSONDecodeError as err:
            whole = _whole_object(path) if lineno == 1 and line.lstrip().startswith("{") else None
            if whole is not None:
                return [(1, whole)], 0
            raise ValueError(f"{path}:{lineno} is not valid JSON ({err}): ares-rerank view reads the JSON lines that "
                             "score / rank / search write (one record per line), or eval --task bon's .json.") from err
    return records, left_out


def _lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line, decoded one line at a time so that a byte that is not UTF-8 is named with
    its own line (a text-mode file decodes whole blocks ahead)."""
    handle = sys.stdin.buffer if str(path) == "-" else open(path, "rb")
    try:
        for lineno, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}:{lineno} is not UTF-8 text (byte {err.start + 1} of the line: {err.reason})"
                                 ": save the file as UTF-8.") from err
            yield lineno, line.removeprefix("\ufeff") if lineno == 1 else line
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()


def _whole_object(path: str | os.PathLike[str]) -> Any:
    """The file as one JSON value (an indented results file), or ``None`` when it is not one (or too big to try)."""
    if str(path) == "-" or Path(path).stat().st_size > WHOLE_FILE_LIMIT:
        return None
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8").removeprefix("\ufeff"))
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


# -- checking the fields one kind needs ------------------------------------------------------------------------------


def number(value: Any, where: str, *, low: float = 0.0, high: float = 1.0, optional: bool = False) -> float | None:
    """``value`` as a float in [low, high] (``None`` allowed when ``optional``), or a ValueError naming ``where``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(value) or not low <= value <= high:
        raise ValueError(f"{where} is {_short(value)}: expected a number in [{low:g}, {high:g}]"
                         + (" or null." if optional else "."))
    return float(value)


def taus(value: Any, where: str) -> list[float]:
    """A list of step scores in [0, 1], or a ValueError naming ``where``."""
    if not isinstance(value, list):
        raise ValueError(f"{where} is {_short(value)}: expected a list of step scores in [0, 1].")
    return [number(v, f"{where}[{i}]") for i, v in enumerate(value)]


def flag_list(value: Any, count: int, where: str) -> list[bool]:
    if not isinstance(value, list) or len(value) != count or any(not isinstance(v, bool) for v in value):
        raise ValueError(f"{where} is {_short(value)}: expected {count} true/false flags, one per step score.")
    return list(value)


def text_of(value: Any, where: str) -> str:
    """The text of a prompt / candidate: a string, or a conversation's message contents (as the reranker reads)."""
    from ..chain import COMPLETION_ROLES, PROMPT_ROLES, message_text

    if isinstance(value, str):
        return value
    roles = PROMPT_ROLES + COMPLETION_ROLES + ("system",)
    try:
        return message_text(value, roles, where)
    except (TypeError, ValueError):
        return json.dumps(value, ensure_ascii=False)[:10000]  # shown as the data it is, never executed


def first_flag(flags: Sequence[bool]) -> int:
    return next((i for i, f in enumerate(flags) if f), -1)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
