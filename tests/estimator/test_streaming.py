"""Streaming ARES: a state extended one step at a time gives the finished chain's scores (exact mode: identical;
sample and auto mode: within the guarantee over >= 500 seeds), a fork scores as its own chain streamed alone, and a
new step costs that step's backbone evaluations only."""

from __future__ import annotations

import random

import pytest

from ares_rerank import AresConfig, Chain, FunctionBackbone
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.data.claimtrees import claimtrees_vanilla
from ares_rerank.estimator import ares_scores
from ares_rerank.estimator import AresStream
from helpers import HashBackbone, brute_force_tau


def random_chain(seed: int, max_base: int = 4, max_steps: int = 12) -> Chain:
    rng = random.Random(seed)
    return Chain([f"b{i}" for i in range(rng.randint(1, max_base))],
                 [f"s{j}" for j in range(rng.randint(1, max_steps))], id=f"c{seed}")


@pytest.mark.parametrize("mode", ["exact", "auto"])
def test_exact_streaming_is_identical_to_scoring_the_finished_chain(mode):
    for seed in range(60):
        chain = random_chain(seed)
        config = AresConfig(mode=mode, prior=0.9, max_masks=4 if seed % 3 == 0 else None)
        finished = ares_scores([chain], HashBackbone(salt=str(seed)), config)[0]
        streamed = AresStream(HashBackbone(salt=str(seed)), config).score(chain.base_claims, chain.steps)
        if finished.mode == "exact":  # auto mode's stratified tail needs the whole chain; a stream samples instead
            assert streamed.step_scores == finished.step_scores
            assert streamed.error_bounds == finished.error_bounds
            assert streamed.evaluations_per_step == finished.evaluations_per_step


@pytest.mark.parametrize("mode", ["sample", "auto"])
def test_sampled_streaming_is_within_eps_of_the_truth_on_at_least_1_minus_delta_of_500_seeds(mode):
    eps, delta = 0.15, 0.1
    chain = Chain(["b0", "b1"], ["s0", "s1", "s2", "s3"])
    backbone = HashBackbone(salt="coverage")
    truth = brute_force_tau(chain, backbone, [0.8, 0.8])
    misses, sampled = 0, 0
    for seed in range(500):
        # max_masks=1 pushes auto mode past its hard budget, so it switches to sampling
        config = AresConfig(mode=mode, eps=eps, delta=delta, prior=0.8, seed=seed, max_masks=1)
        result = AresStream(backbone, config, horizon=8).score(chain.base_claims, chain.steps)
        sampled += result.mode == "sample"
        misses += max(abs(a - b) for a, b in zip(result.step_scores, truth)) > eps
    assert sampled == 500  # every run was sampled: the guarantee, not a hard bound, is what is tested
    assert misses <= delta * 500


def test_a_fork_scores_as_its_own_chain_streamed_alone():
    for mode in ("exact", "sample", "auto"):
        config = AresConfig(mode=mode, prior=0.9, max_masks=2)
        stream = AresStream(HashBackbone(salt="fork"), config, horizon=10)
        prefix = stream.start(["b0", "b1"])
        for step in ("s0", "s1", "s2"):
            stream.extend([prefix], [step])
        left, right = prefix.fork(), prefix.fork()
        stream.extend([left, right], ["left 3", "right 3"])  # two continuations in one backbone call
        stream.extend([left], ["left 4"])
        alone = AresStream(HashBackbone(salt="fork"), config, horizon=10)
        assert left.step_scores == alone.score(["b0", "b1"], ["s0", "s1", "s2", "left 3", "left 4"]).step_scores
        assert right.step_scores == alone.score(["b0", "b1"], ["s0", "s1", "s2", "right 3"]).step_scores
        assert prefix.num_steps == 3 and len(prefix.step_scores) == 3  # the forked prefix is untouched


