"""Property-based tests of the Python API (issue 15): generated chains, configs, backbone outputs and thresholds thrown
at ``Chain``, ``AresConfig``, ``score_chains`` (every method), ``AresReranker.score_batch``, ``AresReward`` and
``AresFilter``. The contract: a result of the right shape with finite scores in [0, 1], or one of our errors (a
``ValueError`` / ``TypeError`` whose message names the parameter); never a hang, an internal exception (IndexError,
KeyError, AttributeError, ZeroDivisionError, numpy's errors), or a NaN.

Backbones are tiny and deterministic (a hash, or a generated answer), chains at most 3 base claims and 4 steps, so
exact mode stays small whatever ``max_masks`` says; the file runs in well under a minute.
"""

from __future__ import annotations

import hashlib
import math
import re

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ares_rerank import AresConfig, Chain, FunctionBackbone, score_chains
from ares_rerank.rerank.filters import AresFilter
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rewards import AresReward
from ares_rerank.scoring import METHODS


# Fast and reproducible: no example database in the checkout, no deadline (the first call imports numpy paths).
FAST = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

SPECIAL = st.sampled_from(["", " ", "\n\t", "\u3000", "\udcff", "\ud800x", "a\x00b", "I have A", "é ü 中文",
                          "\ue000"])
TEXT = st.text(max_size=12) | SPECIAL | st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
NOT_TEXT = st.none() | st.integers(-3, 3) | st.floats(allow_nan=True) | st.booleans() | st.just(b"x")
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 1.0, 0.5, -0.1, 1e-300, 1e300])
NUMBERISH = FLOATS | st.integers(-2, 10**12) | st.booleans() | st.none() | st.just("0.1") | st.just([0.5])


def _assert_ours(err: Exception, *names: str) -> None:
    """A ValueError / TypeError whose message names one of ``names`` (the parameter), not Python's own wording."""
    assert isinstance(err, (TypeError, ValueError)), repr(err)
    message = str(err)
    assert any(name in message for name in names), (names, message)
    assert not re.search(r"object is not (iterable|subscriptable|callable)|has no len\(\)|unsupported operand", message)


def _assert_scores(scores: list[float], num_steps: int) -> None:
    assert len(scores) == num_steps
    assert all(isinstance(s, float) and math.isfinite(s) and 0.0 <= s <= 1.0 for s in scores), scores


