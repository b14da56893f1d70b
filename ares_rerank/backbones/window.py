"""The window policy of the Hugging Face backbones: what is rendered when a pair does not fit the model's window.

The hypothesis is never cut unless asked: when the premises do not fit, they are ranked by lexical relevance to the
hypothesis (:func:`~ares_rerank.backbones.selection.fit_indices`) and kept most relevant first, in their original
order, and the drop is counted in the backbone's ``stats``; a hypothesis that alone exceeds the window is an error, or
with ``overlong_steps="truncate"`` is cut to its first tokens that fit (with no premises), counted likewise.

:class:`TokenWindow` is a mixin of :class:`~ares_rerank.backbones.hf.HFBackbone`: it reads the backbone's
``tokenizer``, ``max_length``, ``overlong_steps`` and ``stats``, and renders through a ``render(claims, roles,
hypothesis, kept)`` callable (the backbone's own by default), so every subclass (NLI head, PRM, judge) keeps one
policy.
"""

from __future__ import annotations

from typing import Any

from .selection import fit_indices


__all__ = ["TokenWindow"]

_MAX_REMEMBERED_CLAIMS = 200_000  # token counts of claims kept for the length estimates (cleared when full)


class TokenWindow:
    """Fit a rendered pair into ``max_length`` tokens: :meth:`fit_window`."""

    def fit_window(
        self, claims: list[str], roles: tuple | None, hypothesis: str, reserve: int = 0, render: Any = None
    ) -> dict[str, Any]:
        """Render with every claim if it fits ``max_length - reserve``; else keep the most relevant that fit.

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
        # Estimated cost: each claim's tokens plus one newline between claims; the loop below corrects the estimate.
        sep = self._separator_cost()
        lengths = [self._claim_length(c) + sep for c in claims]
        budget = window - len(bare["input_ids"]) + sep
        while True:
            kept = fit_indices(claims, hypothesis, lengths, budget)
            item = render(claims, roles, hypothesis, kept)
            if len(item["input_ids"]) <= window:
                break
            budget -= len(item["input_ids"]) - window  # the estimate was short (merges at joins): shrink and retry
        self.stats.pairs_windowed += 1
        self.stats.premises_dropped += len(claims) - len(kept)
        return item

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
