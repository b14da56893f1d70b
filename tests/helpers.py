"""Deterministic fake backbones shared by the tests (no model needed)."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from typing import Sequence

from ares_rerank import Chain


class HashBackbone:
    """A deterministic 'random' backbone: q = a hash of (premises, hypothesis) mapped into [lo, hi]."""

    def __init__(self, lo: float = 0.05, hi: float = 0.95, salt: str = "") -> None:
        self.lo, self.hi, self.salt = lo, hi, salt
        self.calls = 0
        self.pairs = 0

    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> list[float]:
        self.calls += 1
        self.pairs += len(hypotheses)
        out = []
        for ps, h in zip(premises, hypotheses):
            digest = hashlib.sha256((self.salt + "\x01".join(ps) + "\x02" + h).encode()).digest()
            u = int.from_bytes(digest[:8], "big") / 2**64
            out.append(self.lo + (self.hi - self.lo) * u)
        return out


class CountingBackbone:
    """Wraps a backbone and records every call's batch size."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.batch_sizes: list[int] = []

    def entailment_probs(self, premises, hypotheses):
        self.batch_sizes.append(len(hypotheses))
        return self.inner.entailment_probs(premises, hypotheses)


def brute_force_tau(chain: Chain, backbone, priors: Sequence[float]) -> list[float]:
    """tau_k by enumerating every acceptance pattern of the earlier claims (exponential; tiny chains only)."""
    claims = chain.claims
    n = chain.num_base

    def q(k: int, alpha: tuple[int, ...]) -> float:
        premises = [c for c, a in zip(claims[: n + k], alpha) if a]
        return float(backbone.entailment_probs([premises], [chain.steps[k]])[0])

    taus = []
    for k in range(chain.num_steps):
        total = 0.0
        for alpha in itertools.product((0, 1), repeat=n + k):
            weight = 1.0
            for j in range(n):
                weight *= priors[j] if alpha[j] else 1.0 - priors[j]
            for i in range(k):
                qi = q(i, alpha[: n + i])
                weight *= qi if alpha[n + i] else 1.0 - qi
            if weight:
                total += weight * q(k, alpha)
        taus.append(total)
    return taus


REQUIRE_DATA_ENV = "ARES_REQUIRE_DATA"


def shared_data(subdir: str):
    """The shared data folder ``subdir`` (``$ARES_DATA_DIR/<subdir>``), or skip the test with one line saying what is
    missing; with ``ARES_REQUIRE_DATA=1`` (set by ``.ci/run``) a missing folder fails the test instead."""
    import os

    import pytest

    from ares_rerank.data.paths import shared_data_dir

    try:
        return shared_data_dir(subdir)
    except FileNotFoundError:
        where = os.environ.get("ARES_DATA_DIR")
        message = (f"needs '{subdir}/' of the shared data folder (ARES_DATA_DIR={where!r}; set it to the folder, "
                   "default ../shared/data beside the checkout)")
        if os.environ.get(REQUIRE_DATA_ENV):
            pytest.fail(f"{REQUIRE_DATA_ENV} is set but the test {message}", pytrace=False)
        pytest.skip(message)


@dataclass
class SamplingParams:
    """A stand-in for vLLM's ``SamplingParams`` (the fields the search and best-of-N paths set), for the vLLM tests'
    fake ``vllm`` module."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] | None = None
    max_tokens: int | None = 16
    min_tokens: int = 0


SamplingParams.__module__ = "vllm.entrypoints.llm"
