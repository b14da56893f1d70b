from __future__ import annotations

import pytest

from ares_rerank import Chain, FunctionBackbone, score_chains
from helpers import CountingBackbone


def containment(premises, hypotheses):
    """Entailed iff the hypothesis' first word appears in some premise (a transparent toy backbone)."""
    return [float(any(h.split()[0] in p for p in ps)) for ps, h in zip(premises, hypotheses)]


CHAIN = Chain(["x y", "z"], ["y w", "w v", "v x"])


def run(method):
    backbone = CountingBackbone(FunctionBackbone(containment))
    (scores,) = score_chains([CHAIN, CHAIN], backbone, method=method)[:1]
    return scores, backbone


def test_entail_prev_sees_every_earlier_claim():
    scores, backbone = run("entail-prev")
    assert scores.step_scores == [1.0, 1.0, 1.0]
    assert scores.evaluations == 3 and len(backbone.batch_sizes) == 1 and backbone.batch_sizes[0] == 3


def test_entail_base_sees_base_claims_only():
    scores, _ = run("entail-base")
    assert scores.step_scores == [1.0, 0.0, 0.0]  # "v" is only concluded by a step


def test_roscoe_li_self_min_over_earlier_steps():
    scores, _ = run("roscoe-li-self")
    # step 1: nothing earlier -> 1; step 2 'w' in step 1; step 3: 'v' missing from step 1 -> min 0.
    assert scores.step_scores == [1.0, 1.0, 0.0]
    assert scores.evaluations_per_step == [0, 1, 2]


def test_roscoe_li_source_min_over_base_claims():
    scores, _ = run("roscoe-li-source")
    assert scores.step_scores == [0.0, 0.0, 0.0]  # 'z' entails nothing


def test_receval_inter_min_over_all_earlier_claims():
    scores, _ = run("receval-inter")
    assert scores.step_scores == [0.0, 0.0, 0.0]
    assert scores.evaluations_per_step == [2, 3, 4]


def test_baselines_are_direct_and_batched_in_one_call():
    backbone = CountingBackbone(FunctionBackbone(containment))
    out = score_chains([CHAIN, Chain(["q"], ["q r"])], backbone, method="receval-inter")
    assert len(backbone.batch_sizes) == 1
    assert all(s.mode == "direct" and s.eps is None for s in out)


def test_whole_chain_baselines_need_a_chain_backbone():
    with pytest.raises(TypeError, match="chain_step_probs"):
        score_chains([CHAIN], FunctionBackbone(containment), method="prm-chain")

    class WholeChain:
        def entailment_probs(self, premises, hypotheses):
            return [0.5] * len(hypotheses)

        def chain_step_probs(self, base_claims, steps):
            return [0.9] * len(steps)

    (scores,) = score_chains([CHAIN], WholeChain(), method="llm-judge")
    assert scores.step_scores == [0.9, 0.9, 0.9] and scores.evaluations == 1

    class Short(WholeChain):
        def chain_step_probs(self, base_claims, steps):
            return [0.9]

    with pytest.raises(ValueError, match="returned 1 values for 3 hypotheses"):
        score_chains([CHAIN], Short(), method="prm-chain")