def test_a_new_step_costs_its_own_evaluations_only_up_to_60_steps():
    chain = claimtrees_vanilla(0, length=61)  # 60 steps, a deleted claim: every later step is unsound
    seen: list[list[str]] = []

    def recording(premises, hypotheses):
        seen.append(list(hypotheses))
        return ClaimTreesOracle().entailment_probs(premises, hypotheses)

    stream = AresStream(FunctionBackbone(recording), horizon=60)
    state = stream.start(chain.base_claims)
    for k, step in enumerate(chain.steps):
        calls = len(seen)
        stream.extend([state], [step])
        new = [h for call in seen[calls:] for h in call]
        assert set(new) <= {step}  # no earlier step is judged again
        assert len(new) == state.evaluations_per_step[k] == stream.evaluations - sum(state.evaluations_per_step[:k])
    finished = ares_scores([chain], ClaimTreesOracle())[0]
    assert state.result().step_scores == finished.step_scores  # the oracle keeps it exact: identical
    assert state.first_error() == finished.first_error(0.5)


def test_many_states_share_one_backbone_call_and_the_memo():
    calls = []

    def counting(premises, hypotheses):
        calls.append(len(hypotheses))
        return [0.9] * len(hypotheses)

    stream = AresStream(FunctionBackbone(counting), AresConfig(mode="exact"))
    states = [stream.start(["q"]) for _ in range(5)]
    stream.extend(states, ["same step"] * 5)
    assert calls == [1]  # prior 1: one mask, one input for five identical states
    stream.extend(states[:2], ["same step", "same step"])
    assert stream.calls == 2


def test_bad_use_is_refused_with_the_fix():
    stream = AresStream(FunctionBackbone(lambda p, h: [0.5] * len(h)), horizon=2)
    state = stream.start(["q"])
    with pytest.raises(ValueError, match="one step each"):
        stream.extend([state], ["a", "b"])
    with pytest.raises(ValueError, match="not a non-blank string"):
        stream.extend([state], ["  "])
    with pytest.raises(ValueError, match="fork it"):
        stream.extend([state, state], ["a", "b"])
    stream.extend([state], ["a"])
    stream.extend([state], ["b"])
    with pytest.raises(ValueError, match="horizon=2"):
        stream.extend([state], ["c"])
    with pytest.raises(TypeError, match="this stream's start"):
        AresStream(FunctionBackbone(lambda p, h: [0.5] * len(h))).extend([state], ["c"])
    with pytest.raises(ValueError, match="at most max_steps"):
        AresStream(FunctionBackbone(lambda p, h: [0.5] * len(h)), horizon=10_000)


@pytest.mark.parametrize("seed", range(12))
def test_with_a_planned_premise_selection_the_stream_and_the_batch_estimator_agree_on_every_step(seed):
    """Both estimators group masks into backbone inputs with the one function of estimator/masks.py: with a
    selector that has a plan (``relevant``), exact mode, and masks under the row cap, every step's tau and bound
    agree (to rounding: the batch pass merges masks no later step reads, so it sums their weights first), the
    evaluation counts exactly, and every prefix streamed agrees with the finished prefix."""
    from ares_rerank.backbones.selection import SelectingBackbone
    from test_estimator_projection import symbol_chain

    rng = random.Random(seed)
    chain = symbol_chain(rng, n=rng.randint(1, 3), m=rng.randint(3, 7))
    config = AresConfig(mode="exact", prior=0.8, max_masks=64)  # 16 x 64 rows hold every mask of <= 10 claims
    finished = ares_scores([chain], SelectingBackbone(HashBackbone(salt=str(seed)), "relevant"), config)[0]
    stream = AresStream(SelectingBackbone(HashBackbone(salt=str(seed)), "relevant"), config)
    state = stream.start(chain.base_claims)
    for k, step in enumerate(chain.steps):
        stream.extend([state], [step])
        prefix = ares_scores([Chain(chain.base_claims, chain.steps[: k + 1])],
                             SelectingBackbone(HashBackbone(salt=str(seed)), "relevant"), config)[0]
        assert state.step_scores == pytest.approx(prefix.step_scores, abs=1e-12)
    assert state.step_scores == pytest.approx(finished.step_scores, abs=1e-12)
    assert state.result().error_bounds == pytest.approx(finished.error_bounds, abs=1e-12)
    assert state.evaluations_per_step == finished.evaluations_per_step


