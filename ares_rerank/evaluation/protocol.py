"""The paper's evaluation protocol and metrics (ARES_SPEC section 6), with sklearn for folds and metrics.

- :func:`cross_validate`: ``KFold(5, shuffle=True, random_state=42)`` over example indices (the steps of one chain
  never cross folds); on each fold the threshold is fit on the other four (every distinct step score is a
  candidate, a step is flagged unsound iff ``score <= t``, the best macro-F1 wins) and macro precision / recall /
  F1 (sklearn ``average="macro"``, ``zero_division=0``) are measured on the held-out fold. The table value is the
  mean over folds, the "±" the bootstrap standard error of that mean (1000 resamples of the five fold values).
- :func:`processbench_metric`: ProcessBench's metric (first-error accuracy on erroneous and on correct samples,
  F1 = their harmonic mean).
- :func:`best_of_2`: share of (sound, flawed) pairs where the sound chain scores strictly higher (ties are wrong).
- :func:`sample_efficiency`: ARES's distinct backbone evaluations against the Hoeffding budget ``m * N(m)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
from sklearn.metrics import precision_recall_fscore_support
from sklearn.model_selection import KFold

from ..chain import ChainScores
from ..estimator.config import sample_size


__all__ = [
    "CVResult",
    "FoldResult",
    "best_of_2",
    "bootstrap_se",
    "cross_validate",
    "first_flagged",
    "fit_threshold",
    "fold_prevalences",
    "folds",
    "macro_f1_curve",
    "macro_prf",
    "processbench_cv",
    "processbench_metric",
    "sample_efficiency",
]

N_SPLITS = 5
FOLD_SEED = 42
N_BOOTSTRAP = 1000
BOOTSTRAP_SEED = 0


@dataclass
class FoldResult:
    """One held-out fold: the threshold fit on the other folds and the metrics measured on this one."""

    threshold: float
    precision: float
    recall: float
    f1: float
    prevalence: float = field(metadata={"help": "Share of unsound steps in the held-out fold."})
    num_chains: int
    num_steps: int


@dataclass
class CVResult:
    """Mean macro precision / recall / F1 over the folds, with bootstrap standard errors of the means."""

    precision: float
    recall: float
    f1: float
    precision_se: float
    recall_se: float
    f1_se: float
    folds: list[FoldResult]

    def to_dict(self) -> dict:
        return asdict(self)


def folds(num_examples: int, n_splits: int = N_SPLITS, seed: int = FOLD_SEED) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train, test)`` example indices of ``KFold(n_splits, shuffle=True, random_state=seed)``."""
    if not isinstance(num_examples, int) or num_examples < n_splits:
        raise ValueError(
            f"num_examples={num_examples!r}: {n_splits}-fold cross-validation needs at least {n_splits} examples; "
            "evaluate more chains (e.g. --n 100)."
        )
    splitter = KFold(n_splits=n_splits, shuffle=True, random_state=seed)
    return list(splitter.split(np.arange(num_examples)))


def _flatten(values: Sequence[Sequence[float]], idx: Sequence[int]) -> np.ndarray:
    return np.asarray([x for i in idx for x in values[i]], dtype=np.float64)


def fold_prevalences(labels: Sequence[Sequence[int]], n_splits: int = N_SPLITS, seed: int = FOLD_SEED) -> list[float]:
    """Share of unsound steps in each held-out fold (the spec's "fold fingerprints"), in fold order."""
    return [float(_flatten(labels, test).mean()) for _, test in folds(len(labels), n_splits, seed)]


def macro_prf(labels: Sequence[int], flagged: Sequence[int]) -> tuple[float, float, float]:
    """Macro precision, recall and F1 (sklearn, ``average="macro"``, undefined precision = 0).

    Args:
        labels: Gold labels per step, 1 = unsound.
        flagged: Predictions per step, 1 = flagged unsound.

    Returns:
        ``(precision, recall, f1)`` averaged over the classes present in ``labels`` or ``flagged``.
    """
    p, r, f, _ = precision_recall_fscore_support(
        np.asarray(labels, dtype=int), np.asarray(flagged, dtype=int), average="macro", zero_division=0
    )
    return float(p), float(r), float(f)


