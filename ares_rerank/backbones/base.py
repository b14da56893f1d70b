"""The one-method backbone protocol, a wrapper for plain functions, and output validation.

A backbone answers a batch of entailment questions: given premise lists and hypotheses, the probability that each
premise list entails its hypothesis. Everything else (masking, sampling, aggregation) lives in the estimator.

Callers that collect many pairs for one call (the estimator's waves, the baselines) gather them in a
:class:`PairBatch`, which asks each distinct pair once and says where each request's answer lies.

**Sampled backbones** (a generative verifier: a sampled rationale, then a verdict) are not a fixed function: each
call draws fresh verdicts. Such a backbone says so (``sampled = True``, :func:`is_sampled`) and answers
``sample_probs(premises, hypotheses, n)``: ``n[i]`` independent verdict probabilities for pair ``i``, each in [0, 1],
whose mean over the sampler is the pair's entailment probability (:class:`SampledBackbone`). The estimator then
takes a fresh verdict per trajectory instead of memoizing one value per input (:mod:`~ares_rerank.estimator.batch`).
:func:`call_sampler` calls one and checks its answer; :class:`SampledVerdicts` carries the verdicts with what they
cost (generated tokens, requests).
"""

from __future__ import annotations

import inspect
import itertools
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

import numpy as np


__all__ = [
    "Backbone",
    "ChainBackbone",
    "FunctionBackbone",
    "PairBatch",
    "SampledBackbone",
    "SampledVerdicts",
    "accepts_num_base",
    "call_backbone",
    "call_sampler",
    "check_pairs",
    "check_probabilities",
    "check_sample_counts",
    "is_sampled",
    "premise_selector",
]


def check_pairs(
    premises: Any, hypotheses: Any, owner: str = "entailment_probs"
) -> tuple[list[list[str]], list[str]]:
    """The ``(premises, hypotheses)`` a backbone was given, checked: one list of claim strings per hypothesis string.

    Returns:
        ``(premises, hypotheses)`` as lists (tuples and generators become lists).

    Raises:
        TypeError: a single string where a list is expected (a flat list of premises was read one character per
            premise), or a premise / hypothesis that is not text (``None`` was scored as the text "None").
        ValueError: the two lists differ in length.
    """
    if isinstance(premises, (str, bytes)) or isinstance(hypotheses, (str, bytes)):
        raise TypeError(f"{owner}(premises, hypotheses) takes a list of premise lists and a list of hypotheses, e.g. "
                        "([['It rains.']], ['The street is wet.']), not a single string.")
    premises, hypotheses = list(premises), list(hypotheses)
    if len(premises) != len(hypotheses):
        raise ValueError(f"{owner} got {len(premises)} premise lists for {len(hypotheses)} hypotheses: pass one "
                         "premise list per hypothesis.")
    out = []
    for i, (claims, hypothesis) in enumerate(zip(premises, hypotheses)):
        if isinstance(claims, (str, bytes)) or not isinstance(claims, Iterable):
            raise TypeError(f"{owner} premises[{i}]={claims!r:.80} must be a list of claims (strings): each "
                            "hypothesis gets its own list, e.g. [['It rains.'], ['It rains.', 'It is cold.']].")
        claims = list(claims)
        if not isinstance(hypothesis, str) or not all(isinstance(c, str) for c in claims):
            bad = hypothesis if not isinstance(hypothesis, str) else next(c for c in claims if not isinstance(c, str))
            raise TypeError(f"{owner} pair {i} holds {type(bad).__name__} {bad!r:.80} where text is expected: "
                            "premises and hypotheses are strings.")
        out.append(claims)
    return out, hypotheses


@runtime_checkable
class Backbone(Protocol):
    """Anything with ``entailment_probs(premises, hypotheses) -> sequence of floats in [0, 1]``.

    ``premises[i]`` is the list of included claims (in chain order, possibly empty) for ``hypotheses[i]``. The
    result must be deterministic for fixed inputs: ARES's guarantee treats it as a fixed function.

    A backbone that renders base claims and earlier steps differently (a PRM: user turn vs assistant turn) may take
    an optional keyword ``num_base: list[int]``: the first ``num_base[i]`` claims of ``premises[i]`` are base
    claims, the rest are earlier steps. The estimator and the baselines pass it whenever the method accepts it.
    """

    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> Sequence[float]: ...


@runtime_checkable
class ChainBackbone(Protocol):
    """Optional second capability: score every step of a whole chain in one pass (PRM whole-chain, LLM-Judge).

    Returns one probability per step, ``len(steps)`` values. A backbone whose model reads one value per input and so
    scores a chain one prefix at a time says ``one_pass_chain = False`` (``method="prm-chain"`` then counts one
    evaluation per step; without the attribute, one a chain).
    """

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> Sequence[float]: ...


