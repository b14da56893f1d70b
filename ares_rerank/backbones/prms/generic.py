"""Configurable step-tag PRMs (``kind="prm"`` and ``"prm-causal"``): for a PRM of your own that follows no published
family's convention. Each published family has its own module beside this one and is picked from its hub id or
architecture (:mod:`~ares_rerank.backbones.prms`).

- :class:`StepTagPRM`: a token classifier with 2 labels. Score = softmax probability of the positive class at the
  step tag.
- :class:`CausalPRM`: a causal LM. Score = ``P(good) / (P(good) + P(bad))`` from the next-token logits at the step tag
  (``'+'`` / ``'-'`` by default).

Rendering (:func:`render_prm_text`): with a chat template, a system turn (configurable), a user turn with the
question (the included base claims), and an assistant turn with the included earlier steps, each followed by the step
tag, then the judged step and its tag. Without a chat template: the question, a newline, then the steps each followed
by the tag and ``step_separator``. The tag's token is placed at recorded positions (never searched for), and the text
between tags is tokenized piece by piece (:func:`~ares_rerank.backbones.tokenization.encode_with_markers`): exact for
a tag that is a special token (it splits the text there anyway), which is what a custom step tag should be.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tokenization import (
    MARKER,
    clean_claim,
    encode_with_markers,
    single_token_id,
    special_prefix,
    wants_chat_template,
)
from .base import PRMBackbone, positive_class_probs, token_pair_probs


__all__ = ["QWEN_PRM_SYSTEM_PROMPT", "CausalPRM", "StepTagPRM", "render_prm_text"]

QWEN_PRM_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."


def render_prm_text(
    base_claims: Sequence[str],
    steps: Sequence[str],
    step_tag: str,
    tokenizer: Any = None,
    system_prompt: str | None = QWEN_PRM_SYSTEM_PROMPT,
    step_separator: str = "",
    use_chat_template: bool | None = None,
    question_separator: str = "\n",
) -> str:
    """The PRM input text: base claims as the question, each step followed by ``step_tag``.

    Args:
        base_claims: Included base claims (user turn), in order, joined by ``question_separator``.
        steps: Included earlier steps then the judged step (assistant turn), in order.
        step_tag: The tag after every step (e.g. ``"<extra_0>"``). A whole tag inside a claim becomes a space (a tag
            inside a word is left alone, and so is a whitespace tag such as ``"\\n"``: scores are read at the
            rendered tag positions, never by searching).
        tokenizer: Supplies the chat template; ``None`` renders plain text.
        system_prompt: The system turn (chat template only); ``None`` or ``""`` leaves it out.
        step_separator: Text after each tag except the last.
        use_chat_template: ``None`` = use it when the tokenizer has one.
        question_separator: Joins the base claims.

    Returns:
        The text a served PRM (or :func:`~ares_rerank.backbones.tokenization.encode_with_markers`) tokenizes.
    """
    forbidden = [MARKER] + ([step_tag] if step_tag.strip() else [])  # a whitespace tag stays in claims
    question = question_separator.join(clean_claim(c, forbidden) for c in base_claims)
    tagged = [clean_claim(s, forbidden) + step_tag for s in steps]
    answer = step_separator.join(tagged)
    if not wants_chat_template(tokenizer, use_chat_template):
        return f"{question}\n{answer}" if question else answer
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)


class _TaggedPRM(PRMBackbone):
    """The rendering both configurable PRMs share (:func:`render_prm_text`, the tag's id at recorded positions)."""

    def __init__(self, model: Any, tokenizer: Any, step_tag: str, system_prompt: str | None = QWEN_PRM_SYSTEM_PROMPT,
                 step_separator: str = "", use_chat_template: bool | None = None, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not isinstance(step_tag, str) or not step_tag:
            raise ValueError(f"step_tag={step_tag!r} must be a non-empty string, e.g. '<extra_0>'.")
        self.step_tag = step_tag
        self.tag_id = single_token_id(tokenizer, step_tag, "step_tag")
        self.system_prompt = system_prompt
        self.step_separator = step_separator
        self.use_chat_template = use_chat_template
        self._chat = wants_chat_template(tokenizer, use_chat_template)

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        return render_prm_text(base_claims, steps, self.step_tag, self.tokenizer, self.system_prompt,
                               self.step_separator, self.use_chat_template, self.question_separator)

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        """Token ids of :meth:`render`'s text, with the step tag's id at recorded positions (never searched for).

        No window policy (scoring applies it before calling this; training truncates to its own ``max_length``).

        Returns:
            ``{"input_ids": [...], "tags": [...]}``: one tag position per step, in step order.
        """
        # A whole tag inside a claim would add a tag of its own: replace it (a whitespace tag such as "\n" is left
        # in place: scores are read at the recorded positions, never by searching for the tag id).
        forbidden = [] if not self.step_tag.strip() else [self.step_tag]
        base_claims = [clean_claim(c, forbidden) for c in base_claims]
        steps = [clean_claim(s, forbidden) for s in steps]
        text = render_prm_text(base_claims, steps, MARKER, self.tokenizer, self.system_prompt, self.step_separator,
                               self.use_chat_template, self.question_separator)
        ids, tags = encode_with_markers(self.tokenizer, text, [self.tag_id] * len(steps))
        if not self._chat:
            prefix = special_prefix(self.tokenizer)  # plain text starts as the tokenizer itself would start it
            ids, tags = prefix + ids, [t + len(prefix) for t in tags]
        return {"input_ids": ids, "tags": tags}


class StepTagPRM(_TaggedPRM):
    """A token-classification PRM: positive-class probability at the step tag (``kind="prm"``).

    Args:
        model: A loaded token classifier (2 logits per token).
        tokenizer: Its tokenizer; must have ``step_tag`` as a single token.
        step_tag: The tag after every step; its id is looked up from the tokenizer.
        positive_index: The class meaning "this step is correct".
        system_prompt, step_separator, use_chat_template: See :func:`render_prm_text`.
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``prefix_cache`` (on by default for a decoder, off for an encoder token classifier).
    """

    kind = "prm"
    reads = "token-class"
    auto_class = "AutoModelForTokenClassification"

    def __init__(self, model: Any, tokenizer: Any, step_tag: str = "<extra_0>", positive_index: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, step_tag, **kwargs)
        self.positive_index = positive_index

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """Softmax probability of ``positive_index`` at the wanted tags."""
        return positive_class_probs(self, items, self.positive_index)


class CausalPRM(_TaggedPRM):
    """A causal PRM of your own: ``P(good) / (P(good) + P(bad))`` at the step tag (``kind="prm-causal"``).

    For Math-Shepherd and RLHFlow use their families (``kind="prm-math-shepherd"`` / ``"prm-rlhflow"``), which
    render exactly as their authors' code does.

    Args:
        model: A causal LM trained to predict ``good_token`` / ``bad_token`` after each step tag.
        tokenizer: Its tokenizer; ``step_tag``, ``good_token`` and ``bad_token`` must each be a single token.
        step_tag: The tag after every step (best a special token).
        good_token, bad_token: The two answers compared at the tag.
        system_prompt: Used only with a chat template (default: none).
        **kwargs: ``step_separator`` (default ``"\\n"``), ``use_chat_template``, ``question_separator``,
            ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``, ``prefix_cache`` (default: on).
    """

    kind = "prm-causal"
    reads = "next-token"
    auto_class = "AutoModelForCausalLM"

    def __init__(self, model: Any, tokenizer: Any, step_tag: str = "ки", good_token: str = "+",
                 bad_token: str = "-", system_prompt: str | None = None, step_separator: str = "\n",
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, step_tag, system_prompt=system_prompt, step_separator=step_separator,
                         **kwargs)
        self.good_id = single_token_id(tokenizer, good_token, "good_token")
        self.bad_id = single_token_id(tokenizer, bad_token, "bad_token")
        if self.good_id == self.bad_id:
            raise ValueError(f"good_token={good_token!r} and bad_token={bad_token!r} are the same token.")

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """``P(good) / (P(good) + P(bad))`` at the wanted tags."""
        return token_pair_probs(self, items, self.good_id, self.bad_id)