def macro_f1_curve(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Macro-F1 of "flag iff score <= t" for every distinct score t, ascending.

    Vectorized from the per-class counts, equal to sklearn's ``f1_score(average="macro", zero_division=0)`` at
    every candidate (a test checks this); sklearn itself would take one call per candidate.

    Returns:
        ``(candidates, macro_f1)``, both of shape ``(num_distinct_scores,)``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=int)
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order]
    candidates = np.unique(s)
    # Number of steps with score <= t, for each candidate t (the last index of each distinct value, + 1).
    flagged_n = np.searchsorted(s, candidates, side="right")
    tp1 = np.cumsum(y)[flagged_n - 1]  # unsound steps flagged
    fp1 = flagged_n - tp1  # sound steps flagged
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    fn1 = pos - tp1
    tp0 = neg - fp1  # sound steps left unflagged
    f1_unsound = _safe_ratio(2 * tp1, 2 * tp1 + fp1 + fn1)
    f1_sound = _safe_ratio(2 * tp0, 2 * tp0 + fn1 + fp1)
    sound_present = (neg > 0) | (flagged_n < len(s))  # class 0 in y_true or y_pred
    unsound_present = (pos > 0) | (flagged_n > 0)
    total = np.where(sound_present, f1_sound, 0.0) + np.where(unsound_present, f1_unsound, 0.0)
    return candidates, total / (sound_present.astype(int) + unsound_present.astype(int))


def _safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def fit_threshold(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The threshold with the best macro-F1 among every distinct score; ties go to the smallest threshold.

    Args:
        scores: Step scores (high = sound).
        labels: Gold labels, 1 = unsound.

    Returns:
        ``t``; a step is flagged unsound iff ``score <= t``.
    """
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=int)
    if scores.shape != labels.shape or scores.size == 0:
        raise ValueError(
            f"fit_threshold got {scores.size} scores and {labels.size} labels: pass one label per score (non-empty)."
        )
    candidates, f1 = macro_f1_curve(scores, labels)
    best = int(np.flatnonzero(f1 >= f1.max() - 1e-12)[0])  # float noise must not decide between equal F1s
    return float(candidates[best])


def bootstrap_se(values: Sequence[float], n_resamples: int = N_BOOTSTRAP, seed: int = BOOTSTRAP_SEED) -> float:
    """Bootstrap standard error of the mean of ``values`` (resampled with replacement, ``ddof=1``)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return 0.0
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, size=(n_resamples, values.size))].mean(axis=1)
    return float(means.std(ddof=1))


def _check_aligned(step_scores: Sequence[Sequence[float]], labels: Sequence[Sequence[int]]) -> None:
    if len(step_scores) != len(labels):
        raise ValueError(f"got scores for {len(step_scores)} chains and labels for {len(labels)}: pass one each.")
    for i, (s, y) in enumerate(zip(step_scores, labels)):
        if y is None or len(s) != len(y):
            raise ValueError(
                f"chain {i} has {len(s)} step scores and {None if y is None else len(y)} labels: every evaluated "
                "chain needs one label per step."
            )


