"""Exact mode says when its hard bound is looser than eps (max_masks dropped more than 2*eps of mass on a step)."""

from __future__ import annotations

import warnings

import pytest

from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.data import load_claimtrees
from ares_rerank.estimator.batch import ares_scores
from ares_rerank.estimator.config import AresConfig


def test_exact_mode_warns_when_a_bound_exceeds_eps_naming_the_count_and_the_largest():
    chains = load_claimtrees(2, 50)
    with pytest.warns(RuntimeWarning, match=r"mode='exact': a step's hard error bound exceeds eps=0\.1 in 2 of 2 "
                                            r"chains \(largest 0\.4\d\d"):
        results = ares_scores(chains, ClaimTreesOracle(), AresConfig(mode="exact", prior=0.95))
    assert max(max(r.error_bounds) for r in results) > 0.1  # the warning tells the truth of the certificate


@pytest.mark.parametrize("config", [AresConfig(mode="exact"), AresConfig(mode="exact", prior=0.95, max_masks=4096),
                                    AresConfig(mode="auto", prior=0.95)])
def test_no_warning_while_every_bound_is_within_eps(config):
    chains = load_claimtrees(2, 10) if config.max_masks else load_claimtrees(2, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        results = ares_scores(chains, ClaimTreesOracle(), config)
    if config.mode == "exact":
        assert all(max(r.error_bounds) <= config.eps for r in results)