# -- bounds: the memo, one call's inputs, the steps ---------------------------------------------------------------
def _uncertain(premises, hypotheses):
    """Probabilities in [0.3, 0.7] that depend on the premises read: every trajectory asks its own input."""
    import hashlib

    return [0.3 + 0.4 * hashlib.sha256(("|".join(p) + h).encode()).digest()[0] / 255
            for p, h in zip(premises, hypotheses)]


@pytest.mark.parametrize("mode", ["auto", "sample"])
def test_the_memo_stays_bounded_and_emptying_it_changes_no_score(monkeypatch, mode):
    """A long stream of uncertain steps with max_evaluations=None kept every value (a 4,096-step chain: ~2.3 M keys
    of up to 4,096 references); past the bound the memo is emptied at the next extend, and since values are asked
    again rather than guessed, the scores are the same."""
    import ares_rerank.estimator.stream as stream_module

    config = AresConfig(mode=mode, max_evaluations=None)
    steps = [f"step {k} follows" for k in range(40)]
    unbounded = AresStream(FunctionBackbone(_uncertain, name="u"), config).score(["a", "b"], steps)
    monkeypatch.setattr(stream_module, "MEMO_MAX_ENTRIES", 2000)
    monkeypatch.setattr(stream_module, "MEMO_MAX_REFERENCES", 20_000)
    stream = AresStream(FunctionBackbone(_uncertain, name="u"), config)
    state = stream.start(["a", "b"])
    largest = 0
    for step in steps:
        stream.extend([state], [step])
        largest = max(largest, len(stream.memo))
    assert stream.memo_resets >= 1
    assert largest <= 2000 + len(state.rows)  # the bound, plus what one call may add
    assert state.result().step_scores == unbounded.step_scores


def test_one_extend_of_more_inputs_than_the_memo_holds_is_refused_before_any_state_changes(monkeypatch):
    """500 forks at step 32 of 64 in sample mode ask 500 x N inputs in one call (the memo grew by ~180,000 values,
    50 MB, per step); one call may ask at most MEMO_MAX_ENTRIES, and the error says how many states fit."""
    import ares_rerank.estimator.stream as stream_module

    stream = AresStream(FunctionBackbone(_uncertain, name="u"), AresConfig(mode="sample"), horizon=64)
    state = stream.start(["a", "b"])
    stream.extend([state], ["step 0"])
    n = len(state.rows)
    monkeypatch.setattr(stream_module, "MEMO_MAX_ENTRIES", 3 * n)
    forks = [state.fork() for _ in range(5)]
    with pytest.raises(ValueError, match=rf"5 states .* may ask {5 * n:,} backbone inputs .* extend at most 3 states"):
        stream.extend(forks, [f"fork {i}" for i in range(5)])
    assert all(f.num_steps == 1 for f in forks)  # no state was changed
    assert len(stream.extend(forks[:3], ["fork 0", "fork 1", "fork 2"])) == 3


@pytest.mark.parametrize("step, match", [
    ("a lone surrogate \ud800 here", "cannot be encoded as UTF-8"),
    ("x" * 10_000_000, "10,000,000 characters"),
])
def test_a_step_a_chain_would_refuse_is_refused_by_the_stream_too(step, match):
    stream = AresStream(FunctionBackbone(_uncertain, name="u"), AresConfig(mode="exact"))
    state = stream.start(["a"])
    with pytest.raises(ValueError, match=rf"AresStream.extend: steps\[0\]: .*{match}"):
        stream.extend([state], [step])
    assert state.num_steps == 0 and stream.calls == 0
