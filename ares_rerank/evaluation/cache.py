"""Per-chain score cache: one JSON-lines file per (task, backbone, method settings), keyed by the chain's text hash.

Scores depend only on a chain's text, the backbone and the method's settings (ARES seeds its sampler with the
chain's text), so a cached chain is never re-scored: re-thresholding, adding a method, or growing N re-runs the
backbone only on what is new. Files live under the folder the caller names (``ares-rerank eval --cache-dir``,
default ``./ares-eval/cache``; the checkout's benchmark scripts use ``~/.cache/ares-rerank/eval``).

Each line of a cache file is one saved batch, ``{chain fingerprint: ChainScores as a dict, ...}``; later lines win.
A save appends one line (its cost is the batch, not the file: 10k chains in batches of 16 used to rewrite the whole
JSON 625 times) and never reads the file, so ``--refresh`` overwrites whatever is there. What a killed run or a
foreign edit can leave is skipped on reading, never fatal: a cut-off last line, a line that is not JSON, an entry of
the wrong shape (its chain is scored again). A file written before this format (``<method>.json``, one JSON object)
is read as the first line. When superseded or unreadable entries outnumber the live ones, :meth:`ScoreCache.load`
rewrites the file compacted (atomically), so repeated refreshes do not grow it without bound.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from ..chain import Chain, ChainScores
from ..estimator.config import AresConfig
from ..utils.checks import is_finite_number
from ..estimator import ESTIMATOR_REVISION
from ..utils.io import check_outside_package, naming_errors, remove_stale_temps, write_atomic


__all__ = ["ScoreCache", "method_key"]

# AresConfig fields that cannot change a score (they flag steps, or refuse a run): not part of the cache key.
_NOT_IN_KEY = ("threshold", "max_samples", "max_steps")  # change no score: a chain is scored the same or refused
_FIELDS = {f.name for f in fields(ChainScores)}
# Compact a cache file when it holds more superseded / unreadable entries than this and than live ones.
_COMPACT_MIN_STALE = 1000


def method_key(method: str, config: AresConfig | None = None) -> str:
    """``method`` plus, for ARES, every estimator setting that can change its scores (all but ``threshold``,
    ``max_samples`` and ``max_steps``).

    The readable part names p, eps, delta and the mode; a short hash covers every other field (seed, mask budget,
    pruning, per-claim priors) and the estimator's revision, so a setting added to :class:`AresConfig` later, or an
    estimator that scores differently, gets its own cache file.
    """
    if method != "ares":
        return method
    c = config or AresConfig()
    settings = {k: v for k, v in asdict(c).items() if k not in _NOT_IN_KEY}
    settings["prior"] = float(c.prior)
    if c.base_priors is None:
        del settings["base_priors"]
    else:
        settings["prior"] = [float(p) for p in c.base_priors]
    settings["estimator_revision"] = ESTIMATOR_REVISION  # scores of an older estimator are never read back
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    prior = f"{c.prior:g}" if c.base_priors is None else "list"
    return f"ares-p{prior}-eps{c.eps:g}-delta{c.delta:g}-{c.mode}-{digest}"


def _safe(part: str) -> str:
    """One path component from a key: no separators, never ``.`` / ``..`` or hidden, at most 150 characters (a longer
    key keeps a hash of the whole, so two long keys never share a file)."""
    text = re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(part))
    if text.startswith(".") or not text:
        text = "_" + text
    if len(text) > 150:
        text = text[:139] + "-" + hashlib.sha256(str(part).encode("utf-8", "replace")).hexdigest()[:10]
    return text


def _valid_entry(value: Any) -> bool:
    """Whether a cached value has the shape of :meth:`ChainScores.to_dict`, types included (eval sums and formats
    them): a file edited by hand or written by another program must not crash a run."""
    if not isinstance(value, dict) or not set(value) <= _FIELDS:
        return False
    scores, per_step = value.get("step_scores"), value.get("evaluations_per_step")
    bounds = value.get("error_bounds")
    return (
        isinstance(scores, list) and bool(scores) and all(is_finite_number(s) and 0.0 <= s <= 1.0 for s in scores)
        and _count(value.get("evaluations"))
        and isinstance(per_step, list) and len(per_step) == len(scores) and all(_count(e) for e in per_step)
        and all(isinstance(value.get(k, ""), str) for k in ("method", "mode"))
        and all(value.get(k) is None or is_finite_number(value[k]) for k in ("eps", "delta"))
        and (value.get("num_samples") is None or _count(value["num_samples"]))
        and (bounds is None or isinstance(bounds, list) and len(bounds) == len(scores)
             and all(map(is_finite_number, bounds)))
    )


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


class ScoreCache:
    """Cached :class:`ChainScores`, one file per ``(task_key, backbone_key, method_key)``.

    Args:
        root: The cache folder (created on first write). Every file stays inside it, whatever the keys hold.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        check_outside_package(root, flag="ScoreCache(root=...)")
        self.root = Path(root)

    def path(self, task_key: str, backbone_key: str, method: str) -> Path:
        """The cache file of one ``(task, backbone, method)``; each key becomes one safe path component.

        Raises:
            ValueError: The file would lie outside :attr:`root` (a folder inside it is a link to elsewhere).
        """
        path = self.root / _safe(task_key) / _safe(backbone_key) / f"{_safe(method)}.jsonl"
        if not path.resolve().is_relative_to(self.root.resolve()):
            raise ValueError(
                f"score cache file {str(path)!r} resolves to {str(path.resolve())!r}, outside the cache folder "
                f"{str(self.root)!r} (a link inside it points elsewhere): remove the link or choose another cache "
                "folder."
            )
        return path

    def load(self, task_key: str, backbone_key: str, method: str) -> dict[str, dict]:
        """``{chain fingerprint: ChainScores as a dict}`` (empty when nothing is cached); unreadable lines and
        wrong-shaped entries are skipped (those chains count as not cached)."""
        path = self.path(task_key, backbone_key, method)
        legacy, _ = _read_entries(path.with_suffix(".json"))
        entries, stale = _read_entries(path)
        if stale > max(_COMPACT_MIN_STALE, len(entries)) and not path.is_symlink():
            with contextlib.suppress(OSError):  # a read-only cache is still read; compaction can wait
                write_atomic(path, json.dumps(entries) + "\n")
        return {**legacy, **entries}

    def lookup(self, entries: dict[str, dict], chain: Chain) -> ChainScores | None:
        """The cached scores of ``chain`` in ``entries`` (with the chain's own id), or ``None`` (also for an entry
        that does not fit the chain: wrong shape, another number of steps)."""
        hit = entries.get(chain.fingerprint())
        if not _valid_entry(hit) or len(hit["step_scores"]) != chain.num_steps:
            return None
        try:
            return ChainScores(**{**hit, "chain_id": chain.id})
        except (TypeError, ValueError):
            return None

    def save(self, task_key: str, backbone_key: str, method: str, new: dict[str, ChainScores]) -> None:
        """Append ``{fingerprint: scores}`` to the file as one line (the file is not read; later lines win).

        A run killed mid-write leaves at most a cut-off last line, which reading skips and the next save closes.
        """
        if not new:
            return
        path = self.path(task_key, backbone_key, method)
        if path.is_symlink():
            raise ValueError(f"score cache file {str(path)!r} is a link: the cache never writes through a link; "
                             "remove it.")
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path)  # left by a compaction that was killed
        line = (json.dumps({fp: scores.to_dict() for fp, scores in new.items()}) + "\n").encode("utf-8")
        with naming_errors(path), open(path, "a+b") as handle:  # O_APPEND: each write lands at the end
            handle.seek(0, os.SEEK_END)
            if handle.tell() > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":
                    line = b"\n" + line  # a cut-off line from a killed run stays on its own line
            handle.write(line)


def _read_entries(path: Path) -> tuple[dict[str, dict], int]:
    """The entries of one cache file (later lines win) and how many entries or lines were stale or unreadable."""
    if not path.is_file():
        return {}, 0
    entries: dict[str, dict] = {}
    read = 0
    stale = 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                batch = json.loads(line)
            except ValueError:  # cut off by a killed run, or not ours
                stale += 1
                continue
            if not isinstance(batch, dict):
                stale += 1
                continue
            for fingerprint, value in batch.items():
                read += 1
                if _valid_entry(value):
                    entries[fingerprint] = value
    return entries, stale + read - len(entries)