class FunctionBackbone:
    """Wrap any callable ``fn(premises: list[list[str]], hypotheses: list[str]) -> sequence of floats``.

    Example:
        >>> overlap = FunctionBackbone(lambda P, H: [float(any(h in p for p in ps)) for ps, h in zip(P, H)])
        >>> overlap.entailment_probs([["a b", "c"]], ["c"])
        [1.0]
    """

    def __init__(self, fn: Callable[[list[list[str]], list[str]], Sequence[float]], name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionBackbone(fn=...) must be callable, got {type(fn).__name__}.")
        try:
            inspect.signature(fn).bind([], [])
        except TypeError as err:
            raise TypeError(f"FunctionBackbone(fn=...) must take (premises, hypotheses), two lists: {err}.") from None
        except ValueError:  # a builtin without a signature: checked at the first call
            pass
        self.fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)

    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> list[float]:
        """``fn``'s answer, checked: one finite probability in [0, 1] per hypothesis (:func:`check_probabilities`)."""
        premises, hypotheses = check_pairs(premises, hypotheses, f"{self!r}.entailment_probs")
        return check_probabilities(self.fn(premises, hypotheses), hypotheses, self).tolist()

    def __repr__(self) -> str:
        return f"FunctionBackbone({self.name})"


def accepts_num_base(backbone: Any) -> bool:
    """Whether ``backbone.entailment_probs`` takes the optional ``num_base`` keyword (see :class:`Backbone`)."""
    try:
        return "num_base" in inspect.signature(backbone.entailment_probs).parameters
    except (TypeError, ValueError):
        return False


def call_backbone(
    backbone: Backbone,
    premises: Sequence[Sequence[str]],
    hypotheses: Sequence[str],
    num_base: Sequence[int] | None = None,
) -> np.ndarray:
    """Call ``backbone`` once and check what it returned: one finite probability in [0, 1] per hypothesis.

    ``num_base[i]`` (how many of ``premises[i]`` are base claims) is passed on only to backbones that accept it.
    """
    if not hasattr(backbone, "entailment_probs"):
        raise TypeError(
            f"backbone={backbone!r} has no entailment_probs(premises, hypotheses) method: wrap a function with "
            "FunctionBackbone(fn) or load a model with ares_rerank.load_backbone(...)."
        )
    if not hypotheses:
        return np.zeros(0, dtype=np.float64)
    if num_base is not None and accepts_num_base(backbone):
        raw = backbone.entailment_probs(premises, hypotheses, num_base=list(num_base))
    else:
        raw = backbone.entailment_probs(premises, hypotheses)
    return check_probabilities(raw, hypotheses, backbone)


