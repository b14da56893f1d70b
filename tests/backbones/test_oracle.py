"""ClaimTreesOracle: a deterministic rule oracle, the ground truth that the estimator tests rely on."""

from __future__ import annotations

import pytest

from ares_rerank.backbones.base import Backbone, call_backbone
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.data.claimtrees import (
    ClaimTreesTemplates,
    claimtrees_insertion,
    claimtrees_multi_source,
    claimtrees_vanilla,
    load_claimtrees,
)


def entail_prev(oracle, chain, base=None):
    """Score each step against all base claims and all earlier steps (Entail-Prev)."""
    base = list(chain.base_claims if base is None else base)
    premises = [base + list(chain.steps[:k]) for k in range(chain.num_steps)]
    return oracle.entailment_probs(premises, list(chain.steps))


def propagate(oracle, chain):
    """ARES with p = 1 and a 0/1 backbone: keep a step as a premise only if it was entailed."""
    kept, scores = list(chain.base_claims), []
    for claim in chain.steps:
        (q,) = oracle.entailment_probs([kept], [claim])
        scores.append(q)
        if q == 1.0:
            kept.append(claim)
    return scores


def test_implements_the_backbone_protocol():
    oracle = ClaimTreesOracle()
    assert isinstance(oracle, Backbone)
    chain = claimtrees_vanilla(0)
    values = call_backbone(oracle, [list(chain.base_claims)], [chain.steps[0]])
    assert values.tolist() == [1.0]


@pytest.mark.parametrize("length", [5, 10, 30])
def test_full_sound_chains_score_one_everywhere(length):
    oracle = ClaimTreesOracle()
    for chain in load_claimtrees(20, length):
        restored = list(chain.base_claims) + [chain.meta["deleted_claim"]]
        assert entail_prev(oracle, chain, base=restored) == [1.0] * chain.num_steps
    for idx in range(10):
        valid_only = claimtrees_insertion(idx, valid=length, inserted=0)
        assert entail_prev(oracle, valid_only) == [1.0] * valid_only.num_steps


def test_deleted_rule_chains():
    oracle = ClaimTreesOracle()
    for chain in load_claimtrees(40, 10):
        deleted = chain.meta["deleted_index"]
        # With every earlier step as a premise only the step that needs the missing claim fails (fact: step 0).
        first_failure = 0 if deleted == 9 else deleted
        expected = [0.0 if k == first_failure else 1.0 for k in range(9)]
        assert entail_prev(oracle, chain) == expected
        # Dropping unentailed steps from the premises recovers the (fixed) labels exactly.
        assert [1 - int(q) for q in propagate(oracle, chain)] == list(chain.labels)


def test_propagation_recovers_labels_of_every_variant():
    oracle = ClaimTreesOracle()
    for idx in range(30):
        for chain in (claimtrees_multi_source(idx, 3, 5), claimtrees_insertion(idx, 5, 3)):
            assert [1 - int(q) for q in propagate(oracle, chain)] == list(chain.labels), chain.id


def test_masks():
    oracle = ClaimTreesOracle()
    chain = claimtrees_vanilla(0)  # rule AZ -> SG deleted; steps 0..5 sound
    base, steps = list(chain.base_claims), list(chain.steps)
    assert oracle.entailment_probs([base + steps[:3]], [steps[3]]) == [1.0]
    assert oracle.entailment_probs([base + steps[:2]], [steps[3]]) == [0.0]  # excluded the step concluding P
    assert oracle.entailment_probs([base + steps[:4], base + steps[:5]], [steps[5], steps[5]]) == [0.0, 1.0]
    no_rule = [c for c in base if c != "Rule: VD -> H3 (meaning that if I have VD, I can derive H3)"]
    assert oracle.entailment_probs([no_rule + steps[:4]], [steps[4]]) == [0.0]  # P held but the rule is masked
    assert oracle.entailment_probs([["I have D8"]], [steps[0]]) == [0.0]  # fact without the rule
    assert oracle.entailment_probs([[]], [steps[0]]) == [0.0]
    # a batch mixes masks; order and length are preserved
    batch = oracle.entailment_probs([base, base + steps[:1], base[:0]], [steps[0], steps[1], steps[1]])
    assert batch == [1.0, 1.0, 0.0]


def test_reworded_templates_parse():
    templates = ClaimTreesTemplates(
        rule="Known: from {p} one gets {q}.", fact="{p} is given.", step="Since {p} is known and {p} gives {q}, {q}."
    )
    chain = claimtrees_vanilla(3, 10, templates=templates)
    oracle = ClaimTreesOracle(templates)
    assert [1 - int(q) for q in propagate(oracle, chain)] == list(chain.labels)
    with pytest.raises(ValueError, match="cannot parse hypothesis"):
        ClaimTreesOracle().entailment_probs([[]], [chain.steps[0]])


