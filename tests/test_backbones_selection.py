"""Premise selection: deterministic, order-keeping, safe for ARES (no model needed)."""

from __future__ import annotations

import pytest

from ares_rerank import AresConfig, FunctionBackbone, SelectingBackbone, score_chains
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.backbones.selection import (
    AllPremises,
    FitPremises,
    RelevantPremises,
    fit_indices,
    get_selector,
    relevance_scores,
)
from ares_rerank.data.claimtrees import load_claimtrees


RULE = "Rule: {p} -> {q} (meaning that if I have {p}, I can derive {q})"
STEP = "I have {p}, I use rule ({p} -> {q}) to derive {q}, now I have {q}"


def test_relevant_keeps_claims_sharing_a_symbol_in_original_order():
    claims = [RULE.format(p="XY", q="ZZ"), RULE.format(p="AB", q="CD"), "I have AB", RULE.format(p="CD", q="EF"),
              RULE.format(p="Q1", q="Q2")]
    kept = RelevantPremises()(claims, STEP.format(p="AB", q="CD"))
    assert kept == [1, 2, 3]  # the rule, the fact, the next rule; template words ("rule", "have") do not count
    assert RelevantPremises(top_k=1)(claims, STEP.format(p="AB", q="CD")) == [1]  # both symbols beat one


def test_symbol_that_looks_like_a_stop_word_still_counts():
    claims = [RULE.format(p="ON", q="L7"), RULE.format(p="K2", q="ON"), RULE.format(p="A1", q="B1"), "I have K2"]
    assert RelevantPremises()(claims, STEP.format(p="ON", q="L7")) == [0, 1]


def test_words_count_when_the_hypothesis_has_no_symbol():
    claims = ["We have carrot.", "We have onion.", "We now START.", "Slice the onion thinly."]
    assert RelevantPremises()(claims, "Fry the onion in butter.") == [1, 3]
    assert relevance_scores(claims, "Fry the onion in butter.")[0] == 0.0


def test_selection_is_deterministic_and_empty_premises_are_fine():
    claims = [RULE.format(p=f"S{i}", q=f"S{i + 1}") for i in range(12)]
    hyp = STEP.format(p="S4", q="S5")
    assert RelevantPremises()(claims, hyp) == RelevantPremises()(list(claims), hyp)
    assert RelevantPremises()([], hyp) == [] and AllPremises()([], hyp) == []


def test_fit_keeps_most_relevant_within_budget_in_original_order():
    claims = ["filler one", "x = 3", "filler two", "y = x + 1"]
    hyp = "so y = 3 + 1"  # shares y, 3, 1 with claim 3 and 3 with claim 1
    assert fit_indices(claims, hyp, [2, 3, 2, 5], budget=8) == [1, 3]
    assert fit_indices(claims, hyp, [2, 3, 2, 5], budget=7) == [0, 3]  # claim 1 no longer fits; a filler does
    assert fit_indices(claims, hyp, [2, 3, 2, 5], budget=100) == [0, 1, 2, 3]
    assert FitPremises(max_tokens=5)(claims, hyp) == [3]  # whitespace words: "y = x + 1" is 5
    with pytest.raises(ValueError, match="lengths"):
        fit_indices(claims, hyp, [1, 2], budget=3)


@pytest.mark.parametrize("length", [10, 20, 50])
def test_relevant_selection_never_changes_ares_on_claimtrees(length):
    """Selection is a fixed function of (claims, hypothesis): with the rule oracle, ARES scores are unchanged."""
    chains = load_claimtrees(6, length=length)
    oracle = ClaimTreesOracle()
    plain = score_chains(chains, oracle, config=AresConfig(mode="exact"))
    for spec in ("relevant", "relevant:4"):
        selected = score_chains(chains, SelectingBackbone(oracle, spec), config=AresConfig(mode="exact"))
        assert [s.step_scores for s in selected] == [s.step_scores for s in plain]


def test_selecting_backbone_passes_only_selected_claims_and_forwards_attributes():
    seen = []

    def record(premises, hypotheses):
        seen.extend(premises)
        return [0.5] * len(hypotheses)

    inner = FunctionBackbone(record)
    inner.chain_step_probs = lambda base, steps: [0.25] * len(steps)
    wrapped = SelectingBackbone(inner, "relevant")
    assert wrapped.entailment_probs([["x = 3", "the sky is blue", "y = 2"]], ["x + 1 = 4"]) == [0.5]
    assert seen == [["x = 3"]]
    assert wrapped.chain_step_probs(["b"], ["s1", "s2"]) == [0.25, 0.25]


def test_selector_specs_and_errors():
    assert isinstance(get_selector("all"), AllPremises)
    assert get_selector("relevant:3").top_k == 3
    custom = lambda claims, hypothesis: [0]  # noqa: E731
    assert get_selector(custom) is custom
    with pytest.raises(ValueError, match="FitPremises"):
        get_selector("fit")
    with pytest.raises(ValueError, match="premise_selection='closest'"):
        get_selector("closest")
    with pytest.raises(ValueError, match="top_k"):
        RelevantPremises(top_k=0)
    bad = SelectingBackbone(FunctionBackbone(lambda P, H: [0.5] * len(H)), lambda claims, hypothesis: [1, 0])
    with pytest.raises(ValueError, match="ascending"):
        bad.entailment_probs([["a", "b"]], ["c"])
    with pytest.raises(TypeError, match="entailment_probs"):
        SelectingBackbone(object())