def hash_probs(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """Deterministic values in [0, 1] (ends included), from the text; surrogate-safe."""
    out = []
    for ps, h in zip(premises, hypotheses):
        digest = hashlib.sha256("\x01".join([*ps, h]).encode("utf-8", "surrogatepass")).digest()
        out.append(min(1.0, max(0.0, digest[0] / 200.0 - 0.1)))
    return out


class WholeChain:
    """A backbone with both capabilities, so the chain baselines (prm-chain, llm-judge) run too."""

    def __init__(self, answer=None) -> None:
        self.answer = answer

    def entailment_probs(self, premises, hypotheses):
        return hash_probs(premises, hypotheses) if self.answer is None else self.answer(len(hypotheses))

    def chain_step_probs(self, base_claims, steps):
        return hash_probs([list(base_claims)] * len(steps), list(steps))


# -- Chain -------------------------------------------------------------------------------------------------------------
@FAST
@given(base=st.lists(TEXT | NOT_TEXT, max_size=3) | NOT_TEXT | TEXT,
       steps=st.lists(TEXT | NOT_TEXT, max_size=4) | NOT_TEXT | TEXT,
       labels=st.none() | st.lists(st.integers(-1, 2) | NOT_TEXT, max_size=4) | TEXT)
def test_chain_is_built_or_says_which_field(base, steps, labels):
    try:
        chain = Chain(base, steps, labels=labels, id="gen")
    except (TypeError, ValueError) as err:
        _assert_ours(err, "base_claims", "steps", "labels")
        return
    assert chain.num_steps >= 1 and all(s.strip() for s in chain.steps)
    assert len(chain.fingerprint()) == 64  # every claim encodes: sample mode's seed never crashes
    assert chain.labels is None or set(chain.labels) <= {0, 1}


# -- AresConfig and score_chains ---------------------------------------------------------------------------------------
UNIT = st.floats(0.0, 1.0)
VALID_CONFIG = st.fixed_dictionaries({}, optional={
    "eps": st.floats(1e-3, 0.5), "delta": st.floats(1e-6, 0.99), "prior": UNIT, "threshold": UNIT,
    "prune_mass": st.none() | st.floats(0.0, 0.99), "mode": st.sampled_from(["auto", "exact", "sample"]),
    "max_masks": st.integers(1, 10**9), "seed": st.integers(0, 2**63), "max_samples": st.integers(1, 10**6),
    "base_priors": st.none() | st.lists(UNIT, max_size=3),
})
BAD_VALUE = st.tuples(st.sampled_from(["eps", "delta", "prior", "threshold", "prune_mass", "mode", "max_masks", "seed",
                                       "max_samples", "base_priors"]),
                      NUMBERISH | NOT_TEXT | st.integers(-(2**70), 2**70) | st.lists(NUMBERISH, max_size=2))
CONFIG = VALID_CONFIG | st.builds(lambda kw, bad: {**kw, bad[0]: bad[1]}, VALID_CONFIG, BAD_VALUE)
VALID_CHAIN = st.builds(
    Chain,
    st.lists(st.sampled_from(["I have A", "I have B", "If I have A, then I have C"]), max_size=3),
    st.lists(st.sampled_from(["I have C", "I have D", "So I have A", "x"]), min_size=1, max_size=4),
)


@FAST
@given(kwargs=CONFIG, chains=st.lists(VALID_CHAIN, min_size=1, max_size=3))
@example(kwargs={"seed": -1}, chains=[Chain(["I have A"], ["I have C"])])  # numpy's seed error, raised mid-run
@example(kwargs={"eps": 1e-300, "mode": "sample"}, chains=[Chain([], ["x"])])  # eps^2 underflows to 0
@example(kwargs={"eps": 1e-4}, chains=[Chain(["b"], [f"s{k}" for k in range(10)])])  # 264,915,869 trajectories
@pytest.mark.timeout(120)
def test_config_is_accepted_or_refused_by_name_and_scores_stay_in_range(kwargs, chains):
    try:
        config = AresConfig(**kwargs)
    except (TypeError, ValueError) as err:
        event("config refused")
        _assert_ours(err, *kwargs)
        return
    try:
        results = score_chains(chains, FunctionBackbone(hash_probs), config=config)
    except ValueError as err:  # the sample bound, or base_priors of another length than a chain's base claims
        event("scoring refused")
        _assert_ours(err, "max_samples", "mask matrix", "base_priors")
        return
    event(f"scored ({config.mode})")
    for chain, result in zip(chains, results, strict=True):
        _assert_scores(result.step_scores, chain.num_steps)
        assert result.mode in ("exact", "stratified", "sample")
        assert all(math.isfinite(b) and b >= 0 for b in result.error_bounds or [])


# A backbone's answer for n pairs: right, or wrong in every way seen in the wild.
ANSWER = st.sampled_from([
    lambda n: [0.5] * n,
    lambda n: [float("nan")] * n,
    lambda n: [float("inf")] * n,
    lambda n: [-0.5] * n,
    lambda n: [1.5] * n,
    lambda n: [0.5] * (n + 1),
    lambda n: [0.5] * max(0, n - 1),
    lambda n: {0.5: "x"} if n == 1 else {i / (n + 1): 1 for i in range(n)},
    lambda n: None,
    lambda n: 0.5,
    lambda n: ["0.5"] * n,
    lambda n: [[0.5]] * n,
    lambda n: {0.5},
    lambda n: iter(lambda: 0.5, None),
    lambda n: [True] * n,
])


@FAST
@given(answer=ANSWER, method=st.sampled_from(METHODS), chains=st.lists(VALID_CHAIN, min_size=1, max_size=2),
       mode=st.sampled_from(["auto", "exact", "sample"]))
def test_every_method_gives_scores_in_range_or_names_the_backbone(answer, method, chains, mode):
    try:
        results = score_chains(chains, WholeChain(answer), method=method, config=AresConfig(mode=mode, prior=0.9))
    except (TypeError, ValueError) as err:
        event("refused")
        _assert_ours(err, "backbone")
        return
    event("scored")
    for chain, result in zip(chains, results, strict=True):
        _assert_scores(result.step_scores, chain.num_steps)


# -- reranker, reward, filter ------------------------------------------------------------------------------------------
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]),
                                           "content": TEXT | NOT_TEXT}), max_size=2)
