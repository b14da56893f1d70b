from __future__ import annotations

import math
import random

import pytest

from ares_rerank import AresConfig, Chain, FunctionBackbone, sample_size, score_chains
from helpers import CountingBackbone, HashBackbone, brute_force_tau


def random_chain(rng: random.Random, n: int, m: int) -> Chain:
    return Chain(
        [f"base {i} {rng.random():.6f}" for i in range(n)],
        [f"step {k} {rng.random():.6f}" for k in range(m)],
    )


@pytest.mark.parametrize("m, expected", [(4, 220), (9, 260), (10, 265), (19, 298), (49, 345)])
def test_sample_size_matches_hoeffding_bound(m, expected):
    assert sample_size(m, eps=0.1, delta=0.1) == expected
    assert expected == math.ceil(math.log(2 * m / 0.1) / (2 * 0.01))


@pytest.mark.parametrize("seed", range(6))
def test_exact_mode_equals_brute_force(seed):
    rng = random.Random(seed)
    chain = random_chain(rng, n=rng.randint(0, 3), m=rng.randint(1, 4))
    priors = [rng.choice([1.0, 0.9, 0.6, 0.3]) for _ in range(chain.num_base)]
    backbone = HashBackbone(salt=str(seed))
    config = AresConfig(mode="exact", base_priors=priors, max_masks=10_000, prune_mass=0.0)
    (scores,) = score_chains([chain], backbone, config=config)
    expected = brute_force_tau(chain, backbone, priors)
    assert scores.mode == "exact"
    assert scores.error_bounds == [0.0] * chain.num_steps
    assert scores.step_scores == pytest.approx(expected, abs=1e-9)


def test_exact_pruning_bound_contains_the_truth():
    rng = random.Random(7)
    chain = random_chain(rng, n=2, m=5)
    backbone = HashBackbone(salt="prune")
    priors = [0.8, 0.7]
    (scores,) = score_chains([chain], backbone, config=AresConfig(mode="exact", base_priors=priors, max_masks=3))
    truth = brute_force_tau(chain, backbone, priors)
    assert max(scores.error_bounds) > 0  # the budget did bind
    for tau, bound, true in zip(scores.step_scores, scores.error_bounds, truth):
        assert abs(tau - true) <= bound + 1e-12
    assert max(scores.evaluations_per_step) <= 3


def test_prune_mass_drops_negligible_masks_within_its_bound():
    rng = random.Random(8)
    chain = random_chain(rng, n=1, m=7)
    backbone = HashBackbone(lo=0.97, hi=0.999, salt="confident")  # confident: most masks carry tiny weight
    full = score_chains([chain], backbone, config=AresConfig(mode="exact", max_masks=10_000, prune_mass=0.0))[0]
    cheap = score_chains([chain], backbone, config=AresConfig(mode="exact", max_masks=10_000, prune_mass=0.02))[0]
    assert cheap.evaluations < full.evaluations
    assert max(cheap.error_bounds) <= 0.02 + 1e-12  # at most the dropped mass
    for tau, bound, true in zip(cheap.step_scores, cheap.error_bounds, full.step_scores):
        assert abs(tau - true) <= bound + 1e-12


def test_sampling_within_eps_of_exact_for_most_seeds():
    rng = random.Random(3)
    chain = random_chain(rng, n=2, m=4)
    backbone = HashBackbone(salt="sampling")
    exact_config = AresConfig(mode="exact", prior=0.9, max_masks=10_000, prune_mass=0)
    exact = score_chains([chain], backbone, config=exact_config)[0]
    hits = 0
    for seed in range(200):
        sampled = score_chains([chain], backbone, config=AresConfig(mode="sample", prior=0.9, seed=seed))[0]
        assert sampled.num_samples == sample_size(4) and sampled.eps == 0.1 and sampled.delta == 0.1
        hits += all(abs(a - b) <= 0.1 for a, b in zip(sampled.step_scores, exact.step_scores))
    assert hits / 200 >= 0.9


def test_same_seed_same_scores_and_batch_independence():
    rng = random.Random(11)
    chains = [random_chain(rng, n=2, m=3) for _ in range(4)]
    backbone = HashBackbone()
    config = AresConfig(mode="sample", prior=0.8, seed=5)
    a = score_chains(chains, backbone, config=config)
    b = score_chains(chains, backbone, config=config)
    alone = score_chains(chains[2:3], backbone, config=config)
    assert [s.step_scores for s in a] == [s.step_scores for s in b]
    assert alone[0].step_scores == a[2].step_scores  # a chain's scores do not depend on its batch
    other = score_chains(chains, backbone, config=AresConfig(mode="sample", prior=0.8, seed=6))
    assert [s.step_scores for s in other] != [s.step_scores for s in a]