def cross_validate(
    step_scores: Sequence[Sequence[float]],
    labels: Sequence[Sequence[int]],
    n_splits: int = N_SPLITS,
    seed: int = FOLD_SEED,
) -> CVResult:
    """The paper's 5-fold protocol: per-fold thresholds fit on the other folds, macro P/R/F1 on the held-out fold.

    Args:
        step_scores: Per chain, the score of each step (high = sound).
        labels: Per chain, the gold label of each step (1 = unsound).
        n_splits, seed: The folds (``KFold(n_splits, shuffle=True, random_state=seed)`` over chains).

    Returns:
        Fold means with bootstrap standard errors, and every fold's threshold, metrics and prevalence.
    """
    _check_aligned(step_scores, labels)
    results = []
    for train, test in folds(len(step_scores), n_splits, seed):
        t = fit_threshold(_flatten(step_scores, train), _flatten(labels, train))
        y = _flatten(labels, test).astype(int)
        p, r, f = macro_prf(y, (_flatten(step_scores, test) <= t).astype(int))
        results.append(FoldResult(t, p, r, f, float(y.mean()), len(test), int(y.size)))
    cols = {name: [getattr(fr, name) for fr in results] for name in ("precision", "recall", "f1")}
    return CVResult(
        precision=float(np.mean(cols["precision"])),
        recall=float(np.mean(cols["recall"])),
        f1=float(np.mean(cols["f1"])),
        precision_se=bootstrap_se(cols["precision"]),
        recall_se=bootstrap_se(cols["recall"]),
        f1_se=bootstrap_se(cols["f1"]),
        folds=results,
    )


def first_flagged(scores: Sequence[float], threshold: float) -> int:
    """0-based index of the first step with ``score <= threshold``, or -1 (ProcessBench's "no error")."""
    return next((i for i, s in enumerate(scores) if s <= threshold), -1)


def processbench_metric(predicted: Sequence[int], gold: Sequence[int]) -> dict[str, float]:
    """ProcessBench's metric: accuracy on erroneous samples (predicted first error == gold), on correct samples
    (predicted -1), and F1 = their harmonic mean (0 when either is 0).

    Args:
        predicted: Predicted first-error index per chain, -1 for "no error".
        gold: Gold first-error index per chain (0-based), -1 for a correct chain.

    Returns:
        ``{"error_acc", "correct_acc", "f1", "num_erroneous", "num_correct"}``; an accuracy over no samples is 0.
    """
    predicted, gold = np.asarray(predicted, dtype=int), np.asarray(gold, dtype=int)
    if predicted.shape != gold.shape:
        raise ValueError(f"processbench_metric got {predicted.size} predictions for {gold.size} gold labels.")
    erroneous, correct = gold != -1, gold == -1
    err_acc = float((predicted[erroneous] == gold[erroneous]).mean()) if erroneous.any() else 0.0
    cor_acc = float((predicted[correct] == -1).mean()) if correct.any() else 0.0
    f1 = 2 * err_acc * cor_acc / (err_acc + cor_acc) if err_acc + cor_acc > 0 else 0.0
    return {
        "error_acc": err_acc, "correct_acc": cor_acc, "f1": f1,
        "num_erroneous": int(erroneous.sum()), "num_correct": int(correct.sum()),
    }


def _first_flagged_matrix(step_scores: Sequence[Sequence[float]], candidates: np.ndarray) -> np.ndarray:
    """``(num_chains, num_candidates)`` first flagged index (-1 = none) of every chain at every threshold."""
    out = np.empty((len(step_scores), candidates.size), dtype=int)
    for i, scores in enumerate(step_scores):
        running_min = np.minimum.accumulate(np.asarray(scores, dtype=np.float64))  # (m,) non-increasing
        first = (running_min[:, None] > candidates[None, :]).sum(axis=0)  # steps before the first flag
        out[i] = np.where(first == running_min.size, -1, first)
    return out