COMPLETION = TEXT | NOT_TEXT | MESSAGES | st.text(alphabet="ab .\n", max_size=30)


@FAST
@given(prompts=st.lists(TEXT | MESSAGES, min_size=1, max_size=3), data=st.data(),
       separator=st.sampled_from(["\n\n", "\n", ".", None, "re:\\s+", "re:("]))
def test_score_batch_gives_records_of_the_right_shape_or_our_error(prompts, data, separator):
    candidates = [data.draw(st.lists(COMPLETION, max_size=3)) for _ in prompts]
    try:
        reranker = AresReranker(FunctionBackbone(hash_probs), step_separator=separator)
        batches = reranker.score_batch(prompts, candidates)
    except (TypeError, ValueError) as err:
        _assert_ours(err, "step_separator", "prompt", "completion", "Chain")
        return
    assert [len(b) for b in batches] == [len(c) for c in candidates]
    for records in batches:
        for j, record in enumerate(records):
            assert record["index"] == j
            if record["score"] is not None:
                assert math.isfinite(record["score"]) and 0.0 <= record["score"] <= 1.0
                _assert_scores(record["step_scores"], len(record["steps"]))


@FAST
@given(pairs=st.lists(st.tuples(TEXT | MESSAGES, COMPLETION), max_size=5), answer=ANSWER,
       unscorable=st.none() | FLOATS | st.booleans())
@example(pairs=[("p", ""), ("p", "a")], answer=lambda n: [0.5] * n, unscorable=float("nan"))
@example(pairs=[("p", "x \udcff"), ("p", "a")], answer=lambda n: [0.5] * n, unscorable=None)
def test_reward_never_raises_on_a_completion_and_never_returns_nan(pairs, answer, unscorable):
    prompts, completions = [p for p, _ in pairs], [c for _, c in pairs]
    reranker = AresReranker(WholeChain(answer), config=AresConfig(mode="sample"))  # sample mode hashes the text
    try:
        reward = AresReward(reranker, unscorable_value=unscorable)
    except (TypeError, ValueError) as err:
        _assert_ours(err, "unscorable_value")
        return
    rewards = reward(prompts=prompts, completions=completions, trainer_state=None)
    assert len(rewards) == len(completions)
    for value in rewards:
        assert value is None or (isinstance(value, float) and math.isfinite(value)), rewards
        assert value is None or value == reward.unscorable_value or 0.0 <= value <= 1.0


@FAST
@given(threshold=st.none() | NUMBERISH, top_k=st.none() | st.integers(-1, 3) | NUMBERISH,
       completions=st.lists(COMPLETION, max_size=5), data=st.data())
def test_filter_is_refused_by_name_or_keeps_a_mask_of_the_right_length(threshold, top_k, completions, data):
    prompts = [data.draw(st.sampled_from(["I have A", "p"])) for _ in completions]
    try:
        ares_filter = AresFilter(AresReranker(FunctionBackbone(hash_probs)), threshold=threshold, top_k=top_k)
    except (TypeError, ValueError) as err:
        _assert_ours(err, "threshold", "top_k")
        return
    assert ares_filter.threshold is None or 0.0 <= ares_filter.threshold <= 1.0  # it can keep and drop something
    scores = ares_filter.scores(prompts, completions)
    keep = ares_filter.keep_mask(prompts, completions, scores)
    assert len(keep) == len(completions) and all(isinstance(k, bool) for k in keep)
    for score, kept in zip(scores, keep):
        assert score is None or (math.isfinite(score) and 0.0 <= score <= 1.0)
        assert not kept or score is not None
