"""Subcommands of the ``ares-rerank`` CLI, one module each (see :mod:`ares_rerank.cli`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """``(line number, parsed record)`` for each non-empty line of a JSONL file (``-`` reads standard input)."""
    lines = sys.stdin.read().splitlines() if str(path) == "-" else Path(path).read_text(encoding="utf-8").splitlines()
    records = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append((lineno, json.loads(line)))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno} is not valid JSON ({err}).") from err
    return records
