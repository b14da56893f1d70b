"""ARES with a sampled backbone (a generative verifier): fresh verdicts per trajectory keep the guarantee, memoized
ones break it, exact / auto modes refuse, and the betting rule certifies agreeing verdicts with far fewer samples.

The verifiers here are simulated: each input has a known mean verdict q (a hash of which claims it reads), and
every call draws fresh verdicts around it, so the true tau of every step is known exactly (brute force over masks
with q). Each check runs 500 chains in ONE ``ares_scores`` call (every chain its own seed: its text carries a
nonce), so the whole file takes a few seconds.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from typing import Sequence

import numpy as np
import pytest

from ares_rerank import AresConfig, Chain, FunctionBackbone, sample_size
from ares_rerank.backbones.base import SampledVerdicts, call_sampler, is_sampled
from ares_rerank.estimator import AresStream, ares_scores
from ares_rerank.estimator.sequential import BettingStopper, fallback_size
from helpers import brute_force_tau


SEEDS = 500
EPS = DELTA = 0.1


@functools.lru_cache(maxsize=None)
def _index(text: str) -> int:
    return int(text.split()[1])  # "claim <i> nonce <s>": the claim's place, not its nonce


def _indices(texts: Sequence[str]) -> tuple[int, ...]:
    return tuple(_index(t) for t in texts)


@functools.lru_cache(maxsize=None)
def _mean(key: str) -> float:
    u = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
    return 0.15 + 0.7 * u


def mean_verdict(premises: Sequence[str], hypothesis: str) -> float:
    """q of an input: a hash of (which claims it reads, which step it judges) mapped into [0.15, 0.85]."""
    return _mean(repr((_indices(premises), _index(hypothesis))))


class BinaryVerdicts:
    """A generative verifier whose verdict is Yes (P = 1) or No (P = 0), Yes with probability q: the extreme spread
    (generative PRMs' scores cluster at 0 and 1)."""

    sampled = True

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.asked: Counter = Counter()  # input -> verdicts drawn for it, over every call
        self.calls: list[list[int]] = []

    def sample_probs(self, premises, hypotheses, n):
        self.calls.append(list(n))
        for ps, h, count in zip(premises, hypotheses, n):
            self.asked[(tuple(ps), h)] += count
        means = np.repeat([self.centre(ps, h) for ps, h in zip(premises, hypotheses)], n)
        return np.split(self.spread(means), np.cumsum(n)[:-1])  # every verdict drawn at once

    def centre(self, premises, hypothesis) -> float:
        return mean_verdict(premises, hypothesis)

    def spread(self, means: np.ndarray) -> np.ndarray:
        return (self.rng.random(len(means)) < means).astype(float)

    def draw(self, premises, hypothesis, count: int) -> np.ndarray:
        return self.spread(np.full(count, self.centre(premises, hypothesis)))


class AgreeingVerdicts(BinaryVerdicts):
    """P(Yes | rationale) within 0.05 of 0.9 (even steps) or 0.1 (odd steps), whatever the premises: the verdicts
    agree, so a variance-adaptive bound should need few of them. Reports a cost per pair (sample_verdicts)."""

    def centre(self, premises, hypothesis) -> float:
        return 0.9 if _index(hypothesis) % 2 == 0 else 0.1

    def spread(self, means: np.ndarray) -> np.ndarray:
        return means + self.rng.uniform(-0.05, 0.05, len(means))

    def sample_verdicts(self, premises, hypotheses, n, num_base=None):
        probs = self.sample_probs(premises, hypotheses, n)
        return SampledVerdicts(probs, [100 * c for c in n], [1] * len(n))


class MemoizedVerdicts:
    """The same verifier presented as a deterministic backbone: one verdict per input per call, which ARES then
    memoizes and shares across every trajectory that reaches the input (what the fresh-sample path must avoid)."""

    def __init__(self, inner: BinaryVerdicts) -> None:
        self.inner = inner

    def entailment_probs(self, premises, hypotheses):
        return [float(self.inner.draw(ps, h, 1)[0]) for ps, h in zip(premises, hypotheses)]


def chains(count: int, num_base: int, num_steps: int) -> list[Chain]:
    return [Chain([f"claim {i} nonce {s}" for i in range(num_base)],
                  [f"claim {num_base + k} nonce {s}" for k in range(num_steps)], id=f"c{s}") for s in range(count)]


def coverage(results, truth: Sequence[float], eps: float = EPS) -> float:
    hits = [all(abs(t - true) <= eps + 1e-12 for t, true in zip(r.step_scores, truth)) for r in results]
    return sum(hits) / len(hits)


PRIOR = 0.9
TINY = chains(SEEDS, num_base=1, num_steps=3)
TRUTH = brute_force_tau(TINY[0], FunctionBackbone(lambda P, H: [mean_verdict(p, h) for p, h in zip(P, H)]),
                        [PRIOR])


@pytest.mark.parametrize("stopping", ["hoeffding", "betting"])
def test_fresh_verdicts_keep_the_guarantee_in_every_mode_the_backbone_accepts(stopping):
    verifier = BinaryVerdicts(seed=1)
    config = AresConfig(mode="sample", prior=PRIOR, eps=EPS, delta=DELTA, stopping=stopping)
    results = ares_scores(TINY, verifier, config)
    assert coverage(results, TRUTH) >= 1 - DELTA
    first = results[0]
    assert first.mode == "sample" and first.stopping == stopping
    assert first.verdicts == first.num_samples * TINY[0].num_steps  # one fresh verdict per trajectory and step
    if stopping == "hoeffding":
        assert first.num_samples == sample_size(3, EPS, DELTA)
    else:  # binary verdicts disagree as much as values can: the rule runs to its Hoeffding fallback at delta / 2
        assert first.num_samples == fallback_size(3, EPS, DELTA)
        assert max(first.error_bounds) <= EPS
    # every group of trajectories asked as many verdicts as it had trajectories, in one call per wave
    assert all(c >= 1 for call in verifier.calls for c in call)


def test_memoized_verdicts_miss_the_truth_the_same_check_fails():
    verifier = BinaryVerdicts(seed=1)
    config = AresConfig(mode="sample", prior=PRIOR, eps=EPS, delta=DELTA, stopping="hoeffding")
    results = ares_scores(TINY, MemoizedVerdicts(verifier), config)
    rate = coverage(results, TRUTH)
    assert rate < 1 - DELTA  # the check above can fail: one shared verdict per input is not an average
    assert rate < 0.5


def test_agreeing_verdicts_certify_with_far_fewer_samples_than_hoeffding():
    verifier = AgreeingVerdicts(seed=2)
    long_chains = chains(SEEDS, num_base=1, num_steps=10)
    config = AresConfig(mode="sample", prior=1.0, eps=EPS, delta=DELTA)  # stopping: betting, for a sampled backbone
    results = ares_scores(long_chains, verifier, config)
    truth = [0.9 if (1 + k) % 2 == 0 else 0.1 for k in range(10)]
    assert coverage(results, truth) >= 1 - DELTA
    hoeffding = sample_size(10, EPS, DELTA)
    assert hoeffding == 265
    assert all(r.stopping == "betting" and r.num_samples <= 100 for r in results)
    assert max(verifier.asked.values()) <= 100  # verdicts per distinct input, over every batch
    assert all(max(r.error_bounds) <= EPS for r in results)
    r = results[0]
    assert r.generated_tokens == 100 * r.verdicts and r.requests == r.evaluations  # the costs reported, per chain
    assert "betting" in r.certificate() and "generated tokens" in r.certificate()


@pytest.mark.parametrize("mode", ["exact", "auto"])
def test_exact_and_auto_modes_refuse_a_sampled_backbone_naming_sample_mode(mode):
    with pytest.raises(ValueError, match="mode='sample'"):
        ares_scores(TINY[:1], BinaryVerdicts(), AresConfig(mode=mode))


def test_a_stream_refuses_a_sampled_backbone():
    with pytest.raises(ValueError, match="samples its verdicts"):
        AresStream(BinaryVerdicts(), AresConfig(mode="sample"))


def test_call_sampler_checks_what_the_backbone_returns():
    class Bad:
        sampled = True

        def __init__(self, answer):
            self.answer = answer

        def sample_probs(self, premises, hypotheses, n):
            return self.answer

    assert is_sampled(Bad(None)) and not is_sampled(FunctionBackbone(lambda P, H: [0.5] * len(H)))
    good = call_sampler(Bad([[0.1, 0.2], [0.3]]), [["a"], ["b"]], ["x", "y"], [2, 1])
    assert [p.tolist() for p in good.probs] == [[0.1, 0.2], [0.3]]
    with pytest.raises(ValueError, match="returned 1 values for 2"):
        call_sampler(Bad([[0.1], [0.3]]), [["a"], ["b"]], ["x", "y"], [2, 1])
    with pytest.raises(ValueError, match="outside"):
        call_sampler(Bad([[1.5]]), [["a"]], ["x"], [1])
    with pytest.raises(ValueError, match="at least one"):
        call_sampler(Bad([[]]), [["a"]], ["x"], [0])


def test_betting_stopping_works_for_a_deterministic_backbone_too():
    backbone = FunctionBackbone(lambda P, H: [mean_verdict(p, h) for p, h in zip(P, H)])
    config = AresConfig(mode="sample", prior=PRIOR, stopping="betting")
    results = ares_scores(TINY[:50], backbone, config)
    assert coverage(results, TRUTH) >= 1 - DELTA
    assert all(r.stopping == "betting" and r.verdicts is None for r in results)
    assert "stopping" not in ares_scores(TINY[:1], backbone, AresConfig(mode="sample"))[0].to_dict()


def test_betting_bounds_are_anytime_valid_on_their_own():
    """The stopper alone, 500 runs of i.i.d. Bernoulli(0.3) values on 2 steps: its reported intervals hold for at
    least 1 - delta of the runs, and it stops early on constant values."""
    rng = np.random.default_rng(5)
    cap = fallback_size(2, EPS, DELTA)
    misses = 0
    for _ in range(SEEDS):
        stopper = BettingStopper(2, EPS, DELTA, cap)
        while stopper.samples < cap and not stopper.certified():
            stopper.update((rng.random((32, 2)) < 0.3).astype(float))
        low, high = stopper.final_intervals()
        misses += bool(np.any((low > 0.3) | (high < 0.3)))
    assert misses / SEEDS <= DELTA
    constant = BettingStopper(2, EPS, DELTA, cap)
    constant.update(np.full((64, 2), 0.7))
    assert constant.certified()
    low, high = constant.final_intervals()
    assert np.all(low <= 0.7) and np.all(high >= 0.7) and cap == math.ceil(math.log(4 * 2 / DELTA) / (2 * EPS * EPS))


class Verifier(BinaryVerdicts):
    """BinaryVerdicts with the baselines' method too, as a generative verifier has (the mean of 10 verdicts)."""

    def entailment_probs(self, premises, hypotheses):
        return [float(p.mean()) for p in self.sample_probs(premises, hypotheses, [10] * len(hypotheses))]


def test_a_reranker_or_reward_on_a_sampled_backbone_refuses_auto_mode_when_built():
    from ares_rerank import AresReranker
    from ares_rerank.rewards.trl import AresReward

    # at construction, not per call: a reward server or trainer would otherwise leave every completion unscored
    with pytest.raises(ValueError, match="mode='sample'"):
        AresReranker(Verifier())
    with pytest.raises(ValueError, match="mode='sample'"):
        AresReward(AresReranker(Verifier(), AresConfig(mode="exact")))
    reranker = AresReranker(Verifier(), AresConfig(mode="sample", eps=0.3, delta=0.3), prompt_split="lines")
    (scores,) = reranker.score("claim 0 nonce r", ["claim 1 nonce r\n\nclaim 2 nonce r"])
    assert len(scores["step_scores"]) == 2
    # the record's certificate carries the sampled backbone's costs, as `score` writes them
    cost = scores["certificate"]
    assert cost["stopping"] == "betting" and cost["verdicts"] == cost["num_samples"] * 2, cost
    assert AresReranker(Verifier(), method="entail-prev").method == "entail-prev"  # a baseline needs no sample mode