def test_evaluations_are_distinct_masks_not_trajectories():
    rng = random.Random(1)
    chain = random_chain(rng, n=1, m=3)
    backbone = HashBackbone()
    (scores,) = score_chains([chain], backbone, config=AresConfig(mode="sample"))
    # prior 1: step 1 has one mask; step k has at most 2^(k-1) distinct masks, far fewer than N trajectories.
    assert scores.evaluations_per_step[0] == 1
    assert all(e <= 2**k for k, e in enumerate(scores.evaluations_per_step))
    assert scores.evaluations == sum(scores.evaluations_per_step) == backbone.pairs


def test_one_backbone_call_per_step_wave_across_chains():
    rng = random.Random(2)
    chains = [random_chain(rng, n=2, m=rng.randint(2, 5)) for _ in range(8)]
    for mode in ("exact", "sample"):
        counting = CountingBackbone(HashBackbone())
        score_chains(chains, counting, config=AresConfig(mode=mode))
        assert len(counting.batch_sizes) == max(c.num_steps for c in chains)


def test_duplicate_chains_share_backbone_pairs():
    chain = random_chain(random.Random(4), n=1, m=3)
    backbone = HashBackbone()
    scores = score_chains([chain] * 5, backbone, config=AresConfig(mode="exact"))
    assert len({tuple(s.step_scores) for s in scores}) == 1
    assert backbone.pairs == scores[0].evaluations  # texts asked once, though each chain reports its own count


def test_auto_mode_samples_from_the_start_when_its_tail_would_be_large():
    rng = random.Random(5)
    chain = random_chain(rng, n=0, m=8)
    backbone = HashBackbone(lo=0.3, hi=0.7)  # uncertain: masks double every step, most of the mass is dropped
    (auto,) = score_chains([chain], backbone, config=AresConfig(mode="auto", max_masks=4))
    assert auto.mode == "sample" and auto.num_samples == sample_size(8)
    (confident,) = score_chains([chain], FunctionBackbone(lambda p, h: [1.0] * len(h)), config=AresConfig())
    assert confident.mode == "exact" and confident.step_scores == [1.0] * 8 and confident.evaluations == 8
    # a tail larger than max_samples goes to sample mode, whose bound names the fix
    with pytest.raises(ValueError, match=r"auto mode fell back to sampling.*max_samples=20"):
        score_chains([chain], backbone, config=AresConfig(mode="auto", max_masks=4, max_samples=20))


def test_auto_mode_samples_only_the_masks_it_dropped():
    """A chain whose masks outgrow max_masks: auto mode keeps the heaviest exactly and samples the dropped ones (the
    tail), with fewer trajectories and backbone pairs than sample mode, and its certificate holds."""
    rng = random.Random(3)
    chain = random_chain(rng, n=0, m=8)
    backbone = HashBackbone(lo=0.02, hi=0.3, salt="tail")  # mostly rejected steps: the light masks are a small tail
    truth = brute_force_tau(chain, backbone, [])
    (tail,) = score_chains([chain], backbone, config=AresConfig(max_masks=4))
    (full,) = score_chains([chain], HashBackbone(lo=0.02, hi=0.3, salt="tail"), config=AresConfig(mode="sample"))
    assert tail.mode == "stratified" and tail.eps == 0.1 and tail.delta == 0.1
    assert 1 <= tail.num_samples < full.num_samples == sample_size(8)
    assert tail.evaluations < full.evaluations
    assert len(tail.error_bounds) == 8 and max(tail.error_bounds) <= 0.1 + 1e-12
    assert all(abs(t - true) <= b + 1e-12 for t, true, b in zip(tail.step_scores, truth, tail.error_bounds))
    # seeded by the chain's text: the same alone or in a batch
    batch = score_chains([random_chain(rng, n=0, m=5), chain], backbone, config=AresConfig(max_masks=4))
    assert batch[1].step_scores == tail.step_scores
    (again,) = score_chains([chain], backbone, config=AresConfig(max_masks=4))
    assert again.step_scores == tail.step_scores and again.evaluations_per_step == tail.evaluations_per_step
    # exact mode never samples: the same masks dropped give a hard bound, whatever it costs the certificate
    (exact,) = score_chains([chain], backbone, config=AresConfig(mode="exact", max_masks=4))
    assert exact.mode == "exact" and exact.num_samples is None and exact.eps is None
    assert max(exact.error_bounds) > 0.1
    assert AresConfig().prune_budget == 0.2 and AresConfig(mode="exact").prune_budget == 0.1
    assert AresConfig(prune_mass=0.5).prune_budget == 0.2  # never more than 2 eps in auto mode