def test_unparsable_or_inconsistent_hypotheses():
    oracle = ClaimTreesOracle()
    with pytest.raises(ValueError, match="cannot parse hypothesis 'The answer is 4'"):
        oracle.entailment_probs([[]], ["The answer is 4"])
    with pytest.raises(ValueError, match="2 premise lists for 1 hypotheses"):
        oracle.entailment_probs([[], []], ["I have A, I use rule (A -> B) to derive B, now I have B"])
    rule = "Rule: B -> C (meaning that if I have B, I can derive C)"
    mismatched = "I have A, I use rule (B -> C) to derive C, now I have C"  # holds A but applies B's rule
    assert oracle.entailment_probs([["I have A", "I have B", rule]], [mismatched]) == [0.0]
    with pytest.raises(TypeError, match="ClaimTreesTemplates"):
        ClaimTreesOracle(templates="I have {p}")


def test_name_pattern_lets_names_have_spaces():
    from dataclasses import replace

    from ares_rerank.training.names import rename_states

    templates = ClaimTreesTemplates(rule="{p} implies {q}.", fact="{p} is true.", step="{p}, so {q}.")
    plain = claimtrees_vanilla(2, 6, templates=templates)
    chain = rename_states(plain, [f"Old Mill {n}" for n in plain.meta["names"]])
    assert "Old Mill" in chain.steps[0]
    with pytest.raises(ValueError, match="cannot parse"):
        ClaimTreesOracle(templates).entailment_probs([[]], [chain.steps[0]])
    oracle = ClaimTreesOracle(replace(templates, name_pattern=r"[A-Za-z0-9_]+(?: [A-Z][A-Za-z0-9_]*)*"))
    assert [1 - int(q) for q in propagate(oracle, chain)] == list(chain.labels)
    with pytest.raises(ValueError, match="not a regex"):
        ClaimTreesTemplates(name_pattern="(")


@pytest.fixture(scope="module")
def recipe_graphs():
    from helpers import shared_data

    shared_data("recipe_graphs")
    from ares_rerank.data.recipes import load_recipe_graphs

    return dict(load_recipe_graphs())


def test_recipe_oracle_reproduces_the_spec_labels_on_sound_prefixes(recipe_graphs):
    from ares_rerank.backbones.oracle import RecipeOracle
    from ares_rerank.data import load_recipes

    everything = RecipeOracle(list(recipe_graphs.values()))
    for chain in load_recipes(100):
        own = RecipeOracle(recipe_graphs[chain.meta["recipe"]])
        assert [1 - int(q) for q in propagate(own, chain)] == list(chain.labels)
        assert [1 - int(q) for q in propagate(everything, chain)] == list(chain.labels)


def test_recipe_oracle_needs_rule_predecessors_and_ingredients(recipe_graphs):
    from ares_rerank.backbones.oracle import RecipeOracle
    from ares_rerank.data.recipes import START_CLAIM, ingredient_claim, recipe_steps

    graph = recipe_graphs["blenderbananapancakes"]
    oracle, steps = RecipeOracle(graph), recipe_steps(graph)
    first = next(s for s in steps if s.ingredients)
    later = next(s for s in steps if s.predecessors and "START" not in s.predecessors)
    done = {s.text: s.claim for s in steps}
    need_first = [first.rule, START_CLAIM] + [ingredient_claim(x) for x in first.ingredients]
    assert oracle.entailment_probs([need_first], [first.claim]) == [1.0]
    for missing in need_first:  # every needed claim matters
        assert oracle.entailment_probs([[c for c in need_first if c != missing]], [first.claim]) == [0.0]
    need_later = [later.rule] + [done[p] for p in later.predecessors] + [ingredient_claim(x) for x in later.ingredients]
    assert oracle.entailment_probs([need_later + ["We have nothing else."]], [later.claim]) == [1.0]
    assert oracle.entailment_probs([need_later[1:]], [later.claim]) == [0.0]  # rule missing
    assert oracle.entailment_probs([[later.rule]], [later.claim]) == [0.0]
    with pytest.raises(ValueError, match="no step claim"):
        oracle.entailment_probs([[]], ["We can now do the step Fly."])
    with pytest.raises(TypeError, match="recipe graph"):
        RecipeOracle("blenderbananapancakes")