def processbench_cv(
    step_scores: Sequence[Sequence[float]],
    gold: Sequence[int],
    n_splits: int = N_SPLITS,
    seed: int = FOLD_SEED,
) -> dict:
    """ProcessBench's metric under the same folds: each held-out chain's first error is predicted with the threshold
    that maximizes ProcessBench F1 on the other folds (smallest on ties); the metric is computed once over all
    held-out predictions (it does not decompose over folds: a fold may hold no correct chain).

    Returns:
        ``{"f1", "error_acc", "correct_acc", "num_erroneous", "num_correct", "f1_se", "thresholds"}``; ``f1_se`` is
        the bootstrap SE over chains (1000 resamples of the held-out predictions).
    """
    gold = np.asarray(gold, dtype=int)
    if len(step_scores) != gold.size:
        raise ValueError(f"processbench_cv got {len(step_scores)} chains and {gold.size} gold first errors.")
    predicted = np.empty(gold.size, dtype=int)
    thresholds = []
    for train, test in folds(len(step_scores), n_splits, seed):
        candidates = np.unique(_flatten(step_scores, train))
        preds = _first_flagged_matrix([step_scores[i] for i in train], candidates)
        f1s = np.asarray([processbench_metric(preds[:, j], gold[train])["f1"] for j in range(candidates.size)])
        t = float(candidates[int(np.flatnonzero(f1s >= f1s.max() - 1e-12)[0])])
        thresholds.append(t)
        predicted[test] = [first_flagged(step_scores[i], t) for i in test]
    out: dict = processbench_metric(predicted, gold)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = rng.integers(0, gold.size, size=(N_BOOTSTRAP, gold.size))
    out["f1_se"] = float(np.std([processbench_metric(predicted[d], gold[d])["f1"] for d in draws], ddof=1))
    out["thresholds"] = thresholds
    return out


def best_of_2(sound: Sequence[Sequence[float]], flawed: Sequence[Sequence[float]], reduce: str = "mean") -> dict:
    """Best-of-2 selection accuracy: the share of pairs whose sound chain scores strictly higher (ties are wrong).

    Args:
        sound: Step scores of the sound chain of each pair (PRMBench's original process).
        flawed: Step scores of the flawed chain of each pair (the modified process).
        reduce: Chain score: ``"mean"`` (the paper's "step avg") or ``"final"`` (the last step's score).

    Returns:
        ``{"accuracy", "se", "ties", "num_pairs"}`` with the bootstrap SE over pairs.
    """
    reducers = {"mean": lambda s: float(np.mean(s)), "final": lambda s: float(s[-1])}
    if reduce not in reducers:
        raise ValueError(f"best_of_2(reduce={reduce!r}) is unknown: use 'mean' (step average) or 'final'.")
    if len(sound) != len(flawed) or not sound:
        raise ValueError(f"best_of_2 needs as many sound as flawed chains (>0), got {len(sound)} and {len(flawed)}.")
    a = np.asarray([reducers[reduce](s) for s in sound])
    b = np.asarray([reducers[reduce](s) for s in flawed])
    wins = (a > b).astype(np.float64)
    return {"accuracy": float(wins.mean()), "se": bootstrap_se(wins), "ties": int((a == b).sum()), "num_pairs": len(a)}


def sample_efficiency(results: Sequence[ChainScores], eps: float = 0.1, delta: float = 0.1) -> dict[str, float]:
    """Distinct backbone evaluations of ARES against the Hoeffding budget (``N(m)`` per step, ``m * N(m)`` per chain).

    Args:
        results: ARES scores of the chains (their ``evaluations`` / ``evaluations_per_step``).
        eps, delta: The guarantee that sets ``N(m) = ceil(ln(2m / delta) / (2 eps^2))``.

    Returns:
        Means per chain and per step, and the ratios of means ``actual / theoretical`` (the paper reports these).
    """
    if not results:
        raise ValueError("sample_efficiency needs at least one ChainScores.")
    actual = np.asarray([r.evaluations for r in results], dtype=np.float64)
    budget = np.asarray([len(r.step_scores) * sample_size(len(r.step_scores), eps, delta) for r in results], float)
    per_step = np.asarray([e for r in results for e in r.evaluations_per_step], dtype=np.float64)
    per_step_budget = np.asarray(
        [sample_size(len(r.step_scores), eps, delta) for r in results for _ in r.step_scores], dtype=np.float64
    )
    return {
        "actual_per_chain": float(actual.mean()),
        "theoretical_per_chain": float(budget.mean()),
        "ratio_per_chain": float(actual.mean() / budget.mean()),
        "actual_per_step": float(per_step.mean()),
        "theoretical_per_step": float(per_step_budget.mean()),
        "ratio_per_step": float(per_step.mean() / per_step_budget.mean()),
    }
