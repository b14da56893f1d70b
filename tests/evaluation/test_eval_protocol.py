"""The evaluation protocol: thresholds, sklearn-equal metrics, folds, bootstrap, best-of-2, ProcessBench, efficiency."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import shared_data
from sklearn.metrics import f1_score, precision_recall_fscore_support
from sklearn.model_selection import KFold

from ares_rerank.chain import ChainScores
from ares_rerank.data.claimtrees import load_claimtrees
from ares_rerank.data.recipes import load_recipes
from ares_rerank.evaluation.protocol import (
    best_of_2,
    bootstrap_se,
    cross_validate,
    first_flagged,
    fit_threshold,
    fold_prevalences,
    macro_f1_curve,
    processbench_cv,
    processbench_metric,
    sample_efficiency,
)


def test_fit_threshold_toy_known_answer():
    # Separable: flag the two low scores.
    assert fit_threshold([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == 0.2
    # By hand: t=0.1 -> macro-F1 2/3, t=0.5 -> 0.25, t=0.9 -> 0.4.
    assert fit_threshold([0.1, 0.5, 0.9], [1, 0, 1]) == 0.1


def test_fit_threshold_ties_go_to_the_smallest_threshold():
    # t=0.2 and t=0.6 both give macro-F1 (2/3 + 4/5) / 2; t=0.4 gives 0.5; t=0.8 less.
    scores, labels = [0.2, 0.4, 0.6, 0.8], [1, 0, 1, 0]
    candidates, f1 = macro_f1_curve(np.array(scores), np.array(labels))
    assert f1[0] == pytest.approx(f1[2]) and f1[0] > f1[1]
    assert fit_threshold(scores, labels) == 0.2


@pytest.mark.parametrize("seed", range(6))
def test_macro_f1_curve_equals_sklearn_at_every_candidate(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 40))
    scores = rng.choice(np.linspace(0, 1, 7), size=n)  # repeated values: ties inside the candidate set
    labels = rng.integers(0, 2, size=n) if seed % 3 else np.ones(n, dtype=int)  # includes a one-class case
    candidates, f1 = macro_f1_curve(scores, labels)
    assert np.array_equal(candidates, np.unique(scores))
    for t, value in zip(candidates, f1):
        expected = f1_score(labels, (scores <= t).astype(int), average="macro", zero_division=0)
        assert value == pytest.approx(expected, abs=1e-12)


def _reference_cv(step_scores, labels):
    """The protocol written directly with sklearn, one f1_score call per candidate threshold."""
    out = []
    for train, test in KFold(5, shuffle=True, random_state=42).split(np.arange(len(labels))):
        s = np.concatenate([step_scores[i] for i in train])
        y = np.concatenate([labels[i] for i in train])
        cands = np.unique(s)
        f1s = [f1_score(y, (s <= t).astype(int), average="macro", zero_division=0) for t in cands]
        t = cands[int(np.argmax(np.round(f1s, 12)))]
        ys = np.concatenate([labels[i] for i in test])
        ss = np.concatenate([step_scores[i] for i in test])
        p, r, f, _ = precision_recall_fscore_support(ys, (ss <= t).astype(int), average="macro", zero_division=0)
        out.append((t, p, r, f))
    return out


def test_cross_validate_equals_a_direct_sklearn_implementation():
    rng = np.random.default_rng(7)
    labels = [rng.integers(0, 2, size=int(rng.integers(2, 9))) for _ in range(40)]
    scores = [np.clip(0.7 - 0.4 * y + rng.normal(0, 0.25, size=y.size), 0, 1).round(1) for y in labels]
    result = cross_validate(scores, labels)
    reference = _reference_cv(scores, labels)
    assert [f.threshold for f in result.folds] == pytest.approx([r[0] for r in reference])
    for fold, (_, p, r, f) in zip(result.folds, reference):
        assert (fold.precision, fold.recall, fold.f1) == pytest.approx((p, r, f))
    assert result.f1 == pytest.approx(np.mean([r[3] for r in reference]))
    assert result.f1_se == pytest.approx(bootstrap_se([r[3] for r in reference]))
    assert 0 < result.f1_se < 0.2


def test_cross_validate_perfect_scores_give_one_and_zero_se():
    labels = [[0, 0, 1], [0, 1, 1], [0, 0, 0], [1, 1, 1], [0, 1, 1], [0, 0, 1]]
    scores = [[1.0 - y for y in ys] for ys in labels]
    result = cross_validate(scores, labels)
    assert (result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0)
    assert result.f1_se == 0.0


def test_cross_validate_rejects_misaligned_input():
    with pytest.raises(ValueError, match="labels"):
        cross_validate([[0.1, 0.2]] * 5, [[0]] * 5)
    with pytest.raises(ValueError, match="at least 5"):
        cross_validate([[0.1]] * 3, [[0]] * 3)


def test_bootstrap_se_resamples_the_values():
    assert bootstrap_se([0.7] * 5) == pytest.approx(0.0, abs=1e-12)
    values = np.array([0.5, 0.6, 0.9, 0.4, 0.8])
    rng = np.random.default_rng(0)
    expected = values[rng.integers(0, 5, size=(1000, 5))].mean(axis=1).std(ddof=1)
    assert bootstrap_se(values) == pytest.approx(expected)
    # About the textbook SE of a mean (std / sqrt(n)) for 5 values.
    assert bootstrap_se(values) == pytest.approx(values.std() / np.sqrt(5), rel=0.15)


def test_best_of_2_counts_ties_as_wrong():
    sound = [[1.0, 1.0], [0.5, 0.5], [0.9, 0.2]]
    flawed = [[0.0, 0.0], [0.5, 0.5], [0.1, 0.3]]
    avg = best_of_2(sound, flawed, "mean")  # wins: 1 > 0; tie; 0.55 > 0.2
    final = best_of_2(sound, flawed, "final")  # wins: 1 > 0; tie; 0.2 < 0.3
    assert avg["accuracy"] == pytest.approx(2 / 3) and avg["ties"] == 1
    assert final["accuracy"] == pytest.approx(1 / 3) and final["ties"] == 1
    assert best_of_2([[0.5]] * 4, [[0.5]] * 4)["accuracy"] == 0.0
    with pytest.raises(ValueError, match="reduce"):
        best_of_2(sound, flawed, "max")


def test_processbench_metric_toy():
    # Correct samples: 1 of 2 predicted -1; erroneous: 1 of 2 exact.
    m = processbench_metric([-1, 1, 2, 1], [-1, -1, 2, 0])
    assert (m["correct_acc"], m["error_acc"], m["f1"]) == (0.5, 0.5, 0.5)
    m = processbench_metric([-1, 3, 0], [-1, 3, 0])
    assert m["f1"] == 1.0 and m["num_correct"] == 1 and m["num_erroneous"] == 2
    m = processbench_metric([-1, -1], [-1, 2])  # never finds the error: harmonic mean 0
    assert (m["correct_acc"], m["error_acc"], m["f1"]) == (1.0, 0.0, 0.0)


def test_first_flagged_and_processbench_cv_on_perfect_scores():
    assert first_flagged([0.9, 0.4, 0.1], 0.5) == 1 and first_flagged([0.9, 0.8], 0.5) == -1
    gold = [-1, 0, 2, -1, 1, 3, -1, 2, -1, 1]
    scores = [[0.0 if (g != -1 and k >= g) else 0.9 for k in range(5)] for g in gold]
    out = processbench_cv(scores, gold)
    assert out["f1"] == 1.0 and out["thresholds"] == [0.0] * 5
    assert out["f1_se"] < 0.1  # resamples without a correct chain score 0: the SE of a perfect scorer is small, not 0
    # A constant scorer: the only candidate threshold flags every step, so every chain's first error is step 0.
    out = processbench_cv([[0.9] * 5 for _ in gold], gold)
    assert (out["correct_acc"], out["error_acc"], out["f1"]) == (0.0, pytest.approx(1 / 6), 0.0)


def test_sample_efficiency_is_a_ratio_of_means():
    a = ChainScores([1.0] * 4, evaluations=4, evaluations_per_step=[1] * 4)  # m=4: N=220
    b = ChainScores([1.0] * 9, evaluations=30, evaluations_per_step=[3] * 8 + [6])  # m=9: N=260
    eff = sample_efficiency([a, b])
    assert eff["theoretical_per_chain"] == (4 * 220 + 9 * 260) / 2
    assert eff["ratio_per_chain"] == pytest.approx(((4 + 30) / 2) / ((4 * 220 + 9 * 260) / 2))
    assert eff["actual_per_step"] == pytest.approx(34 / 13)


def test_fold_fingerprints_match_the_spec_to_4_decimals():
    def rounded(chains):
        return [round(v, 4) for v in fold_prevalences([c.labels for c in chains])]

    assert rounded(load_claimtrees(100, 10, paper_compat=True)) == [0.4667, 0.5222, 0.4056, 0.4944, 0.5833]
    shared_data("recipe_graphs")
    assert rounded(load_recipes(100)) == [0.5749, 0.6398, 0.5413, 0.5199, 0.5506]
    expected = {
        (3, 3): [0.15, 0.3, 0.1, 0.2, 0.4], (3, 5): [0.1, 0.175, 0.1, 0.3, 0.325],
        (5, 3): [0.05, 0.05, 0.1, 0.2, 0.15], (5, 5): [0.125, 0.05, 0.1, 0.15, 0.1],
    }
    for (s, d), values in expected.items():
        chains = load_claimtrees(50, variant="multi_source", sources=s, depth=d, paper_compat=True)
        assert rounded(chains) == values, (s, d)
