"""What the harness needs around a backbone (loaded by :func:`ares_rerank.load_backbone`): a cache key per backbone
and a wrapper that counts the work reaching it.

The cache key of a backbone (:func:`backbone_cache_key`) names it and, for ``"default"`` and local folders, carries a
fingerprint of the folder's files: retraining the head behind a name can never serve its old cached scores. A hub id
is keyed by name only (``--refresh`` after the hub model changes).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from ..backbones.base import call_backbone
from ..backbones.selection import premise_selector
from ..utils.http import redact


__all__ = ["CountingBackbone", "backbone_cache_key", "backbone_key", "folder_fingerprint"]


def backbone_key(name: str, kind: str | None = None) -> str:
    """A file-name-safe key for ``name`` (and ``kind``), used in cache paths and results file names (a URL's
    password left out)."""
    raw = redact(name) + (f"-{kind}" if kind else "")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).strip("_.")[:120] or "backbone"


def folder_fingerprint(folder: str | Path, full_hash_below: int = 64 * 2**20) -> str:
    """12 hex digits that change whenever a file directly in ``folder`` changes (content hash of files under
    ``full_hash_below`` bytes, size + mtime of bigger ones, which would be slow to hash on every run)."""
    digest = hashlib.sha1()
    for path in sorted(Path(folder).iterdir()):
        if not path.is_file():
            continue
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0".encode())
        if stat.st_size < full_hash_below:
            digest.update(hashlib.sha1(path.read_bytes()).digest())
        else:
            digest.update(str(stat.st_mtime_ns).encode())
    return digest.hexdigest()[:12]


def backbone_cache_key(name: str, kind: str | None = None, options: dict[str, Any] | None = None) -> str:
    """:func:`backbone_key` plus the load options, and for ``"default"`` and local model folders
    :func:`folder_fingerprint` of the folder."""
    key = backbone_key(name, kind)
    if options:
        key += "-" + hashlib.sha1(json.dumps(redact(options), sort_keys=True, default=str).encode()).hexdigest()[:8]
    folder = None
    if name == "default":
        from ..backbones.loading import DEFAULT_HEAD_DIR

        folder = DEFAULT_HEAD_DIR
    elif Path(name).is_dir():
        folder = Path(name)
    if folder is not None and folder.is_dir():
        key = f"{key}-{folder_fingerprint(folder)}"
    return key


class CountingBackbone:
    """Wraps a backbone and counts what reaches it: calls and (premises, hypothesis) pairs.

    Keeps ``chain_step_probs`` when the wrapped backbone has it (whole-chain baselines).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.pairs = 0
        if hasattr(inner, "chain_step_probs"):
            self.chain_step_probs = self._chain_step_probs

    def entailment_probs(self, premises, hypotheses, num_base=None):  # noqa: ANN001, ANN201 - the Backbone protocol
        self.calls += 1
        self.pairs += len(hypotheses)
        return call_backbone(self.inner, premises, hypotheses, num_base)

    def _chain_step_probs(self, base_claims, steps):  # noqa: ANN001, ANN201
        self.calls += 1
        self.pairs += len(steps)
        return self.inner.chain_step_probs(base_claims, steps)

    @property
    def selector(self):  # noqa: ANN201 - the wrapped backbone's premise selection, so the estimator can project
        return premise_selector(self.inner)

    def reset(self) -> None:
        self.calls = self.pairs = 0

    def __repr__(self) -> str:
        return f"CountingBackbone({self.inner!r})"
