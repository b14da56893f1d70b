"""ARES vs Entail-Prev on ClaimTrees with the rule oracle: the propagation property the paper is about."""

from __future__ import annotations

import pytest
from sklearn.metrics import f1_score

from ares_rerank import AresConfig, ClaimTreesOracle, sample_size, score_chains
from ares_rerank.data import load_claimtrees
from helpers import CountingBackbone


def macro_f1(chains, scores, threshold=0.5):
    gold = [label for chain in chains for label in chain.labels]
    pred = [int(flag) for s in scores for flag in s.flags(threshold)]
    return f1_score(gold, pred, average="macro", zero_division=0)


@pytest.mark.parametrize("length", [5, 10, 20, 30, 50])
def test_ares_flags_exactly_the_unsound_steps(length):
    chains = load_claimtrees(40, length=length)
    backbone = CountingBackbone(ClaimTreesOracle())
    ares = score_chains(chains, backbone, config=AresConfig(prior=1.0))
    assert macro_f1(chains, ares) == 1.0
    for chain, scores in zip(chains, ares):
        assert scores.mode == "exact" and scores.error_bounds == [0.0] * chain.num_steps
        assert scores.evaluations == chain.num_steps  # one distinct mask per step
        assert [int(s <= 0.5) for s in scores.step_scores] == list(chain.labels)
    assert len(backbone.batch_sizes) == length - 1  # one call per step wave for all 40 chains

    prev = score_chains(chains, ClaimTreesOracle(), method="entail-prev")
    f1_prev = macro_f1(chains, prev)
    print(f"ClaimTrees-{length}: ARES macro-F1 1.000, Entail-Prev {f1_prev:.3f}")
    assert f1_prev < 0.8  # misses errors that propagate: later steps are entailed by the unsound step before them


def test_sampling_mode_with_lower_prior_matches_closed_form():
    chains = load_claimtrees(10, length=10)
    ares = score_chains(chains, ClaimTreesOracle(), config=AresConfig(prior=0.95, mode="sample", seed=1))
    for chain, scores in zip(chains, ares):
        assert scores.num_samples == sample_size(chain.num_steps) == 260
        for k, (tau, label) in enumerate(zip(scores.step_scores, chain.labels)):
            if label:
                assert tau == 0.0  # a step downstream of the deleted claim is never entailed
            else:
                # sound step k needs the fact and rules 0..k accepted: true tau = 0.95^(k+2); the guarantee is eps.
                assert abs(tau - 0.95 ** (k + 2)) <= 0.1
