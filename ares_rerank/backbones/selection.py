"""Premise selection: which of the included claims a backbone actually reads when it judges a hypothesis.

A stage of its own, between the ARES mask and the backbone: ``selector(claims, hypothesis) -> indices`` picks a
subset of the included claims, kept in their original order.

- ``all``: every included claim.
- ``relevant``: only the claims that share a distinctive token with the hypothesis (a state name such as ``D8``,
  a number, a variable; a content word when the hypothesis has no symbol), or that state nothing the hypothesis does
  not name, optionally capped at ``top_k`` (:meth:`RelevancePlan.ranked`).
- ``relevant-words``: the same, except that a bare number is a quantity ("1/4 cup"), not a name, a claim written
  without names is matched by its words even when the hypothesis has names, and a cap ranks by each claim's whole
  text (for recipe-like text).
- ``fit``: every claim, most relevant first, until a token budget is full (the window policy of the Hugging Face
  backbones uses the same ranking as ``relevant``, see :func:`fit_indices`).

Relevance is lexical (:func:`relevance_scores`). Under ``relevant``, when the hypothesis contains a symbol (``D8``,
``AZ``, ``3x``, ``x``, ``42``), only symbols count, so template words never make a claim relevant; otherwise content
words do. A token counts only when it is distinctive (in at most ``max(3, n/4)`` of the n claims), weighted
``log(1 + n / df)``, except in a claim whose every token the hypothesis names: a short fact the hypothesis cites
(``We have onion.``) is a premise however often its words recur. ``top_k`` keeps such claims first, then the highest
score times the share of the claim's tokens the hypothesis names. Under ``relevant-words`` "such claims" and "the
share" read the claim's whole text, words included, while its score still counts only its names: a recipe rule that
shares only ``START`` and a ``1`` with the step scores like the step's own rule, but the step's own rule restates it
(and ``We now START.`` is named entirely, where the other rule is not). No model, no randomness.

Why two rules: CaptainCookRecipes steps read "... we can now do the step Cut-Cut 1/8 garlic clove." Under
``relevant`` the numbers switch words off, so the step's rule, its previous steps and its ingredient claims are
dropped: the recipe oracle behind ``relevant:6`` reaches macro-F1 0.456 on held-out recipes, behind
``relevant-words:6`` 1.000 (0.962 while its cap ranked by names alone). On math text (PRMBench) ``relevant-words``
lets many more claims be selected, which doubled the distinct inputs ARES sends the shipped head (7,019 encoder pairs
on a 20-chain sample, against about 3,700). ClaimTrees selections are the same under both rules for caps of 6 or
more, and of 4 with symbol names (training/README.md, "Issue 17: premise selection for recipes"); at 3 the
whole-text ranking keeps what each step needs, the names-only one does not. Heads record the rule they were trained
with in ``ares_calibration.json``.

Why it is safe for ARES: every selector is a deterministic function of (included claims, hypothesis), so the
backbone composed with it is again a fixed function ``E'(premises, hypothesis)`` and the estimator's guarantee holds
for ``E'`` unchanged. Two masks whose selected sets coincide render the same input, so they cost one evaluation.

**Selection plans.** A selector may also offer ``plan(claims, hypothesis) -> SelectionPlan``: how it acts on every
subset of one claim list. ``RelevantPremises`` does: its choice on a subset S depends only on ``S & plan.support``
(the claims sharing a token with the hypothesis) and on ``|S|``. The estimator uses plans to project each premise
mask onto what the backbone will read before it builds any premise list, so masks that select the same premises are
one evaluation and cost no per-mask Python work (:func:`premise_selector` finds a backbone's selector).

Why selection matters: on ClaimTrees a MiniLM head learned nothing from raw premises and
0.989 pair accuracy once premises were cut to the claims sharing a symbol with the step (FINDINGS.md).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from typing import Callable, Protocol, Sequence, runtime_checkable

from ..utils.checks import check_positive_int, is_int
from .base import Backbone, call_backbone, check_pairs, premise_selector


__all__ = [
    "AllPremises",
    "FitPremises",
    "PremiseSelector",
    "RelevancePlan",
    "RelevantPremises",
    "SelectingBackbone",
    "SelectionPlan",
    "fit_indices",
    "get_selector",
    "premise_selector",
    "relevance_scores",
]

_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_STOP_WORDS = frozenset(
    "a an and are as at be been but by can could did do does for from had has have he her his i if in into is it its "
    "me my no not now of on or our she so such than that the their them then there these they this to was we were "
    "what when where which while who will with would you your".split()
)


def _is_symbol(token: str) -> bool:
    """A name rather than a word: has a digit (``D8``, ``3x``, ``42``), two capitals (``AZ``), or is one letter."""
    return (
        any(c.isdigit() for c in token)
        or sum(c.isupper() for c in token) >= 2
        or (len(token) == 1 and token.lower() not in ("a", "i"))
    )


def _is_name(token: str) -> bool:
    """A symbol with a letter (``D8``, ``AZ``, ``x``, ``START``); a bare number (``1``, ``30``) is a quantity."""
    return _is_symbol(token) and not token.isdigit()


@functools.lru_cache(maxsize=1 << 16)
def _has_name(text: str) -> bool:
    """Whether a text names something with a symbol (then symbols, not its words, say what it is about)."""
    return any(_is_name(t) for t in _TOKEN.findall(text))


@functools.lru_cache(maxsize=1 << 16)
def _tokens(text: str, symbols_only: bool) -> frozenset[str]:
    """The distinctive-token candidates of one text (cached: the same claims are read for every mask and step)."""
    out = set()
    for token in _TOKEN.findall(text):
        if _is_symbol(token):
            out.add(token.lower())
        elif not symbols_only and token.lower() not in _STOP_WORDS:
            out.add(token.lower())
    return frozenset(out)


@runtime_checkable
class SelectionPlan(Protocol):
    """How a selector acts on every subset S of one claim list, for one hypothesis.

    Attributes:
        support: Ascending indices of the claims that can be selected or change the choice; for any subset S, the
            selection depends only on ``S & support`` (and on ``|S|`` when ``uses_count``).
        uses_count: Whether the number of included claims matters too.
    """

    support: tuple[int, ...]
    uses_count: bool

    def select(self, present: Sequence[int], num_included: int) -> list[int]:
        """The kept claims (ascending indices into the plan's claim list) when ``present`` (ascending indices in
        ``support``) are the included supporting claims and ``num_included`` claims are included in all."""
        ...


class RelevancePlan:
    """The relevance rule of :func:`relevance_scores` for one (claim list, hypothesis), on any subset of the claims.

    Each claim's tokens shared with the hypothesis are found once; scoring a subset is then a few set operations on
    the claims in :attr:`support` alone. ``top_k`` caps the kept claims (``None``: keep every relevant one), ranked
    by :meth:`ranked`.
    """

    uses_count = True

    def __init__(self, claims: Sequence[str], hypothesis: str, top_k: int | None = None, words: bool = False) -> None:
        hyp = _tokens(hypothesis, False)
        if words:  # names switch words off only between texts that both have one; bare numbers are quantities
            named = _has_name(hypothesis)
            own = [_tokens(c, named and _has_name(c)) for c in claims]
        else:  # any symbol in the hypothesis (numbers included) switches words off for every claim
            symbols_only = any(_is_symbol(t) for t in _TOKEN.findall(hypothesis))
            own = [_tokens(c, symbols_only) for c in claims]
        self.shared = [sorted(tokens & hyp) for tokens in own]  # summed in one fixed order
        # a claim that states nothing the hypothesis does not name: every shared token counts
        self.stated = [bool(tokens) and tokens <= hyp for tokens in own]
        # how a cap ranks: claims that state nothing else first, then by the share of their tokens the hypothesis
        # names. Under ``words`` both read the claim's whole text: a named claim's words never make it relevant,
        # but a recipe rule that only shares "START" and "1" with the step is not the step's own rule
        ranked_by = [_tokens(c, False) for c in claims] if words else own
        self.first = [bool(tokens) and tokens <= hyp for tokens in ranked_by]
        self.coverage = [len(tokens & hyp) / len(tokens) if tokens else 0.0 for tokens in ranked_by]
        self.support = tuple(i for i, tokens in enumerate(self.shared) if tokens)
        self.top_k = top_k

    def scores(self, present: Sequence[int], num_included: int) -> dict[int, float]:
        """Relevance of each claim in ``present`` when ``num_included`` claims are included in all."""
        present = [i for i in present if self.shared[i]]
        df = Counter(t for i in present for t in self.shared[i])
        n = num_included
        limit = max(3.0, n / 4.0)
        return {i: sum(math.log(1.0 + n / df[t]) for t in self.shared[i] if self.stated[i] or df[t] <= limit)
                for i in present}

    def ranked(self, present: Sequence[int], num_included: int) -> list[int]:
        """The relevant claims of ``present`` (score > 0), best first: claims the hypothesis names entirely, then
        by score times the share of the claim's own tokens the hypothesis names (under ``words``: of every token of
        its text, words included); ties keep the original order."""
        scores = self.scores(present, num_included)
        return sorted((i for i, s in scores.items() if s > 0),
                      key=lambda i: (not self.first[i], -scores[i] * self.coverage[i], i))

    def select(self, present: Sequence[int], num_included: int) -> list[int]:
        order = self.ranked(present, num_included)
        return sorted(order[: self.top_k] if self.top_k is not None else order)


def relevance_scores(claims: Sequence[str], hypothesis: str) -> list[float]:
    """IDF-weighted overlap of each claim's distinctive tokens with the hypothesis (0 = shares nothing distinctive).

    The ``relevant`` rule. Tokens are symbols (a digit, two capitals or a single letter: ``D8``, ``AZ``, ``3x``,
    ``x``, ``42``) and words (the rest, minus stop words), lower-cased. When the hypothesis contains a symbol, only
    symbols count (so template words never make a claim relevant); otherwise words do. A token is distinctive when it
    occurs in at most ``max(3, n / 4)`` of the n claims; in a claim whose every token the hypothesis names, all its
    tokens count.

    Args:
        claims: The candidate premises.
        hypothesis: The claim being judged.

    Returns:
        One non-negative score per claim, ``sum log(1 + n / df)`` over shared distinctive tokens; a function of
        ``(claims, hypothesis)`` only.
    """
    scores = RelevancePlan(claims, hypothesis).scores(range(len(claims)), len(claims))
    return [scores.get(i, 0.0) for i in range(len(claims))]


def _ranked(claims: Sequence[str], hypothesis: str) -> list[int]:
    """Claim indices, most relevant first (the order ``top_k`` cuts, :meth:`RelevancePlan.ranked`), then the rest in
    their original order."""
    first = RelevancePlan(claims, hypothesis).ranked(range(len(claims)), len(claims))
    return first + sorted(set(range(len(claims))) - set(first))


def fit_indices(
    claims: Sequence[str], hypothesis: str, lengths: Sequence[int], budget: int
) -> list[int]:
    """Keep claims most relevant first while their summed ``lengths`` stay within ``budget``; original order.

    A claim that does not fit is skipped and smaller, less relevant ones may still fill the space.

    Args:
        claims: The candidate premises.
        hypothesis: The claim being judged (used only to rank).
        lengths: The cost of each claim (e.g. its token count), same length as ``claims``.
        budget: The total cost allowed.

    Returns:
        The kept indices, ascending.
    """
    if len(lengths) != len(claims):
        raise ValueError(f"fit_indices got {len(lengths)} lengths for {len(claims)} claims: pass one per claim.")
    kept, used = [], 0
    for i in _ranked(claims, hypothesis):
        if used + lengths[i] <= budget:
            kept.append(i)
            used += lengths[i]
    return sorted(kept)


@runtime_checkable
class PremiseSelector(Protocol):
    """``selector(claims, hypothesis) -> ascending indices of the claims to keep``; must be deterministic."""

    def __call__(self, claims: Sequence[str], hypothesis: str) -> list[int]: ...


class AllPremises:
    """Keep every included claim (the identity selection)."""

    name = "all"

    def __call__(self, claims: Sequence[str], hypothesis: str) -> list[int]:
        return list(range(len(claims)))

    def __repr__(self) -> str:
        return "AllPremises()"


class RelevantPremises:
    """Keep the claims that share a distinctive token with the hypothesis, at most ``top_k`` of them.

    Args:
        top_k: Keep at most this many (the highest-scoring; ties by position). ``None`` keeps every relevant claim.
        words: The ``relevant-words`` rule (module docstring): bare numbers are quantities and a claim without names
            is matched by its words. For recipe-like text; on math it widens what can be selected (about 2x the ARES
            inputs on PRMBench), so ``relevant`` keeps the symbols-only rule heads were trained with.
    """

    def __init__(self, top_k: int | None = None, words: bool = False) -> None:
        check_positive_int(top_k, "RelevantPremises(top_k", allow_none=True)
        self.top_k, self.words = top_k, bool(words)
        self.name = "relevant-words" if self.words else "relevant"

    def __call__(self, claims: Sequence[str], hypothesis: str) -> list[int]:
        return self.plan(claims, hypothesis).select(range(len(claims)), len(claims))

    def plan(self, claims: Sequence[str], hypothesis: str) -> RelevancePlan:
        """This selector on every subset of ``claims`` (see :class:`SelectionPlan`); ``__call__`` goes through it."""
        return RelevancePlan(claims, hypothesis, self.top_k, self.words)

    def __repr__(self) -> str:
        return f"RelevantPremises(top_k={self.top_k}, words={self.words})"


class FitPremises:
    """Keep claims most relevant first until ``max_tokens`` is used up (original order kept).

    Args:
        max_tokens: Budget for the premises, in units of ``count_tokens``.
        count_tokens: Cost of one claim; default: its number of whitespace-separated words. Pass a tokenizer's
            length, e.g. ``lambda s: len(tok.encode(s, add_special_tokens=False))``, to budget in model tokens.

    The Hugging Face backbones apply this policy themselves with their own tokenizer and window, so with them
    ``"fit"`` and ``"all"`` coincide; this class is for other backbones (e.g. a :class:`FunctionBackbone` around an
    API with a context limit).
    """

    name = "fit"

    def __init__(self, max_tokens: int, count_tokens: Callable[[str], int] | None = None) -> None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
            raise ValueError(f"FitPremises(max_tokens={max_tokens!r}) must be a non-negative integer, e.g. 400.")
        if count_tokens is not None and not callable(count_tokens):
            raise TypeError(f"FitPremises(count_tokens=...) must be callable, got {type(count_tokens).__name__}.")
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens or (lambda s: len(s.split()))

    def __call__(self, claims: Sequence[str], hypothesis: str) -> list[int]:
        return fit_indices(claims, hypothesis, [self.count_tokens(c) for c in claims], self.max_tokens)

    def __repr__(self) -> str:
        return f"FitPremises(max_tokens={self.max_tokens})"


def get_selector(spec: str | PremiseSelector | None) -> PremiseSelector:
    """Turn ``"all"``, ``"relevant"``, ``"relevant:K"`` (top-k), ``"relevant-words"`` / ``"relevant-words:K"``, a
    selector or a callable into a selector.

    ``"fit"`` needs a budget: pass ``FitPremises(max_tokens)`` (or, with a Hugging Face backbone, ``"all"``: its
    window policy already fills the window most relevant first).
    """
    if spec is None or spec == "all":
        return AllPremises()
    if isinstance(spec, str):
        for prefix, words in (("relevant", False), ("relevant-words", True)):
            if spec == prefix:
                return RelevantPremises(words=words)
            cap = spec[len(prefix) + 1 :]
            if spec.startswith(prefix + ":") and cap.isdigit() and int(cap) > 0:
                return RelevantPremises(top_k=int(cap), words=words)
        if spec == "fit":
            raise ValueError(
                "premise_selection='fit' needs a token budget: pass FitPremises(max_tokens=...) (with a Hugging Face "
                "backbone use 'all': its window policy fills the window most relevant first)."
            )
        raise ValueError(
            f"premise_selection={spec!r} is unknown: use 'all', 'relevant', 'relevant:K' (top K), 'relevant-words', "
            "'relevant-words:K', "
            "FitPremises(max_tokens) or a callable (claims, hypothesis) -> indices."
        )
    if callable(spec):
        return spec
    raise TypeError(f"premise_selection must be a string or a callable selector, got {type(spec).__name__}.")


def apply_selector(selector: PremiseSelector, claims: Sequence[str], hypothesis: str) -> list[int]:
    """Call ``selector`` and check it returned ascending, distinct, in-range indices."""
    returned = selector(claims, hypothesis)
    if returned is None or isinstance(returned, (str, bytes)) or not hasattr(returned, "__iter__"):
        raise TypeError(f"premise selector {selector!r} returned {returned!r:.80}: return a list of indices into the "
                        "claims, e.g. [0, 2].")
    returned = list(returned)
    if not all(is_int(i) for i in returned):
        raise TypeError(f"premise selector {selector!r} returned {returned!r:.80}: return indices (ints) into the "
                        "claims, not a mask of booleans or other values, e.g. [0, 2].")
    kept = [int(i) for i in returned]
    if kept != sorted(set(kept)) or (kept and (kept[0] < 0 or kept[-1] >= len(claims))):
        raise ValueError(
            f"premise selector {selector!r} returned {kept!r} for {len(claims)} claims: return ascending, distinct "
            "indices into the claims (selection must keep the original order)."
        )
    return kept


class SelectingBackbone:
    """Wrap any backbone so it sees only the selected premises: ``E'(P, h) = E(select(P, h), h)``.

    Deterministic selection keeps ARES's guarantee (``E'`` is a fixed function). Other attributes, including
    ``chain_step_probs`` for whole-chain baselines (which see the full chain, unselected), are forwarded.

    Args:
        backbone: Any object with ``entailment_probs``.
        selector: ``"all"``, ``"relevant"``, ``"relevant:K"``, a :class:`FitPremises` or a callable selector.

    Example:
        >>> from ares_rerank import FunctionBackbone
        >>> seen = FunctionBackbone(lambda P, H: [len(p) / 10 for p in P])
        >>> SelectingBackbone(seen, "relevant").entailment_probs([["x is 3", "the sky is blue"]], ["x + 1 is 4"])
        [0.1]
    """

    def __init__(self, backbone: Backbone, selector: str | PremiseSelector = "relevant") -> None:
        if not hasattr(backbone, "entailment_probs"):
            raise TypeError(
                f"SelectingBackbone(backbone={backbone!r}) has no entailment_probs method: wrap a function with "
                "FunctionBackbone(fn) or load a model with ares_rerank.load_backbone(...)."
            )
        self.backbone = backbone
        self.selector = get_selector(selector)

    def entailment_probs(
        self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], num_base: Sequence[int] | None = None
    ) -> list[float]:
        """Select premises, then ask the wrapped backbone; ``num_base`` (base claims first) is recounted after
        selection and passed on to backbones that take it."""
        premises, hypotheses = check_pairs(premises, hypotheses, "SelectingBackbone.entailment_probs")
        if num_base is not None:
            num_base = list(num_base)
            if len(num_base) != len(premises) or not all(
                    is_int(n) and 0 <= n <= len(claims)
                    for n, claims in zip(num_base, premises)):
                raise ValueError(f"SelectingBackbone.entailment_probs: num_base={num_base!r:.80} must hold one count "
                                 f"per premise list ({len(premises)}), each between 0 and that list's length.")
        selected, kept_base = [], []
        for i, (claims, hypothesis) in enumerate(zip(premises, hypotheses)):
            kept = apply_selector(self.selector, claims, hypothesis)
            selected.append([claims[j] for j in kept])
            if num_base is not None:
                kept_base.append(sum(1 for j in kept if j < num_base[i]))
        counts = kept_base if num_base is not None else None
        return call_backbone(self.backbone, selected, list(hypotheses), counts).tolist()

    def __getattr__(self, name: str):
        if name == "backbone":  # not yet set (e.g. during unpickling): avoid infinite recursion
            raise AttributeError(name)
        return getattr(self.backbone, name)

    def __repr__(self) -> str:
        return f"SelectingBackbone({self.backbone!r}, {self.selector!r})"
