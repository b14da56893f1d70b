"""The checks every PRM family's test runs against the family's published code re-written in that test (a
``reference(question, steps) -> (input ids, per-step scores)``): the same ids and scores on a whole chain in one pass,
on premise subsets rendered as ARES renders them (the chain made of the subset), and ARES's first step. One copy for
tests/backbones/test_prm_families.py (the older families) and test_prm_presets.py (the newer layouts)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from ares_rerank import Chain, score_chains


BASE = ["Janet's ducks lay 16 eggs per day.", "She eats three for breakfast every morning."]
STEPS = ["Step 1: 16 - 3 = 13 eggs left.", "Step 2: 13 - 4 = 9.", "Step 3: 9 * 2 = 18.", "The answer is: 18"]
# (included base claims, included earlier steps, judged step): how ARES masks a chain
SUBSETS = [((0, 1), (0, 1, 2), 3), ((0,), (1,), 3), ((), (0, 2), 3), ((1,), (), 1), ((0, 1), (0,), 2)]
ATOL = 1e-6

Reference = Callable[[str, list[str]], "tuple[list[int], list[float]]"]


def question(base: list[str]) -> str:
    return "\n".join(base)  # the families' default question_separator


def check_whole_chain(prm: Any, reference: Reference) -> None:
    """The whole chain: the same ids, every step's score within ATOL, one forward pass."""
    ids, expected = reference(question(BASE), STEPS)
    assert prm.encode_chain(BASE, STEPS)["input_ids"] == ids
    assert len(expected) == len(STEPS) and all(0.02 < p < 0.98 for p in expected)  # away from 0 and 1
    (whole,) = score_chains([Chain(BASE, STEPS)], prm, method="prm-chain")
    assert whole.step_scores == pytest.approx(expected, abs=ATOL)
    assert whole.evaluations == 1  # one forward pass reads every step


def subset_pairs(reference: Reference, subsets: Any = SUBSETS) -> tuple[list, list, list, list, list]:
    """ARES's inputs for ``subsets`` and what ``reference`` says of each: ``(premises, hypotheses, num_base, the
    reference's ids, its judged step's score)``."""
    premises, hypotheses, num_base, ids, wanted = [], [], [], [], []
    for base_idx, step_idx, judged in subsets:
        base, earlier = [BASE[i] for i in base_idx], [STEPS[i] for i in step_idx]
        got_ids, scores = reference(question(base), earlier + [STEPS[judged]])
        premises.append(base + earlier)
        hypotheses.append(STEPS[judged])
        num_base.append(len(base))
        ids.append(got_ids)
        wanted.append(scores[-1])
    return premises, hypotheses, num_base, ids, wanted


def check_premise_subsets(prm: Any, reference: Reference) -> None:
    """Each subset of SUBSETS: the ids of the chain made of it, and its judged step's score, all in one batch."""
    premises, hypotheses, num_base, ids, wanted = subset_pairs(reference)
    for p, h, n, want in zip(premises, hypotheses, num_base, ids):
        assert prm.encode_pair(p, h, num_base=n)["input_ids"] == want
    got = prm.entailment_probs(premises, hypotheses, num_base=num_base)  # one batch, shared heads reused
    assert got == pytest.approx(wanted, abs=ATOL)


def check_ares_first_step(prm: Any, reference: Reference) -> None:
    """ARES through score_chains sends exactly such inputs: at prior 1 its first step is the reference's first."""
    (ares,) = score_chains([Chain(BASE, STEPS)], prm)
    _, expected = reference(question(BASE), STEPS[:1])
    assert ares.step_scores[0] == pytest.approx(expected[0], abs=ATOL)
    assert all(0.0 <= s <= 1.0 for s in ares.step_scores)
