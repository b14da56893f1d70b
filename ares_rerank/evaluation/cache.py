"""Per-chain score cache: one JSON file per (task, backbone, method settings), keyed by the chain's text hash.

Scores depend only on a chain's text, the backbone and the method's settings (ARES seeds its sampler with the
chain's text), so a cached chain is never re-scored: re-thresholding, adding a method, or growing N re-runs the
backbone only on what is new. Files live under the folder the caller names (``ares-rerank eval --cache-dir``,
default ``./ares-eval/cache``; the checkout's benchmark scripts use ``eval/cache/``, git-ignored).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict
from pathlib import Path

from ares_rerank.chain import Chain, ChainScores
from ares_rerank.estimator import AresConfig
from ares_rerank.io import write_atomic


__all__ = ["ScoreCache", "method_key"]


def method_key(method: str, config: AresConfig | None = None) -> str:
    """``method`` plus, for ARES, every estimator setting that can change its scores (all but ``threshold``).

    The readable part names p, eps, delta and the mode; a short hash covers every other field (seed, mask budget,
    pruning, per-claim priors), so a setting added to :class:`AresConfig` later still gets its own cache file.
    """
    if method != "ares":
        return method
    c = config or AresConfig()
    settings = {k: v for k, v in asdict(c).items() if k != "threshold"}
    settings["prior"] = float(c.prior)
    if c.base_priors is None:
        del settings["base_priors"]  # keys written before the field existed stay valid
    else:
        settings["prior"] = [float(p) for p in c.base_priors]
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    prior = f"{c.prior:g}" if c.base_priors is None else "list"
    return f"ares-p{prior}-eps{c.eps:g}-delta{c.delta:g}-{c.mode}-{digest}"


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", part)[:150]


class ScoreCache:
    """Cached :class:`ChainScores`, one file per ``(task_key, backbone_key, method_key)``.

    Args:
        root: The cache folder (created on first write).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path(self, task_key: str, backbone_key: str, method: str) -> Path:
        return self.root / _safe(task_key) / _safe(backbone_key) / f"{_safe(method)}.json"

    def load(self, task_key: str, backbone_key: str, method: str) -> dict[str, dict]:
        """``{chain fingerprint: ChainScores as a dict}`` (empty when nothing is cached)."""
        path = self.path(task_key, backbone_key, method)
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return {}  # a torn write from a killed run: treat as empty, it is rewritten below

    def lookup(self, entries: dict[str, dict], chain: Chain) -> ChainScores | None:
        """The cached scores of ``chain`` in ``entries`` (with the chain's own id), or ``None``."""
        hit = entries.get(chain.fingerprint())
        if hit is None:
            return None
        return ChainScores(**{**hit, "chain_id": chain.id})

    def save(self, task_key: str, backbone_key: str, method: str, new: dict[str, ChainScores]) -> None:
        """Merge ``{fingerprint: scores}`` into the file (atomically: a killed run never leaves half a file)."""
        if not new:
            return
        path = self.path(task_key, backbone_key, method)
        entries = self.load(task_key, backbone_key, method)
        entries.update({fp: scores.to_dict() for fp, scores in new.items()})
        write_atomic(path, json.dumps(entries))
