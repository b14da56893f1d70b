"""ClaimTrees generator: the spec's golden vectors, the label-flaw switch, the variants and the fold fingerprints."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ares_rerank.data.claimtrees import (
    ClaimTreesTemplates,
    claimtrees_example,
    claimtrees_insertion,
    claimtrees_multi_source,
    claimtrees_names,
    claimtrees_vanilla,
    load_claimtrees,
)


RULE = "Rule: {} -> {} (meaning that if I have {}, I can derive {})"


def rule(p: str, q: str) -> str:
    return RULE.format(p, q, p, q)


def step(p: str, q: str) -> str:
    return f"I have {p}, I use rule ({p} -> {q}) to derive {q}, now I have {q}"


def fold_prevalence(chains) -> list[float]:
    """Per-fold share of unsound steps on the held-out fold (spec section 6's external check)."""
    kfold = pytest.importorskip("sklearn.model_selection").KFold(n_splits=5, shuffle=True, random_state=42)
    out = []
    for _, test in kfold.split(np.arange(len(chains))):
        out.append(round(float(np.mean([label for i in test for label in chains[i].labels])), 4))
    return out


def test_golden_vector_idx0():
    chain = claimtrees_vanilla(0, 10)
    assert claimtrees_names(10)[:5] == ["SG", "DG", "AZ", "VD", "H3"]
    assert chain.meta["names"][:5] == ["SG", "DG", "AZ", "VD", "H3"]
    assert chain.meta["states"] == "D8 U8 DG G8 VD H3 AZ SG C6 GM".split()
    assert chain.meta["deleted_index"] == 6
    assert chain.meta["deleted_claim"] == rule("AZ", "SG")
    pairs = [("H3", "AZ"), ("SG", "C6"), ("C6", "GM"), ("VD", "H3"), ("G8", "VD"), ("D8", "U8")]
    expected = [rule(p, q) for p, q in pairs] + ["I have D8", rule("U8", "DG"), rule("DG", "G8")]
    assert list(chain.base_claims) == expected
    assert chain.steps[0] == step("D8", "U8") and chain.steps[-1] == step("C6", "GM")
    assert chain.labels == (0, 0, 0, 0, 0, 0, 1, 1, 1)
    assert chain.id == "claimtrees-L10-0"


def test_golden_vector_idx1():
    chain = claimtrees_vanilla(1, 10)
    assert chain.meta["states"] == "GM U8 C6 D8 G8 VD SG H3 DG AZ".split()
    assert chain.meta["deleted_index"] == 2
    assert chain.labels == (0, 0, 1, 1, 1, 1, 1, 1, 1)
    assert chain.id == "claimtrees-L10-1"


@pytest.mark.parametrize("length", [2, 5, 10, 30])
def test_vanilla_structure(length):
    for chain in load_claimtrees(20, length):
        states, deleted = chain.meta["states"], chain.meta["deleted_index"]
        full = [rule(p, q) for p, q in zip(states, states[1:])] + [f"I have {states[0]}"]
        assert chain.num_steps == length - 1 and chain.num_base == length - 1
        assert sorted(chain.base_claims) == sorted(full[:deleted] + full[deleted + 1:])
        assert chain.meta["deleted_claim"] not in chain.base_claims
        assert list(chain.steps) == [step(p, q) for p, q in zip(states, states[1:])]


def test_deleted_fact_labels_fixed_by_default_and_flawed_in_paper_compat():
    fact_deleted = [c.id for c in load_claimtrees(60, 10) if c.meta["deleted_index"] == 9]
    assert fact_deleted, "expected some examples among the first 60 whose fact (index L-1) is deleted"
    for chain in load_claimtrees(60, 10):
        compat = claimtrees_vanilla(int(chain.id.rsplit("-", 1)[1]), 10, paper_compat=True)
        if chain.id in fact_deleted:
            assert chain.labels == (1,) * 9  # nothing is grounded without the fact
            assert compat.labels == (0,) * 9  # the research code's flaw
        else:
            assert chain.labels == compat.labels
        assert chain.base_claims == compat.base_claims and chain.steps == compat.steps


def test_fold_prevalence_claimtrees10_matches_spec():
    chains = load_claimtrees(100, 10, paper_compat=True)
    assert fold_prevalence(chains) == [0.4667, 0.5222, 0.4056, 0.4944, 0.5833]


@pytest.mark.parametrize(
    ("sources", "depth", "expected"),
    [
        (3, 3, [0.15, 0.3, 0.1, 0.2, 0.4]),
        (3, 5, [0.1, 0.175, 0.1, 0.3, 0.325]),
        (5, 3, [0.05, 0.05, 0.1, 0.2, 0.15]),
        (5, 5, [0.125, 0.05, 0.1, 0.15, 0.1]),
    ],
)
def test_fold_prevalence_multi_source_matches_spec(sources, depth, expected):
    chains = load_claimtrees(50, variant="multi_source", sources=sources, depth=depth, paper_compat=True)
    assert fold_prevalence(chains) == expected


@pytest.mark.parametrize(("sources", "depth"), [(3, 3), (5, 5), (1, 2), (2, 4)])
def test_multi_source_structure_and_labels(sources, depth):
    for idx in range(40):
        chain = claimtrees_multi_source(idx, sources, depth)
        states, sink, deleted = chain.meta["states"], chain.meta["sink"], chain.meta["deleted_index"]
        assert chain.id == f"claimtrees-s{sources}d{depth}-{idx}"
        assert chain.num_base == sources * (depth - 1)  # X*(Y-1) rules + the fact, minus the deleted claim
        assert sink == states[-1] and sum(q == sink for _, q in chain.meta["rules"]) == sources
        chain0 = states[: depth - 1] + [sink]
        assert list(chain.steps) == [step(p, q) for p, q in zip(chain0, chain0[1:])]
        fact_index = sources * (depth - 1)
        if deleted == fact_index:
            expected = [1] * (depth - 1)
        else:  # deleting another chain's rule (index >= depth - 1) leaves chain 0 sound
            expected = [int(i >= deleted) for i in range(depth - 1)]
        assert list(chain.labels) == expected
        compat = claimtrees_multi_source(idx, sources, depth, paper_compat=True)
        assert list(compat.labels) == [int(i >= deleted) for i in range(depth - 1)]


@pytest.mark.parametrize(("valid", "inserted"), [(5, 1), (5, 2), (5, 5), (3, 4), (2, 1)])
def test_insertion_structure_and_labels(valid, inserted):
    for idx in range(30):
        chain = claimtrees_insertion(idx, valid, inserted)
        states, positions = chain.meta["states"], chain.meta["insertion_positions"]
        assert chain.num_base == valid  # V-1 rules + the fact, nothing deleted
        assert f"I have {states[0]}" in chain.base_claims
        assert chain.num_steps == valid - 1 + inserted and sum(chain.labels) == inserted
        assert positions == [random.Random(idx + j).randint(0, valid - 2) for j in range(inserted)]
        sound = [s for s, label in zip(chain.steps, chain.labels) if label == 0]
        assert sound == [step(p, q) for p, q in zip(states[:valid], states[1:valid])]
        for j, pos in enumerate(positions):
            inserted_step = step(states[pos], states[valid + j])
            k = chain.steps.index(inserted_step)
            assert chain.labels[k] == 1
            # it follows valid step `pos` (possibly after earlier insertions at the same position)
            assert chain.steps[:k].count(step(states[pos], states[pos + 1])) == 1
            after_valid = chain.steps.index(step(states[pos], states[pos + 1])) + 1
            assert all(label == 1 for label in chain.labels[after_valid:k])


def test_insertion_placement_small_case():
    chain = claimtrees_insertion(3, 5, 3)
    s = chain.meta["states"]
    assert chain.meta["insertion_positions"] == [1, 1, 2]
    assert list(chain.steps) == [
        step(s[0], s[1]), step(s[1], s[2]), step(s[1], s[5]), step(s[1], s[6]),
        step(s[2], s[3]), step(s[2], s[7]), step(s[3], s[4]),
    ]
    assert chain.labels == (0, 0, 1, 1, 0, 1, 0)


def test_three_char_names():
    names = claimtrees_names(50, name_length=3)
    assert len(set(names)) == 50
    assert all(len(n) == 3 and n[0].isalpha() and n[0].isupper() and n[1:].isalnum() for n in names)
    assert names == claimtrees_names(50, name_length=3)  # deterministic (cached per (L, name_length))
    chain = claimtrees_vanilla(0, 10, name_length=3)
    assert chain.id == "claimtrees-L10n3-0"
    assert all(len(s) == 3 for s in chain.meta["states"])
    assert chain.meta["deleted_index"] == 6  # the deletion depends on idx and L only, not on the names
    assert claimtrees_names(26, name_length=1) != claimtrees_names(26, name_length=2)[:26]


def test_custom_templates_reword_every_claim():
    templates = ClaimTreesTemplates(
        rule="Known: from {p} one gets {q}.", fact="{p} is given.", step="Since {p} is known and {p} gives {q}, {q}."
    )
    chain = claimtrees_vanilla(0, 10, templates=templates)
    default = claimtrees_vanilla(0, 10)
    assert "D8 is given." in chain.base_claims
    assert "Known: from H3 one gets AZ." in chain.base_claims
    assert chain.steps[0] == "Since D8 is known and D8 gives U8, U8."
    assert chain.labels == default.labels and chain.meta["states"] == default.meta["states"]


@pytest.mark.parametrize(
    "kwargs",
    [{"rule": "{p} implies something"}, {"fact": "I have {q}"}, {"step": "{p} -> {q} via {r}"}],
)
def test_invalid_templates_raise(kwargs):
    with pytest.raises(ValueError, match="ClaimTreesTemplates"):
        ClaimTreesTemplates(**kwargs)


def test_dispatch_and_loading():
    assert claimtrees_example(4, 7) == claimtrees_vanilla(4, 7)
    assert claimtrees_example(4, variant="multi_source", sources=2, depth=4) == claimtrees_multi_source(4, 2, 4)
    assert claimtrees_example(4, variant="insertion", valid=6, inserted=2) == claimtrees_insertion(4, 6, 2)
    chains = load_claimtrees(3, 10, start=5)
    assert [c.id for c in chains] == ["claimtrees-L10-5", "claimtrees-L10-6", "claimtrees-L10-7"]
    assert chains[0] == claimtrees_vanilla(5, 10)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: claimtrees_example(0, variant="wide"), "variant='wide'"),
        (lambda: claimtrees_vanilla(-1), "idx=-1"),
        (lambda: claimtrees_vanilla(0, 1), "length=1"),
        (lambda: claimtrees_multi_source(0, 0, 3), "sources=0"),
        (lambda: claimtrees_insertion(0, 1, 1), "valid=1"),
        (lambda: claimtrees_names(1000, 2), "num_states=1000"),
        (lambda: claimtrees_names(5, 4), "name_length=4"),
    ],
)
def test_bad_arguments_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()
