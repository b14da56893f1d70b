"""What the estimator does with a backbone's premise selection: plans, projection, merging, budgeted pruning, and
the coverage of every mode (at least 500 seeded runs each, share of runs with every step within eps)."""

from __future__ import annotations

import random

import pytest

from ares_rerank import AresConfig, Chain, FunctionBackbone, sample_size, score_chains
from ares_rerank.backbones.selection import RelevantPremises, SelectingBackbone, relevance_scores
from ares_rerank.data.claimtrees import load_claimtrees
from helpers import HashBackbone, brute_force_tau


SYMBOLS = ["A1", "B2", "C3", "D4", "E5", "x", "y", "42"]


def symbol_chain(rng: random.Random, n: int, m: int) -> Chain:
    """Claims that share a few symbols, so ``relevant`` selection keeps some claims and drops others."""
    def claim(tag: str) -> str:
        return f"{tag} " + " ".join(rng.sample(SYMBOLS, rng.randint(1, 3)))

    return Chain([claim(f"base{i}") for i in range(n)], [claim(f"step{k}") for k in range(m)])


class Recording:
    """A backbone that remembers every (premises, hypothesis) it was asked."""

    def __init__(self, inner) -> None:
        self.inner, self.asked = inner, []

    def entailment_probs(self, premises, hypotheses):
        self.asked.extend((tuple(p), h) for p, h in zip(premises, hypotheses))
        return self.inner.entailment_probs(premises, hypotheses)


@pytest.mark.parametrize("top_k", [None, 1, 2, 4])
def test_plan_selects_what_the_selector_selects_on_every_subset(top_k):
    rng = random.Random(top_k or 0)
    selector = RelevantPremises(top_k=top_k)
    for _ in range(300):
        claims = [" ".join(rng.sample(SYMBOLS, rng.randint(1, 4))) + f" w{rng.randint(0, 3)}" for _ in range(12)]
        hypothesis = " ".join(rng.sample(SYMBOLS, 2))
        plan = selector.plan(claims, hypothesis)
        subset = sorted(rng.sample(range(len(claims)), rng.randint(0, len(claims))))
        direct = [subset[i] for i in selector([claims[i] for i in subset], hypothesis)]
        present = [i for i in subset if i in plan.support]
        assert plan.select(present, len(subset)) == direct
        assert set(direct) <= set(plan.support)
    assert relevance_scores(["A1 B2", "y"], "A1") == pytest.approx([pytest.approx(1.0986, abs=1e-4), 0.0])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("spec", ["relevant", "relevant:2"])
def test_projected_exact_mode_equals_brute_force(seed, spec):
    rng = random.Random(seed)
    chain = symbol_chain(rng, n=rng.randint(1, 3), m=rng.randint(2, 5))
    priors = [rng.choice([1.0, 0.9, 0.6]) for _ in range(chain.num_base)]
    backbone = SelectingBackbone(HashBackbone(salt=str(seed)), spec)
    config = AresConfig(mode="exact", base_priors=priors, prune_mass=0.0, max_masks=10_000)
    (scores,) = score_chains([chain], backbone, config=config)
    assert scores.mode == "exact" and scores.error_bounds == [0.0] * chain.num_steps
    assert scores.step_scores == pytest.approx(brute_force_tau(chain, backbone, priors), abs=1e-9)


def test_projection_asks_each_selected_premise_set_once():
    """Masks that select the same premises reach the backbone once; without a plan each mask is its own input."""
    chains = load_claimtrees(5, length=20)
    uncertain = FunctionBackbone(lambda p, h: [0.9 if len(ps) > 1 else 0.2 for ps in p])
    config = AresConfig(prior=0.95, mode="sample")
    projected = score_chains(chains, SelectingBackbone(uncertain, "relevant"), config=config)
    plain = score_chains(chains, Recording(SelectingBackbone(uncertain, "relevant")), config=config)
    assert [s.step_scores for s in projected] == [s.step_scores for s in plain]  # same values, same draws
    for chain in chains:  # (two chains may share a pair in different waves: a model backbone's cache takes those)
        inner = Recording(uncertain)
        score_chains([chain], SelectingBackbone(inner, "relevant"), config=config)
        assert len(inner.asked) == len(set(inner.asked))  # no selected input asked twice
    assert sum(s.evaluations for s in projected) < sum(s.evaluations for s in plain) / 5


def test_exact_mode_merges_masks_with_the_same_future():
    """Prior 1, an uncertain backbone and 30-state chains: without merging exact mode needs 2^k masks and auto mode
    samples; with the plan it stays exact with a bound within eps."""
    chains = load_claimtrees(3, length=30)
    backbone = SelectingBackbone(FunctionBackbone(lambda p, h: [0.8 if len(ps) >= 2 else 0.3 for ps in p]), "relevant")
    out = score_chains(chains, backbone, config=AresConfig(max_masks=256, prune_mass=0.0))
    assert all(s.mode == "exact" and max(s.error_bounds) == 0.0 for s in out)
    unplanned = score_chains(chains, FunctionBackbone(backbone.entailment_probs), config=AresConfig(max_masks=256))
    assert all(s.mode != "exact" for s in unplanned)  # sampled: the tail of what the masks could not hold


def test_budgeted_pruning_spends_at_most_the_budget_and_bounds_the_truth():
    rng = random.Random(5)
    for trial in range(40):
        chain = symbol_chain(rng, n=2, m=5)
        backbone = SelectingBackbone(HashBackbone(lo=0.6, hi=0.99, salt=str(trial)), "relevant")
        truth = brute_force_tau(chain, backbone, [0.9, 0.9])
        full = score_chains([chain], backbone, config=AresConfig(mode="exact", prior=0.9, prune_mass=0.0))[0]
        (cheap,) = score_chains([chain], backbone, config=AresConfig(mode="exact", prior=0.9, eps=0.1))
        assert cheap.evaluations <= full.evaluations
        assert max(cheap.error_bounds) <= 0.1 + 1e-12  # default budget eps: the bound ends at eps
        for tau, bound, true in zip(cheap.step_scores, cheap.error_bounds, truth):
            assert abs(tau - true) <= bound + 1e-12


