"""Calibration of an entailment head: temperature scaling (Guo et al., 2017), Platt scaling, ECE and reliability
diagrams.

ARES multiplies backbone probabilities along a chain, so an over-confident head keeps unsound steps in the premise
set and an under-confident one splits exact ARES into many masks. Both calibrations are fitted on held-out pairs by
minimizing the negative log-likelihood:

- ``"temperature"`` divides the logits by one scalar ``T``; it never changes which class wins, only how sure the
  head is;
- ``"platt"`` (Platt, 1999) also adds a ``bias`` to the entailment class's scaled logit, ``softmax(z / T + bias *
  e_entail)`` (for a 2-way head: ``sigmoid((z_1 - z_0) / T + bias)``). The bias moves the decision threshold: it
  corrects a head whose held-out pairs are entailed less (or more) often than its scores say, e.g. a head that
  accepts too many pairs with a needed premise missing. It can change which class wins.

Everything here works on plain arrays: ``logits`` of shape ``(n, num_labels)`` (or ``(n,)`` binary logits, the
log-odds of the positive class) and integer ``labels`` of shape ``(n,)``. ECE is measured on the probability that
ARES consumes, P(entailment): pairs are binned by that probability and each bin's mean probability is compared
with its share of entailed pairs.

The fitted temperature (and bias) are saved in ``ares_calibration.json`` beside the head (:func:`write_calibration`);
this module also owns that file's format: :func:`read_calibration` and :func:`check_calibration` read and check it
(the backbones use them when loading), :func:`check_scale` checks the two parameters. It imports no backbone.

About 580 lines: the two fits, ECE, the reliability diagram and the file format are one job (calibrating a head and
keeping that calibration); the diagram is the first candidate to move out.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .utils.checks import is_finite_number, is_int
from .utils.io import atomic_open, broken_link, read_json_bounded, write_atomic



__all__ = [
    "CALIBRATION_FILE",
    "CALIBRATION_METHODS",
    "MAX_CALIBRATION_BYTES",
    "MIN_TEMPERATURE",
    "CalibrationReport",
    "calibrate",
    "check_bins",
    "check_calibration",
    "check_method",
    "check_scale",
    "entailment_probs_from_logits",
    "expected_calibration_error",
    "fit_platt",
    "fit_temperature",
    "negative_log_likelihood",
    "plot_format",
    "read_calibration",
    "reliability_bins",
    "reliability_diagram",
    "write_calibration",
]

# Temperatures are searched in [T_MIN, T_MAX]: on a split the head gets entirely right the NLL keeps falling as
# T -> 0, and an unbounded fit would return a numerically meaningless temperature.
T_MIN, T_MAX = 0.05, 20.0
# A Platt bias beyond this is a split that one class fills (the NLL keeps falling as the bias grows): clipped.
BIAS_MAX = 20.0
#: What ``calibrate(method=...)``, ``ares-rerank calibrate --method`` and training's ``calibration_method`` accept.
CALIBRATION_METHODS = ("temperature", "platt")
#: More equal-width bins than held-out pairs can fill; the reliability table is allocated per bin.
MAX_BINS = 1000



# -- the calibration file format: saved beside a head's weights or adapter ----------------------------------------
#: The file's name: temperature, bias, entailment label, window, premise selection (and how it was fitted).
CALIBRATION_FILE = "ares_calibration.json"
#: The largest calibration file read (the shipped head's is 3 KB): checked before reading, so a huge file is refused
#: rather than read whole into memory.
MAX_CALIBRATION_BYTES = 1 << 20
#: The smallest temperature a calibration may divide logits by (a fit stays >= 0.05): 1e-320 is subnormal, and logits
#: divided by it overflow to inf and the softmax to NaN.
MIN_TEMPERATURE = 1e-4


def read_calibration(*folders: str | Path | None) -> dict[str, Any]:
    """The first ``ares_calibration.json`` found in ``folders`` (``{}`` if none), checked by
    :func:`check_calibration` (a symlinked file is read: hub snapshots are links)."""
    for folder in folders:
        if folder is None:
            continue
        path = Path(folder) / CALIBRATION_FILE
        if path.is_symlink() and not path.exists():
            raise ValueError(
                f"{path} is a link to {os.readlink(path)!r}, which {broken_link(path)}: a Hub snapshot whose file "
                "was not downloaded looks like this. Download the head again (`hf download <repo>`), or remove the "
                "link to load the head uncalibrated."
            )
        if path.exists() and not path.is_file():
            raise ValueError(
                f"{path} is not a file: a head's calibration is a JSON file such as {{\"temperature\": 1.3}}; put "
                "that file in its place, or remove it to load the head uncalibrated."
            )
        if not path.is_file():
            continue
        return check_calibration(read_json_bounded(path, MAX_CALIBRATION_BYTES), path)
    return {}



def check_scale(temperature: Any, bias: Any, where: str = "", fix: str = "") -> tuple[float, float]:
    """``(temperature, bias)`` as floats if a calibration can apply them, else a ValueError naming the bad one.

    The one check of the two calibration parameters (heads, calibration records, :mod:`~ares_rerank.calibration`):
    ``temperature`` a finite number >= :data:`MIN_TEMPERATURE` (an infinite one makes every probability 0.5, a
    subnormal one NaN), ``bias`` a finite number (added to the entailment logit after the temperature). ``where``
    starts the message (e.g. the file), ``fix`` ends it (what to do).
    """
    if not is_finite_number(temperature) or temperature < MIN_TEMPERATURE:
        raise ValueError(
            f"{where}temperature={temperature!r} must be a finite number >= {MIN_TEMPERATURE} (1.0 = uncalibrated; "
            f"an infinite one makes every probability 0.5, a tiny one overflows the logits to NaN){fix}."
        )
    if not is_finite_number(bias):
        raise ValueError(
            f"{where}bias={bias!r} must be a finite number (0.0 = none; a Platt calibration's bias, added to the "
            f"entailment logit after the temperature){fix}."
        )
    return float(temperature), float(bias)


def check_calibration(data: Any, path: str | Path) -> dict[str, Any]:
    """``data`` if it is a calibration record the backbones can use, else a ValueError naming ``path`` and the key.

    ``temperature`` (default 1.0) must be a finite number >= :data:`MIN_TEMPERATURE` (JSON allows ``Infinity``: an
    infinite temperature makes every probability 0.5); ``bias`` (the entailment bias of a Platt fit, default 0.0) a
    finite number; ``max_length`` an integer >= 8 or null; ``entailment_label`` a label name or class index or
    null; ``premise_selection`` a string or null. Other keys (metrics, training records) are kept as they are.
    """
    if not isinstance(data, dict):
        raise ValueError(
            f"{path} holds a JSON {type(data).__name__}, not an object: expected e.g. {{\"temperature\": 1.3}}."
        )
    check_scale(data.get("temperature", 1.0), data.get("bias", 0.0), f"{path}: ",
                ": fix the key (or delete it) or calibrate again")
    max_length = data.get("max_length")
    if max_length is not None and (not is_int(max_length) or max_length < 8):
        raise ValueError(
            f"{path}: max_length={max_length!r} must be an integer >= 8 (tokens) or null for the model's window."
        )
    label = data.get("entailment_label")
    if label is not None and not isinstance(label, str) and not is_int(label):
        raise ValueError(f"{path}: entailment_label={label!r} must be a label name, a class index or null.")
    selection = data.get("premise_selection")
    if selection is not None and not isinstance(selection, str):
        raise ValueError(
            f"{path}: premise_selection={selection!r} must be a string such as 'all' or 'relevant:6', or null."
        )
    return data


def _as_logits(logits: Any, name: str = "logits") -> np.ndarray:
    """``(n, C)`` float64 logits; ``(n,)`` binary log-odds become ``(n, 2)`` as ``[0, z]``."""
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim == 1:
        arr = np.stack([np.zeros_like(arr), arr], axis=1)
    if arr.ndim != 2 or arr.shape[1] < 2 or arr.shape[0] == 0:
        raise ValueError(
            f"{name} has shape {np.shape(logits)}: pass (num_pairs, num_labels) logits with num_labels >= 2, or "
            "(num_pairs,) binary log-odds, with at least one pair."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values: pass the raw finite logits of the head.")
    return arr


def _as_labels(labels: Any, n: int, num_labels: int) -> np.ndarray:
    arr = np.asarray(labels)
    if arr.shape != (n,):
        raise ValueError(f"labels has shape {arr.shape}: pass one integer class index per pair, shape ({n},).")
    if not np.issubdtype(arr.dtype, np.integer) and not np.all(arr == np.round(arr)):
        raise TypeError(f"labels must be integer class indices, got dtype {arr.dtype}.")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= num_labels:
        raise ValueError(
            f"labels contains {int(arr.min())}..{int(arr.max())}: class indices must lie in [0, {num_labels})."
        )
    return arr


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _scaled(z: np.ndarray, temperature: float, bias: float, positive_index: int) -> np.ndarray:
    out = z / temperature
    if bias:
        out = out.copy()
        out[:, positive_index] += bias
    return out


def negative_log_likelihood(logits: Any, labels: Any, temperature: float = 1.0, bias: float = 0.0,
                            positive_index: int = 1) -> float:
    """Mean NLL of ``labels`` under ``softmax(logits / temperature + bias * e_positive)``."""
    z = _as_logits(logits)
    y = _as_labels(labels, z.shape[0], z.shape[1])
    check_scale(temperature, bias)
    return float(-_log_softmax(_scaled(z, temperature, bias, positive_index))[np.arange(z.shape[0]), y].mean())


def fit_temperature(logits: Any, labels: Any, t_min: float = T_MIN, t_max: float = T_MAX, bias: float = 0.0,
                    positive_index: int = 1) -> float:
    """The temperature that minimizes the NLL of held-out ``labels`` under ``softmax(logits / T)``.

    The NLL is convex in ``1 / T`` (a log-sum-exp of linear functions minus a linear one), hence unimodal in
    ``log T``: a golden-section search over ``log T`` in ``[log t_min, log t_max]`` finds the minimum to ~1e-6
    without extra dependencies and deterministically.

    Args:
        logits: ``(n, num_labels)`` logits or ``(n,)`` binary log-odds of held-out pairs.
        labels: ``(n,)`` class indices.
        t_min, t_max: Search interval (the fit is clipped to it).
        bias, positive_index: An entailment bias kept as it is (a Platt-calibrated head's), added to the logit of
            class ``positive_index`` after the division: the temperature is fitted with it in place.

    Returns:
        The fitted temperature ``T``; divide logits by it before the softmax.
    """
    z = _as_logits(logits)
    y = _as_labels(labels, z.shape[0], z.shape[1])
    if not 0 < t_min < t_max:
        raise ValueError(f"fit_temperature needs 0 < t_min < t_max, got t_min={t_min!r}, t_max={t_max!r}.")
    rows = np.arange(z.shape[0])

    def nll(log_t: float) -> float:
        return float(-_log_softmax(_scaled(z, math.exp(log_t), bias, positive_index))[rows, y].mean())

    lo, hi = math.log(t_min), math.log(t_max)
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = nll(a), nll(b)
    while hi - lo > 1e-7:
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = nll(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = nll(b)
    return float(math.exp((lo + hi) / 2.0))


def fit_platt(logits: Any, labels: Any, positive_index: int = 1, t_min: float = T_MIN,
              t_max: float = T_MAX) -> tuple[float, float]:
    """The temperature and entailment bias that minimize the NLL of held-out ``labels`` under
    ``softmax(logits / T + bias * e_positive)`` (Platt scaling; for a 2-way head, logistic regression on the
    log-odds).

    The NLL is convex in ``(1 / T, bias)`` (a log-sum-exp of functions linear in them minus a linear one), so
    Newton's method with a backtracking line search finds the minimum deterministically, starting from the
    uncalibrated ``(1, 0)``.

    Args:
        logits: ``(n, num_labels)`` logits or ``(n,)`` binary log-odds of held-out pairs.
        labels: ``(n,)`` class indices.
        positive_index: The entailment class, which the bias is added to.
        t_min, t_max: The temperature is clipped to this interval, the bias to ``[-BIAS_MAX, BIAS_MAX]``
            (a split that one class fills has no finite optimum).

    Returns:
        ``(temperature, bias)``.
    """
    z = _as_logits(logits)
    y = _as_labels(labels, z.shape[0], z.shape[1])
    if not 0 <= positive_index < z.shape[1]:
        raise ValueError(f"positive_index={positive_index!r} is not a class of {z.shape[1]}-way logits.")
    if not 0 < t_min < t_max:
        raise ValueError(f"fit_platt needs 0 < t_min < t_max, got t_min={t_min!r}, t_max={t_max!r}.")
    rows = np.arange(z.shape[0])
    is_pos = (y == positive_index).astype(np.float64)
    z_true = z[rows, y]

    def nll(a: float, b: float) -> float:
        return float(-_log_softmax(_scaled(z, 1.0 / a, b, positive_index))[rows, y].mean())

    lo, hi = 1.0 / t_max, 1.0 / t_min
    a, b = 1.0, 0.0
    current = nll(a, b)
    for _ in range(100):
        p = np.exp(_log_softmax(_scaled(z, 1.0 / a, b, positive_index)))
        mean_z = (p * z).sum(axis=1)
        p_pos = p[:, positive_index]
        grad = np.array([(mean_z - z_true).mean(), (p_pos - is_pos).mean()])
        h_aa = ((p * z * z).sum(axis=1) - mean_z ** 2).mean()
        h_bb = (p_pos * (1.0 - p_pos)).mean()
        h_ab = (p_pos * (z[:, positive_index] - mean_z)).mean()
        hessian = np.array([[h_aa, h_ab], [h_ab, h_bb]]) + 1e-9 * np.eye(2)
        step = np.linalg.solve(hessian, grad)
        scale = 1.0
        while scale > 1e-6:
            a_new = float(np.clip(a - scale * step[0], lo, hi))
            b_new = float(np.clip(b - scale * step[1], -BIAS_MAX, BIAS_MAX))
            trial = nll(a_new, b_new)
            if trial <= current:
                break
            scale /= 2.0
        else:
            break
        moved = abs(a_new - a) + abs(b_new - b)
        a, b, current = a_new, b_new, trial
        if moved < 1e-10:
            break
    return float(1.0 / a), float(b)


def entailment_probs_from_logits(logits: Any, positive_index: int = 1, temperature: float = 1.0,
                                 bias: float = 0.0) -> np.ndarray:
    """P(entailment) per pair: ``softmax(logits / T + bias * e_positive)[:, positive_index]``, shape ``(n,)``."""
    z = _as_logits(logits)
    if not 0 <= positive_index < z.shape[1]:
        raise ValueError(f"positive_index={positive_index!r} is not a class of {z.shape[1]}-way logits.")
    check_scale(temperature, bias)
    return np.exp(_log_softmax(_scaled(z, temperature, bias, positive_index))[:, positive_index])


def reliability_bins(probs: Any, labels: Any, n_bins: int = 15) -> dict[str, np.ndarray]:
    """Equal-width bins of P(entailment): per bin the count, mean probability and share of entailed pairs.

    Args:
        probs: ``(n,)`` probabilities of the positive (entailed) class.
        labels: ``(n,)`` 0/1, 1 = entailed.
        n_bins: Number of equal-width bins over [0, 1].

    Returns:
        ``{"edges": (n_bins + 1,), "count": (n_bins,), "confidence": (n_bins,), "frequency": (n_bins,)}``; empty
        bins have count 0 and NaN means.
    """
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if p.ndim != 1 or p.shape != y.shape or p.size == 0:
        raise ValueError(f"probs {p.shape} and labels {y.shape} must be 1-D, non-empty and of the same length.")
    if np.any((p < 0) | (p > 1)) or not np.all(np.isin(y, (0.0, 1.0))):
        raise ValueError("probs must lie in [0, 1] and labels must be 0 or 1 (1 = entailed).")
    check_bins(n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1], right=True), 0, n_bins - 1)
    count = np.bincount(which, minlength=n_bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        confidence = np.bincount(which, weights=p, minlength=n_bins) / count
        frequency = np.bincount(which, weights=y, minlength=n_bins) / count
    return {"edges": edges, "count": count, "confidence": confidence, "frequency": frequency}


def expected_calibration_error(probs: Any, labels: Any, n_bins: int = 15) -> float:
    """ECE of P(entailment): ``sum_b |B_b| / n * |mean p in b - share entailed in b|`` over equal-width bins."""
    bins = reliability_bins(probs, labels, n_bins)
    full = bins["count"] > 0
    gaps = np.abs(bins["confidence"][full] - bins["frequency"][full])
    return float((bins["count"][full] * gaps).sum() / bins["count"].sum())


@dataclass
class CalibrationReport:
    """A fitted calibration (temperature, and with ``method="platt"`` a bias) and what it did on the held-out pairs
    it was measured on. ``accuracy`` is the uncalibrated argmax's; ``accuracy_after`` counts a pair right when
    P(entailment) after calibration is above 0.5 exactly when it is entailed (a bias can move that decision)."""

    temperature: float
    ece_before: float
    ece_after: float
    nll_before: float
    nll_after: float
    accuracy: float
    num_pairs: int
    n_bins: int = 15
    bias: float = 0.0
    method: str = "temperature"
    accuracy_after: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_bins(n_bins: Any, name: str = "n_bins") -> int:
    """``n_bins`` if it is an integer in [1, :data:`MAX_BINS`], else a ValueError that names ``name``."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or not 1 <= n_bins <= MAX_BINS:
        raise ValueError(f"{name}={n_bins!r} must be an integer in [1, {MAX_BINS}], e.g. 15.")
    return int(n_bins)


def check_method(method: Any, name: str = "method") -> str:
    """``method`` if it is one of :data:`CALIBRATION_METHODS`, else a ValueError that names ``name`` and the choices."""
    if method not in CALIBRATION_METHODS:
        raise ValueError(
            f"{name}={method!r} is not a calibration method: use 'temperature' (one scale, never changes the decision) "
            "or 'platt' (scale and entailment bias, for held-out pairs entailed less or more often than the head says)."
        )
    return method


def _warn_at_limit(temperature: float, bias: float, method: str, n: int) -> None:
    """The RuntimeWarning of :func:`calibrate` for a fit clamped at the search's limits."""
    if temperature <= T_MIN * (1 + 1e-4) or (method == "platt" and abs(bias) >= BIAS_MAX * (1 - 1e-4)):
        at = f"temperature {temperature:.4g}" + (f" and bias {bias:.4g}" if method == "platt" else "")
        why = ("have no finite optimum (the head separates them perfectly, or nearly), so the fit makes it as "
               "confident as it may and this calibration is no estimate of its error rate")
    elif temperature >= T_MAX * (1 - 1e-4):
        at = f"temperature {temperature:.4g}"
        why = ("are told apart by the head's logits hardly better than by chance, so the fit squashes every score "
               "toward the same value")
    else:
        return
    warnings.warn(f"calibrate: the fitted {at} is clamped at the limit of its search (temperature in [{T_MIN}, "
                  f"{T_MAX}], bias in +-{BIAS_MAX}): the {n} pairs {why}. Calibrate on more or other held-out pairs, "
                  "or keep the head's calibration (--dry-run writes nothing).", RuntimeWarning, stacklevel=3)


def calibrate(
    logits: Any,
    labels: Any,
    positive_index: int = 1,
    n_bins: int = 15,
    temperature: float | None = None,
    method: str = "temperature",
    bias: float | None = None,
    fixed_bias: float = 0.0,
) -> CalibrationReport:
    """Fit a calibration on held-out pairs (unless one is given) and report ECE / NLL before and after.

    Args:
        logits: ``(n, num_labels)`` logits or ``(n,)`` binary log-odds.
        labels: ``(n,)`` class indices; the entailed class is ``positive_index``.
        positive_index: Index of the entailment class in the logits.
        n_bins: Bins of the ECE.
        temperature: Evaluate this temperature (and ``bias``) instead of fitting (e.g. to measure a fitted head on a
            different split).
        method: ``"temperature"`` (:func:`fit_temperature`) or ``"platt"`` (:func:`fit_platt`), when fitting.
        bias: With ``temperature``: the entailment bias to evaluate (default 0.0).
        fixed_bias: With ``method="temperature"``: the entailment bias kept (the head's own, so that refitting the
            temperature does not drop a Platt bias); the temperature is fitted with it in place.

    Returns:
        A :class:`CalibrationReport`.

    Warns:
        RuntimeWarning: A fitted temperature (or bias) at the limit of its search: the pairs have no finite optimum
            (they are separated perfectly, or nearly), and the fit makes the head as confident as it may.
    """
    z = _as_logits(logits)
    y = _as_labels(labels, z.shape[0], z.shape[1])
    check_method(method)
    check_bins(n_bins)
    if temperature is None and len(set((y == positive_index).tolist())) < 2:
        kind = "entailed" if bool(y[0] == positive_index) else "not entailed"
        raise ValueError(f"calibrate: all {len(y)} held-out pairs are {kind}: a fit needs pairs of both kinds (on one "
                         "kind the temperature runs to its bound and squashes every score); add held-out pairs of the "
                         "other kind, or evaluate a given temperature=.")
    if temperature is not None:
        t, b = float(temperature), float(bias or 0.0)
    elif bias is not None:
        raise ValueError("calibrate(bias=...) evaluates a given calibration: pass temperature= with it.")
    elif method == "platt":
        t, b = fit_platt(z, y, positive_index)
    else:
        t, b = fit_temperature(z, y, bias=float(fixed_bias), positive_index=positive_index), float(fixed_bias)
    if temperature is None:
        _warn_at_limit(t, b, method, len(y))
    entailed = (y == positive_index).astype(np.int64)
    before = entailment_probs_from_logits(z, positive_index)
    after = entailment_probs_from_logits(z, positive_index, t, b)
    return CalibrationReport(
        temperature=t,
        ece_before=expected_calibration_error(before, entailed, n_bins),
        ece_after=expected_calibration_error(after, entailed, n_bins),
        nll_before=negative_log_likelihood(z, y, positive_index=positive_index),
        nll_after=negative_log_likelihood(z, y, t, b, positive_index),
        accuracy=float((z.argmax(axis=1) == y).mean()),
        num_pairs=int(z.shape[0]),
        n_bins=n_bins,
        bias=b,
        method=method if temperature is None else ("platt" if b else "temperature"),
        accuracy_after=float(((after > 0.5) == (entailed == 1)).mean()),
    )


def reliability_diagram(
    probs_before: Any,
    labels: Any,
    path: str | Path,
    probs_after: Any | None = None,
    n_bins: int = 15,
    title: str = "Reliability of P(entailment)",
) -> Path:
    """Save a reliability diagram (PNG, or the format of ``path``'s suffix): share of entailed pairs against mean
    P(entailment) per bin.

    Args:
        probs_before: ``(n,)`` P(entailment) before calibration.
        labels: ``(n,)`` 0/1, 1 = entailed.
        path: Where to write the image, atomically (parent folders are created).
        probs_after: Optional ``(n,)`` probabilities after calibration, drawn beside the first.
        n_bins: Equal-width bins.
        title: Figure title.

    Returns:
        The written path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("before", probs_before)] + ([("after", probs_after)] if probs_after is not None else [])
    fig, axes = plt.subplots(1, len(series), figsize=(4.2 * len(series), 4.2), squeeze=False)
    for ax, (name, probs) in zip(axes[0], series):
        bins = reliability_bins(probs, labels, n_bins)
        full = bins["count"] > 0
        width = 1.0 / n_bins
        ax.bar(bins["edges"][:-1][full], bins["frequency"][full], width=width, align="edge",
               edgecolor="black", alpha=0.7, label="share entailed")
        ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
        ece = expected_calibration_error(probs, labels, n_bins)
        ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="mean P(entailment) in bin", ylabel="share entailed",
               title=f"{name}: ECE {ece:.4f}")
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    with atomic_open(path, "wb") as handle:  # appears whole or not at all
        fig.savefig(handle, format=plot_format(path), dpi=100)
    plt.close(fig)
    return path


def plot_format(path: str | Path, flag: str = "path") -> str:
    """The image format of a plot path, from its suffix (none: PNG), checked before any work: a ValueError naming
    ``flag`` and the formats matplotlib writes."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    supported = FigureCanvasBase.get_supported_filetypes()
    if suffix not in supported:
        raise ValueError(f"{flag}={str(path)!r}: matplotlib writes no '.{suffix}' images; end it in one of "
                         f"{', '.join('.' + s for s in sorted(supported))} (e.g. .png).")
    return suffix


def write_calibration(directory: str | Path, values: dict[str, Any], *, replace: bool = False) -> Path:
    """Write (or update) ``ares_calibration.json`` in ``directory``; existing keys not in ``values`` are kept, unless
    ``replace`` (a whole head's own record, as ``save_pretrained`` writes it).

    The write is atomic (a temporary file beside it replaces the file when complete; temporary files of killed runs
    are removed). A symlink in place of the file is refused: the calibration belongs to this folder, and writing
    through (or replacing) a link would change what another folder, or a hub cache snapshot, holds.

    Args:
        directory: The model / adapter folder the calibration belongs to.
        values: At least ``"temperature"`` (> 0); ``"bias"`` (the entailment bias, default 0.0) and anything else
            JSON-serializable (ECE, base model, selection...). Write ``"bias": 0.0`` with a fresh temperature fit,
            or the bias of an earlier Platt fit is kept.
        replace: Write ``values`` alone, dropping the keys of a file already there (another head's metrics,
            selection or provenance would otherwise describe this one).

    Returns:
        The path of the JSON file.

    Raises:
        ValueError: No finite temperature > 0, a merged key the loaders would reject, the file is a symlink, or the
            existing file is not a JSON object.
    """
    check_scale(values.get("temperature"), values.get("bias", 0.0), "write_calibration(values=...): ",
                ": pass the fitted value")
    path = Path(directory) / CALIBRATION_FILE
    if path.is_symlink():
        raise ValueError(
            f"{path} is a symlink (to {os.readlink(path)!r}): write_calibration never writes through or replaces a "
            "link. Copy the model folder (or remove the link) and calibrate the copy."
        )
    merged = {} if replace else _existing_calibration(path)
    merged.update(values)
    check_calibration(merged, path)  # never write a file the loaders would refuse
    write_atomic(path, json.dumps(merged, indent=2, sort_keys=True) + "\n")
    return path


def _existing_calibration(path: Path) -> dict[str, Any]:
    """The record already in ``path`` (``{}`` if none) for merging; its own temperature is about to be replaced, so
    only its form is checked (an object), not its values."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}): fix or delete it, then calibrate again.") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds a JSON {type(data).__name__}, not an object: fix or delete it.")
    return data
