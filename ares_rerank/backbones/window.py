"""The window policy of the Hugging Face backbones: what is rendered when a pair does not fit the model's window.

The hypothesis is never cut unless asked. When the premises do not all fit, the backbone's ``window`` option
(:data:`WINDOW_CHOICES`) decides, and every drop is counted in the backbone's ``stats``:

- ``"relevant"`` (the default): the premises are ranked by lexical relevance to the hypothesis
  (:func:`~ares_rerank.backbones.selection.fit_indices`) and kept most relevant first, in their original order;
- ``"truncate"``: the earliest premises are dropped first and the latest that fit are kept (a suffix of the chain).
  ARES's premise masks make that safe: each mask is a subset of the earlier claims, any subset is a valid input, and
  the claims nearest the judged step are the ones it most often rests on; long reasoning traces past a PRM's window
  (Qwen-layout PRMs: 4,096 tokens) keep their latest steps;
- ``"refuse"``: a ValueError with the counts, naming this option, and nothing is scored on a cut input.

A hypothesis that alone exceeds the window is an error, or with ``overlong_steps="truncate"`` is cut to its first
tokens that fit (with no premises), counted likewise.

:class:`TokenWindow` is a mixin of :class:`~ares_rerank.backbones.hf.HFBackbone`: it reads the backbone's
``tokenizer``, ``max_length``, ``overlong_steps``, ``window`` and ``stats``, and renders through a
``render(claims, roles, hypothesis, kept)`` callable (the backbone's own by default), so every subclass (NLI head,
PRM, judge) keeps one policy.
"""

from __future__ import annotations

from typing import Any

from .selection import fit_indices


__all__ = ["WINDOW_CHOICES", "TokenWindow", "check_window"]

#: The ``window`` option's values: what to drop when the premises do not all fit (the module docstring).
WINDOW_CHOICES = ("relevant", "truncate", "refuse")

_MAX_REMEMBERED_CLAIMS = 200_000  # token counts of claims kept for the length estimates (cleared when full)


def check_window(window: str) -> str:
    """``window`` itself if it is one of :data:`WINDOW_CHOICES`, else a ValueError naming the choices."""
    if window not in WINDOW_CHOICES:
        raise ValueError(f"window={window!r} is unknown: use 'relevant' (keep the premises most relevant to the step "
                         "that fit), 'truncate' (drop the earliest premises first) or 'refuse' (an error "
                         "when they do not all fit).")
    return window


class TokenWindow:
    """Fit a rendered pair into ``max_length`` tokens: :meth:`fit_window`."""

    def fit_window(
        self, claims: list[str], roles: tuple | None, hypothesis: str, reserve: int = 0, render: Any = None
    ) -> dict[str, Any]:
        """Render with every claim if it fits ``max_length - reserve``; else drop premises as ``self.window`` says.

        ``render(claims, roles, hypothesis, kept)`` defaults to the backbone's ``_render``; ``reserve`` keeps room
        for tokens added after the rendered input (a judge's generated answer).
        """
        render = render or self._render
        window = self.max_length - reserve
        item = render(claims, roles, hypothesis, list(range(len(claims))))
        if len(item["input_ids"]) <= window:
            return item
        bare = render(claims, roles, hypothesis, [])
        if len(bare["input_ids"]) > window:
            if self.overlong_steps != "truncate":
                raise ValueError(
                    f"hypothesis {hypothesis[:80]!r} needs {len(bare['input_ids'])} tokens with no premises, more than "
                    f"the model's window of {window}: the hypothesis is not cut unless asked. Split the step into "
                    "shorter steps, use a model with a longer window (or raise max_length if the model supports it), "
                    "or pass overlong_steps='truncate' to score its first tokens that fit."
                )
            return self._truncated(claims, roles, hypothesis, window, render, len(bare["input_ids"]))
        policy = self.window
        if policy == "refuse":
            raise ValueError(
                f"the input for hypothesis {hypothesis[:80]!r} needs {len(item['input_ids'])} tokens with its "
                f"{len(claims)} premises, more than the model's window of {window} ({len(bare['input_ids'])} with "
                "none), and window='refuse' drops none: pass window='truncate' (drop the earliest premises first) or "
                "'relevant' (keep the most relevant that fit), a premise_selection, or a larger max_length if the "
                "model takes it."
            )
        if policy == "truncate":
            item, kept = self._latest_that_fit(claims, roles, hypothesis, window, render)
        else:
            item, kept = self._most_relevant_that_fit(claims, roles, hypothesis, window, render, len(bare["input_ids"]))
        self.stats.pairs_windowed += 1
        self.stats.premises_dropped += len(claims) - len(kept)
        return item

    def _latest_that_fit(self, claims: list[str], roles: tuple | None, hypothesis: str, window: int,
                         render: Any) -> tuple[dict[str, Any], list[int]]:
        """The longest suffix of the claims whose rendering fits (binary search: fewer claims never render longer
        here, and an empty suffix fits, which the caller checked)."""
        low, high = 1, len(claims)  # the first kept index: ``high`` (none kept) fits, ``0`` (all kept) does not
        while low < high:
            middle = (low + high) // 2
            if len(render(claims, roles, hypothesis, list(range(middle, len(claims))))["input_ids"]) <= window:
                high = middle
            else:
                low = middle + 1
        kept = list(range(high, len(claims)))
        return render(claims, roles, hypothesis, kept), kept

    def _most_relevant_that_fit(self, claims: list[str], roles: tuple | None, hypothesis: str, window: int,
                                render: Any, bare: int) -> tuple[dict[str, Any], list[int]]:
        # Estimated cost: each claim's tokens plus one newline between claims; the loop below corrects the estimate.
        sep = self._separator_cost()
        lengths = [self._claim_length(c) + sep for c in claims]
        budget = window - bare + sep
        while True:
            kept = fit_indices(claims, hypothesis, lengths, budget)
            item = render(claims, roles, hypothesis, kept)
            if len(item["input_ids"]) <= window:
                return item, kept
            budget -= len(item["input_ids"]) - window  # the estimate was short (merges at joins): shrink and retry

    def _claim_length(self, claim: str) -> int:
        lengths = self.__dict__.setdefault("_claim_lengths", {})
        if claim not in lengths:
            if len(lengths) > _MAX_REMEMBERED_CLAIMS:
                lengths.clear()
            lengths[claim] = len(self.tokenizer.encode(claim, add_special_tokens=False, verbose=False))
        return lengths[claim]

    def _separator_cost(self) -> int:
        """Tokens a newline adds between two claims (1 for byte-level BPE, 0 for WordPiece)."""
        if not hasattr(self, "_sep_cost"):
            def count(text: str) -> int:
                return len(self.tokenizer.encode(text, add_special_tokens=False, verbose=False))

            self._sep_cost = max(0, count("a\nb") - count("a") - count("b"))
        return self._sep_cost

    def _truncated(self, claims: list[str], roles: tuple | None, hypothesis: str, window: int, render: Any,
                   length: int) -> dict[str, Any]:
        """The hypothesis cut to its first tokens that fit the window alone (no premises); counted in stats."""
        ids = self.tokenizer.encode(hypothesis, add_special_tokens=False)
        keep = len(ids)
        while length > window and keep > 0:
            keep = max(0, keep - (length - window))
            item = render(claims, roles, self.tokenizer.decode(ids[:keep]), [])
            length = len(item["input_ids"])
        if length > window:
            raise ValueError(f"the model's window of {window} tokens cannot hold even an empty hypothesis.")
        self.stats.hypotheses_truncated += 1
        self.stats.premises_dropped += len(claims)
        return item