def test_a_budget_up_to_twice_eps_keeps_the_bound_at_eps_and_contains_the_truth():
    rng = random.Random(11)
    bound_seen = 0.0
    for trial in range(40):
        chain = symbol_chain(rng, n=2, m=5)
        backbone = SelectingBackbone(HashBackbone(lo=0.6, hi=0.99, salt=f"twice{trial}"), "relevant")
        truth = brute_force_tau(chain, backbone, [0.9, 0.9])
        (cheap,) = score_chains([chain], backbone, config=AresConfig(mode="exact", prior=0.9, eps=0.1, prune_mass=0.2))
        assert max(cheap.error_bounds) <= 0.1 + 1e-12  # D <= 2 eps, the point pulled toward the midpoint as needed
        bound_seen = max(bound_seen, max(cheap.error_bounds))
        for tau, bound, true in zip(cheap.step_scores, cheap.error_bounds, truth):
            assert abs(tau - true) <= bound + 1e-12
    assert bound_seen > 0.05  # the budget did bind


def test_pruning_saves_backbone_calls_on_claimtrees():
    chains = load_claimtrees(10, length=10)
    backbone = SelectingBackbone(FunctionBackbone(lambda p, h: [0.93 if len(ps) >= 2 else 0.05 for ps in p]),
                                 "relevant")
    full = score_chains(chains, backbone, config=AresConfig(prune_mass=0.0))
    cheap = score_chains(chains, backbone, config=AresConfig())
    assert sum(s.evaluations for s in cheap) < sum(s.evaluations for s in full)
    for a, b in zip(cheap, full):
        assert all(abs(x - y) <= bound + 1e-12 for x, y, bound in zip(a.step_scores, b.step_scores, a.error_bounds))


# -- coverage: at least 500 seeded runs of every mode, every step within eps in >= 1 - delta of them ------------------
@pytest.fixture(scope="module")
def coverage_cases():
    """504 seeded (chain, backbone, exact tau) cases: random claims and an uncertain backbone behind `relevant`."""
    rng = random.Random(2025)
    cases = []
    for i in range(504):
        chain = symbol_chain(rng, n=2, m=4)
        backbone = SelectingBackbone(HashBackbone(lo=0.1, hi=0.95, salt=f"cov{i}"), "relevant")
        cases.append((chain, backbone, brute_force_tau(chain, backbone, [0.8, 0.8])))
    return cases


@pytest.mark.parametrize("mode", ["sample", "auto", "exact"])
def test_coverage_of_every_mode(mode, coverage_cases):
    eps, delta = 0.1, 0.1
    within, modes = 0, set()
    for seed, (chain, backbone, truth) in enumerate(coverage_cases):
        # odd seeds of auto get a mask budget too small for exact mode, so its sampled tail is covered too
        config = AresConfig(mode=mode, prior=0.8, eps=eps, delta=delta, seed=seed,
                            max_masks=2 if mode == "auto" and seed % 2 else 64)
        (scores,) = score_chains([chain], backbone, config=config)
        modes.add(scores.mode)
        ok = all(abs(t - true) <= eps for t, true in zip(scores.step_scores, truth))
        if scores.mode == "exact":
            assert ok and all(abs(t - true) <= b + 1e-12 for t, true, b in zip(scores.step_scores, truth,
                                                                                 scores.error_bounds))
        within += ok
    share = within / len(coverage_cases)
    print(f"coverage {mode} ({sorted(modes)}): {within}/{len(coverage_cases)} runs with every step within eps = "
          f"{share:.3f} (need >= {1 - delta})")
    assert len(coverage_cases) >= 500 and share >= 1 - delta
    assert modes == ({"exact", "stratified", "sample"} if mode == "auto" else {mode})


def test_coverage_of_auto_modes_sampled_tail(coverage_cases):
    """Auto mode's exact pass with a sampled tail ("stratified"): >= 500 seeded runs, each step within eps and within
    its reported bound in >= 1 - delta of them (the bounds hold with probability >= 1 - delta, not surely)."""
    eps, delta = 0.1, 0.1
    runs = within = bounded = 0
    for seed, (chain, backbone, truth) in enumerate(coverage_cases):
        for max_masks in (2, 3, 4):  # too few masks for the exact pass alone: what it drops is sampled
            config = AresConfig(prior=0.8, eps=eps, delta=delta, seed=seed, max_masks=max_masks)
            (scores,) = score_chains([chain], backbone, config=config)
            if scores.mode != "stratified":
                continue
            assert scores.eps == eps and scores.delta == delta and 1 <= scores.num_samples <= sample_size(4) / 4
            assert max(scores.error_bounds) <= eps + 1e-12
            runs += 1
            within += all(abs(t - true) <= eps for t, true in zip(scores.step_scores, truth))
            bounded += all(abs(t - true) <= b + 1e-12 for t, true, b in zip(scores.step_scores, truth,
                                                                            scores.error_bounds))
    print(f"coverage auto, sampled tail: {within}/{runs} runs with every step within eps = {within / runs:.3f}, "
          f"{bounded}/{runs} within their bounds = {bounded / runs:.3f} (need >= {1 - delta})")
    assert runs >= 500 and within / runs >= 1 - delta and bounded / runs >= 1 - delta