def check_probabilities(raw: Any, hypotheses: Sequence[str], backbone: Any = None) -> np.ndarray:
    """What a backbone returned as ``(len(hypotheses),)`` float64, or a clear error.

    A list, tuple, array or tensor of numbers is accepted; a mapping (whose keys iteration would read), a set (no
    order), a string, a scalar or ``None`` is a TypeError, and so is any element that is not a number (strings such
    as ``"0.5"`` included). Then one value per hypothesis, each finite and in [0, 1], or a ValueError.
    """
    who = f"backbone {backbone!r}"
    if raw is None or isinstance(raw, (str, bytes, Mapping, set, frozenset)) or not isinstance(raw, Iterable):
        raise TypeError(
            f"{who} returned {type(raw).__name__} ({_short(raw)}): return a list (or array) with one probability per "
            "(premises, hypothesis) pair, in order."
        )
    try:
        items = list(itertools.islice(raw, len(hypotheses) + 1))  # an endless iterator is read one value too far
    except TypeError as err:  # e.g. a 0-d array
        raise TypeError(f"{who} returned {type(raw).__name__} that cannot be iterated ({err}).") from err
    for i, x in enumerate(items):
        numeric = isinstance(x, (numbers.Real, np.ndarray, np.generic)) or hasattr(x, "dtype")  # + torch scalars
        if isinstance(x, (str, bytes)) or not numeric:
            raise TypeError(
                f"{who} returned non-numeric values ({type(x).__name__} {_short(x)} for pair {i}); return floats in "
                "[0, 1]."
            )
    try:
        values = np.asarray([float(x) for x in items], dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{who} returned non-numeric values ({err}); return floats in [0, 1].") from err
    if values.shape != (len(hypotheses),):
        count = f"more than {len(hypotheses)}" if values.size > len(hypotheses) else str(values.size)
        raise ValueError(
            f"{who} returned {count} values for {len(hypotheses)} hypotheses: "
            "return exactly one probability per (premises, hypothesis) pair."
        )
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0.0) | (values > 1.0))
    if bad.size:
        i = int(bad[0])
        kind = "NaN" if math.isnan(values[i]) else f"{float(values[i])!r}, outside [0, 1]"
        raise ValueError(
            f"{who} returned {kind} for pair {i} (hypothesis {hypotheses[i][:80]!r}): probabilities "
            "must be finite and in [0, 1]; apply a sigmoid/softmax to logits before returning."
        )
    return values


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PairBatch:
    """Distinct (premises, hypothesis) pairs for ONE backbone call, and where each request's answer lies.

    Each :meth:`add` returns the index of its pair's value in what :meth:`call` returns; a pair added again
    (identical text, e.g. the same step under the same premises in two candidate chains) gets the first one's index,
    so it is asked once.

    Example:
        >>> batch = PairBatch()
        >>> a, b, c = batch.add(["x"], "y", 1), batch.add(["z"], "y", 1), batch.add(["x"], "y", 1)
        >>> (a, b, c, len(batch))
        (0, 1, 0, 2)
        >>> batch.call(FunctionBackbone(lambda P, H: [0.5] * len(H))).tolist()
        [0.5, 0.5]
    """

    def __init__(self) -> None:
        self.premises: list[list[str]] = []
        self.hypotheses: list[str] = []
        self.num_base: list[int] = []  # how many of each premise list are base claims (PRMs render them apart)
        self._index: dict[Any, int] = {}

    def add(self, premises: Sequence[str], hypothesis: str, num_base: int, key: Any = None) -> int:
        """Add one pair (unless an equal one is in) and return its index.

        Args:
            premises: The claims sent to the backbone, in chain order.
            hypothesis: The judged step.
            num_base: How many of ``premises`` are base claims.
            key: What makes two pairs equal; default ``(premises, hypothesis, num_base)``. A caller that knows the
                backbone reads only part of the premises (its premise selection) passes that part, so pairs that
                differ only in unread premises are asked once (with the first one's premises).

        Returns:
            The index of the pair's value in :meth:`call`'s result.
        """
        key = (tuple(premises), hypothesis, num_base) if key is None else key
        if key not in self._index:
            self._index[key] = len(self.hypotheses)
            self.premises.append(list(premises))
            self.hypotheses.append(hypothesis)
            self.num_base.append(int(num_base))
        return self._index[key]

    def __len__(self) -> int:
        return len(self.hypotheses)

    def call(self, backbone: Backbone) -> np.ndarray:
        """One :func:`call_backbone` over every distinct pair: ``(len(self),)`` checked probabilities."""
        return call_backbone(backbone, self.premises, self.hypotheses, self.num_base)


def premise_selector(backbone: Any) -> Callable[[Sequence[str], str], list[int]] | None:
    """The premise selector a backbone applies before it reads premises (its ``selector`` attribute), or ``None``."""
    selector = getattr(backbone, "selector", None)
    return selector if callable(selector) else None


# -- sampled backbones (generative verifiers) ---------------------------------------------------------------------
@runtime_checkable
class SampledBackbone(Protocol):
    """A backbone whose verdict is a random variable: ``sampled = True`` and ``sample_probs``.

    ``sample_probs(premises, hypotheses, n)`` returns, per pair ``i``, ``n[i]`` independent verdict probabilities
    (``P(Yes | rationale)`` of a freshly sampled rationale, each in [0, 1]); the pair's entailment probability is
    their expectation. Independence is across every sample of every call: a backbone must never return a stored
    verdict for a pair it was asked before. The ``num_base`` keyword (see :class:`Backbone`) is optional as there.
    A backbone may also offer ``sample_verdicts(premises, hypotheses, n, num_base=None) -> SampledVerdicts`` to
    report what the verdicts cost (generated tokens, requests); :func:`call_sampler` uses it when present.
    """

    sampled: bool

    def sample_probs(
        self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], n: Sequence[int] | int
    ) -> Sequence[Sequence[float]]: ...


@dataclass
class SampledVerdicts:
    """What one :func:`call_sampler` call returned: fresh verdict probabilities per pair, and their cost.

    Attributes:
        probs: Per pair, a ``(n[i],)`` float64 array of verdict probabilities in [0, 1].
        generated_tokens: Per pair, tokens the verifier generated for its samples (rationales and verdicts).
        requests: Per pair, model calls (local) or HTTP requests (served) its samples took.
    """

    probs: list[np.ndarray]
    generated_tokens: list[int] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)