@pytest.mark.parametrize(
    "kwargs, word",
    [
        ({"eps": 0.0}, "eps"),
        ({"eps": 1.5}, "eps"),
        ({"delta": -0.1}, "delta"),
        ({"prior": 1.2}, "prior"),
        ({"prior": [0.5, float("nan")]}, "prior"),
        ({"mode": "fast"}, "mode"),
        ({"max_masks": 0}, "max_masks"),
        ({"prune_mass": 1.0}, "prune_mass"),
    ],
)
def test_config_errors_name_the_parameter(kwargs, word):
    with pytest.raises(ValueError, match=word):
        AresConfig(**kwargs)


def test_base_priors_length_must_match_base_claims():
    chain = Chain(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="base_priors"):
        score_chains([chain], HashBackbone(), config=AresConfig(base_priors=[0.9, 0.9, 0.9]))


def test_per_claim_priors_go_in_base_priors():
    with pytest.raises(ValueError, match=r"prior=\[0.9, 0.9\].*base_priors"):
        AresConfig(prior=[0.9, 0.9])
    chain = Chain(["a", "b"], ["c"])
    same = score_chains([chain], HashBackbone(), config=AresConfig(base_priors=[0.9, 0.9]))[0].step_scores
    assert same == score_chains([chain], HashBackbone(), config=AresConfig(prior=0.9))[0].step_scores


@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda p, h: [float("nan")] * len(h), "NaN"),
        (lambda p, h: [1.5] * len(h), "outside"),
        (lambda p, h: [0.5] * (len(h) + 1), "values for"),
        (lambda p, h: ["x"] * len(h), "non-numeric"),
    ],
)
def test_bad_backbone_output_is_a_clear_error(fn, match):
    with pytest.raises((ValueError, TypeError), match=match):
        score_chains([Chain(["a"], ["b", "c"])], FunctionBackbone(fn))


def test_bad_chains_are_clear_errors():
    with pytest.raises(ValueError, match="steps"):
        Chain(["a"], [])
    with pytest.raises(ValueError, match="steps"):
        Chain([], [])
    with pytest.raises(TypeError, match="single string"):
        Chain("a", ["b"])
    with pytest.raises(TypeError, match="list"):
        score_chains(Chain(["a"], ["b"]), HashBackbone())
    with pytest.raises(TypeError, match="Chain"):
        score_chains([("a", "b")], HashBackbone())
    with pytest.raises(ValueError, match="method"):
        score_chains([Chain(["a"], ["b"])], HashBackbone(), method="nope")
    with pytest.raises(TypeError, match="entailment_probs"):
        score_chains([Chain(["a"], ["b"])], object())
    assert score_chains([], HashBackbone()) == []


def test_long_chains_beyond_64_claims():
    chain = Chain([f"b{i}" for i in range(40)], [f"s{k}" for k in range(40)])
    (scores,) = score_chains([chain], FunctionBackbone(lambda p, h: [0.5] * len(h)), config=AresConfig(mode="sample"))
    assert len(scores.step_scores) == 40 and scores.mode == "sample"
    assert all(abs(s - 0.5) < 1e-12 for s in scores.step_scores)


def test_num_base_reaches_backbones_that_take_it():
    chain = Chain(["b0", "b1", "b2"], ["s0", "s1", "s2"])
    seen = []

    class RoleAware:
        def entailment_probs(self, premises, hypotheses, num_base=None):
            seen.extend(zip(premises, num_base))
            return [0.5] * len(hypotheses)

    score_chains([chain], RoleAware(), config=AresConfig(mode="exact", prior=0.7, max_masks=10_000, prune_mass=0.0))
    score_chains([chain], RoleAware(), method="receval-inter")
    assert len(seen) > 20
    for premises, n_base in seen:
        assert n_base == sum(p.startswith("b") for p in premises)
        assert all(p.startswith("b") for p in premises[:n_base])
