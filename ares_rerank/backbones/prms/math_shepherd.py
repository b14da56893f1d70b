"""Math-Shepherd (``kind="prm-math-shepherd"``): peiyi9979/math-shepherd-mistral-7b-prm and PRMs trained its way.

What the model card's scoring code does, and so what this family does:

- text: ``f"{question} {output}"``, where ``output`` is the steps each followed by ``" ки"``, joined by ``"\\n"``;
  tokenized in one ``tokenizer.encode`` (BOS added). The text is never cut into pieces tokenized apart: a
  SentencePiece tokenizer would then start each piece with a lone ``"▁"`` the model never saw;
- score: the softmax over the logits of ``"+"`` and ``"-"`` (``tokenizer.encode("+ -")[1:]``, the tokens as they
  follow a space), column 0, at each ``ки`` (``tokenizer.encode("ки")[-1]``).

The card reads every position whose id is the tag's; here each step is read at its own tag, found by character
offsets, so a ``ки`` inside a word of a step (it is common in Russian: "Такие") is part of the text the model reads,
as in the card, but never read as a step of its own.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tokenization import special_prefix
from .base import TaggedTextPRM, token_pair_probs


__all__ = ["MathShepherdPRM"]


class MathShepherdPRM(TaggedTextPRM):
    """Math-Shepherd, scored as its model card scores it (see the module docstring).

    Args:
        model: The causal LM.
        tokenizer: Its fast tokenizer.
        step_tag: ``"ки"``.
        good_token, bad_token: ``"+"`` / ``"-"``, read as the tokens of ``f"{good_token} {bad_token}"``.
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-math-shepherd"
    reads = "next-token"
    auto_class = "AutoModelForCausalLM"
    hub_ids = ("peiyi9979/math-shepherd-mistral-7b-prm",)

    def __init__(self, model: Any, tokenizer: Any, step_tag: str = "ки", good_token: str = "+",
                 bad_token: str = "-", **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not isinstance(step_tag, str) or not step_tag.strip():
            raise ValueError(f"step_tag={step_tag!r} must be a non-blank string (Math-Shepherd: 'ки').")
        self.step_tag = step_tag
        self.tag_id = tokenizer.encode(step_tag)[-1]
        prefix = len(special_prefix(tokenizer))
        candidates = tokenizer.encode(f"{good_token} {bad_token}")[prefix:]
        if len(candidates) != 2 or candidates[0] == candidates[1]:
            raise ValueError(
                f"good_token={good_token!r} and bad_token={bad_token!r} must each be one token in "
                f"{good_token + ' ' + bad_token!r} (this tokenizer gives "
                f"{tokenizer.convert_ids_to_tokens(candidates)})."
            )
        self.good_id, self.bad_id = candidates

    def tagged_text(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        text, spans = self.question(base_claims) + " ", []
        for k, step in enumerate(steps):
            text += ("\n" if k else "") + step + " "
            spans.append((len(text), len(text) + len(self.step_tag)))
            text += self.step_tag
        return text, spans

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        return token_pair_probs(self, items, self.good_id, self.bad_id)