def is_sampled(backbone: Any) -> bool:
    """Whether ``backbone`` declares sampled verdicts (``sampled = True`` and a ``sample_probs`` method)."""
    return getattr(backbone, "sampled", False) is True and callable(getattr(backbone, "sample_probs", None))


def check_sample_counts(n: Any, num_pairs: int, owner: str = "sample_probs") -> list[int]:
    """``n`` (one int for every pair, or one per pair) as a list of ``num_pairs`` positive ints, or a clear error."""
    if isinstance(n, bool):
        raise TypeError(f"{owner}(n={n!r}) takes a positive integer or one per pair, not a bool.")
    if isinstance(n, numbers.Integral):
        counts = [int(n)] * num_pairs
    elif isinstance(n, Iterable) and not isinstance(n, (str, bytes, Mapping)):
        counts = list(n)
        if len(counts) != num_pairs or not all(isinstance(c, numbers.Integral) and not isinstance(c, bool)
                                               for c in counts):
            raise ValueError(f"{owner}(n=...) needs one integer per pair: {len(counts)} given for {num_pairs} pairs.")
        counts = [int(c) for c in counts]
    else:
        raise TypeError(f"{owner}(n={n!r:.60}) takes a positive integer or a list of them, one per pair.")
    bad = [c for c in counts if c < 1]
    if bad:
        raise ValueError(f"{owner}(n=...) has {bad[0]}: every pair needs at least one verdict sample (n >= 1).")
    return counts


def _verdict_arrays(probs: list[Any], counts: list[int]) -> list[np.ndarray] | None:
    """Every pair's verdicts as float64 arrays when all are 1-D real numpy arrays of the asked sizes, finite and in
    [0, 1] (checked at once: a wave may carry hundreds of thousands of verdicts); ``None`` otherwise."""
    if not all(isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind in "fiub" for v in probs):
        return None
    if [len(v) for v in probs] != counts:
        return None
    flat = np.concatenate(probs).astype(np.float64) if probs else np.zeros(0)
    if not bool(np.all(np.isfinite(flat) & (flat >= 0.0) & (flat <= 1.0))):
        return None
    return np.split(flat, np.cumsum(counts)[:-1])


def call_sampler(
    backbone: Any,
    premises: Sequence[Sequence[str]],
    hypotheses: Sequence[str],
    n: Sequence[int],
    num_base: Sequence[int] | None = None,
) -> SampledVerdicts:
    """Ask a sampled backbone for ``n[i]`` fresh verdicts of pair ``i``, in ONE call, and check the answer.

    ``sample_verdicts`` is called when the backbone has it (its costs are kept), else ``sample_probs`` (costs 0);
    ``num_base`` goes to backbones that accept it. Each pair's values must be ``n[i]`` finite numbers in [0, 1].
    """
    counts = check_sample_counts(n, len(hypotheses))
    if not hypotheses:
        return SampledVerdicts([], [], [])
    method = getattr(backbone, "sample_verdicts", None)
    rich = callable(method)
    method = method if rich else backbone.sample_probs
    try:
        takes_base = "num_base" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        takes_base = False
    kwargs = {"num_base": list(num_base)} if num_base is not None and takes_base else {}
    raw = method(premises, hypotheses, counts, **kwargs)
    probs = raw.probs if rich else raw
    if isinstance(probs, (str, bytes, Mapping)) or not isinstance(probs, Iterable):
        raise TypeError(f"sampled backbone {backbone!r} returned {type(probs).__name__}: return one sequence of "
                        "verdict probabilities per pair.")
    probs = list(probs)
    if len(probs) != len(hypotheses):
        raise ValueError(f"sampled backbone {backbone!r} returned verdicts for {len(probs)} pairs, asked for "
                         f"{len(hypotheses)}: return one sequence per pair.")
    checked = _verdict_arrays(probs, counts)
    if checked is None:  # not all real arrays of the right sizes and values: checked one by one, with the message
        checked = [check_probabilities(values, [hypotheses[i]] * count, backbone)
                   for i, (values, count) in enumerate(zip(probs, counts))]
    if not rich:
        return SampledVerdicts(checked, [0] * len(checked), [0] * len(checked))
    tokens, requests = list(raw.generated_tokens or [0] * len(checked)), list(raw.requests or [0] * len(checked))
    if len(tokens) != len(checked) or len(requests) != len(checked):
        raise ValueError(f"sampled backbone {backbone!r} reported costs for {len(tokens)} / {len(requests)} pairs, "
                         f"asked for {len(checked)}: report one count per pair.")
    return SampledVerdicts(checked, [int(t) for t in tokens], [int(r) for r in requests])
