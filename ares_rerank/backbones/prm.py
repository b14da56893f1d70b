"""Process reward models as ARES backbones, with the premise mask applied (ARES_SPEC section 3).

Two shapes of PRM:

- :class:`StepTagPRM`: a token classifier with 2 labels (Qwen2.5-Math-PRM, TRL-style PRMs). Score = softmax
  probability of the positive class at the last step tag.
- :class:`CausalPRM`: a Math-Shepherd-style causal LM. Score = ``P(good) / (P(good) + P(bad))`` from the
  next-token logits at the last step tag (``'+'`` / ``'-'`` by default).

Rendering (:func:`render_prm_text`): with a chat template, a system turn (configurable), a user turn with the
included base claims (joined by newlines), and an assistant turn with the included earlier steps, each followed by
the step tag, then the judged step and its tag. Without a chat template: the base claims joined by newlines, a
newline, then the steps each followed by the tag and ``step_separator``. Excluded claims are absent from the input:
two masks that differ in any claim render different inputs (the research code rendered one prompt for every mask).

**Which premises are base claims?** The backbone protocol passes one flat list of included claims, plus the optional
``num_base`` keyword: the first ``num_base[i]`` premises of pair i are base claims, the rest earlier steps.
``score_chains`` (ARES and every baseline) always passes it; a direct call without it puts every premise in the user
turn.

**Shared heads.** The masked inputs of one step share the system and user turns (and the first included steps): on a
decoder, each batch's shared head runs once with a KV cache (``prefix_cache``, see
:meth:`~ares_rerank.backbones.hf.HFBackbone.forward_logits`); the scores are those of the full pass.
"""

from __future__ import annotations

from typing import Any, Sequence

from .cache import cached_value
from .hf import HFBackbone
from .tokenization import (
    MARKER,
    clean_claim,
    encode_with_markers,
    single_token_id,
    special_prefix,
    wants_chat_template,
)


__all__ = ["QWEN_PRM_SYSTEM_PROMPT", "CausalPRM", "StepTagPRM", "render_prm_text"]

QWEN_PRM_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."
BASE, STEP = "base", "step"


def render_prm_text(
    base_claims: Sequence[str],
    steps: Sequence[str],
    step_tag: str,
    tokenizer: Any = None,
    system_prompt: str | None = QWEN_PRM_SYSTEM_PROMPT,
    step_separator: str = "",
    use_chat_template: bool | None = None,
) -> str:
    """The PRM input text: base claims as the question, each step followed by ``step_tag``.

    Args:
        base_claims: Included base claims (user turn), in order.
        steps: Included earlier steps then the judged step (assistant turn), in order.
        step_tag: The tag after every step (e.g. ``"<extra_0>"``). Occurrences inside claims become spaces (except a
            whitespace tag such as ``"\\n"``: scores are read at the rendered tag positions, never by searching).
        tokenizer: Supplies the chat template; ``None`` renders plain text.
        system_prompt: The system turn (chat template only); ``None`` or ``""`` leaves it out.
        step_separator: Text after each tag except the last.
        use_chat_template: ``None`` = use it when the tokenizer has one.

    Returns:
        The text a served PRM (or :func:`~ares_rerank.backbones.tokenization.encode_with_markers`) tokenizes.
    """
    forbidden = [MARKER] + ([step_tag] if step_tag.strip() else [])  # a whitespace tag stays in claims
    question = "\n".join(clean_claim(c, forbidden) for c in base_claims)
    tagged = [clean_claim(s, forbidden) + step_tag for s in steps]
    answer = step_separator.join(tagged)
    if not wants_chat_template(tokenizer, use_chat_template):
        return f"{question}\n{answer}" if question else answer
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)


class _PRMBase(HFBackbone):
    """Rendering, roles and the whole-chain pass shared by the two PRM shapes.

    Public beyond :class:`~ares_rerank.backbones.hf.HFBackbone`: :meth:`render` (the text), :meth:`encode_chain`
    (token ids and step-tag positions, what PRM training labels) and :meth:`tag_probs` (the per-tag scores of encoded
    items, the one model-specific step).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        step_tag: str,
        system_prompt: str | None = QWEN_PRM_SYSTEM_PROMPT,
        step_separator: str = "",
        use_chat_template: bool | None = None,
        **kwargs: Any,
    ) -> None:
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
        """The text this PRM scores for these base claims and steps (the last step is the judged one)."""
        return render_prm_text(base_claims, steps, self.step_tag, self.tokenizer, self.system_prompt,
                               self.step_separator, self.use_chat_template)

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        """Token ids of :meth:`render`'s text, with the step tag's id at recorded positions (never searched for).

        No window policy (scoring applies it before calling this; training truncates to its own ``max_length``).

        Args:
            base_claims: The user turn's claims, in order.
            steps: The assistant turn's steps, in order (for scoring, the last one is the judged step).

        Returns:
            ``{"input_ids": [...], "tags": [...]}``: one tag position per step, in step order.
        """
        # A claim containing the tag string would add a tag of its own: replace it (a whitespace tag such as "\n"
        # is left in place: scores are read at the recorded positions, never by searching for the tag id).
        forbidden = [] if not self.step_tag.strip() else [self.step_tag]
        base_claims = [clean_claim(c, forbidden) for c in base_claims]
        steps = [clean_claim(s, forbidden) for s in steps]
        text = render_prm_text(base_claims, steps, MARKER, self.tokenizer, self.system_prompt, self.step_separator,
                               self.use_chat_template)
        ids, tags = encode_with_markers(self.tokenizer, text, [self.tag_id] * len(steps))
        if not self._chat:
            prefix = special_prefix(self.tokenizer)  # plain text starts as the tokenizer itself would start it
            ids, tags = prefix + ids, [t + len(prefix) for t in tags]
        return {"input_ids": ids, "tags": tags}

    def entailment_probs(
        self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str], num_base: Sequence[int] | None = None
    ) -> list[float]:
        """Score of each hypothesis as the next step after its included premises (see the module docstring).

        Args:
            premises: Included claims per pair, in chain order (base claims first).
            hypotheses: The judged steps.
            num_base: How many of ``premises[i]`` are base claims (``score_chains`` passes it); without it every
                premise is rendered as a base claim.
        """
        return self._probs(premises, hypotheses, num_base)

    def _roles(self, premises: Sequence[Sequence[str]], num_base: Sequence[int] | None) -> list[tuple[str, ...]]:
        """Base claims first (``num_base[i]`` of them; all premises without ``num_base``), then earlier steps."""
        if num_base is not None and len(num_base) != len(premises):
            raise ValueError(f"num_base has {len(num_base)} entries for {len(premises)} premise lists: give one each.")
        roles = []
        for i, claims in enumerate(premises):
            if num_base is not None:
                n = int(num_base[i])
                if not 0 <= n <= len(claims):
                    raise ValueError(f"num_base[{i}]={n} is outside 0..{len(claims)} (the premise list's length).")
                roles.append((BASE,) * n + (STEP,) * (len(claims) - n))
            else:
                roles.append((BASE,) * len(claims))
        return roles

    def _render(self, claims: list[str], roles: tuple | None, hypothesis: str, kept: list[int]) -> dict[str, Any]:
        roles = roles or (BASE,) * len(claims)
        base = [claims[i] for i in kept if roles[i] == BASE]
        steps = [claims[i] for i in kept if roles[i] == STEP] + [hypothesis]
        return self.encode_chain(base, steps)

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        """PRM whole-chain baseline: one pass over base claims + all steps, the score at every step's tag.

        If the chain does not fit the window, base claims are dropped least relevant to the steps first (counted in
        ``stats``); the steps are never cut (a ValueError if they alone do not fit).
        """
        key = ("chain", tuple(base_claims), tuple(steps))
        return list(cached_value(self.cache, self.stats, key, lambda: self._chain_values(base_claims, steps)))

    def _chain_values(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[float, ...]:
        steps = [str(s) for s in steps]

        def render_chain(claims: list[str], roles: Any, hypothesis: str, kept: list[int]) -> dict[str, Any]:
            return self.encode_chain([claims[i] for i in kept], steps)

        item = self.fit_window([str(c) for c in base_claims], None, " ".join(steps), render=render_chain)
        return tuple(self.score_encoded([{**item, "all_tags": True}])[0])

    def _tag_rows(self, items: list[dict[str, Any]]) -> list[list[int]]:
        return [item["tags"] if item.get("all_tags") else item["tags"][-1:] for item in items]

    def _score_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        probs = self.tag_probs(items)  # one list of per-tag probabilities per item
        return [p if item.get("all_tags") else p[-1] for p, item in zip(probs, items)]

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """The "this step is correct" probability at step tags of encoded items, one batch (one forward pass).

        Args:
            items: Encoded items (:meth:`encode_chain` / :meth:`encode_pair`); an item with ``"all_tags": True``
                is read at every tag, any other at its last tag only (the judged step).

        Returns:
            Per item, the probabilities at its wanted tags, in order.
        """
        raise NotImplementedError


class StepTagPRM(_PRMBase):
    """A token-classification PRM: positive-class probability at the last step tag.

    Args:
        model: A loaded token classifier (2 logits per token), or a remote-code PRM returning such logits.
        tokenizer: Its tokenizer; must have ``step_tag`` as a single token.
        step_tag: The tag after every step; its id is looked up from the tokenizer. Qwen: ``"<extra_0>"``; TRL-style
            PRMs trained with ``step_separator="\\n"``: ``"\\n"``.
        positive_index: The class meaning "this step is correct" (Qwen and TRL: 1).
        system_prompt, step_separator, use_chat_template: See :func:`render_prm_text`.
        **kwargs: ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``, ``prefix_cache`` (on by
            default for a decoder such as Qwen2.5-Math-PRM, off for an encoder token classifier).
    """

    def __init__(self, model: Any, tokenizer: Any, step_tag: str = "<extra_0>", positive_index: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, step_tag, **kwargs)
        self.positive_index = positive_index

    # Remote-code PRMs that map only AutoModel (Qwen2.5-Math-PRM) load through it with trust_remote_code=True.
    auto_class = "AutoModelForTokenClassification"

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """Softmax probability of ``positive_index`` at the wanted tags (see :meth:`_PRMBase.tag_probs`)."""
        import torch

        logits = self.forward_logits(self.pad(items))  # (batch, seq, 2)
        probs = torch.softmax(logits.float(), dim=-1)[..., self.positive_index]  # (batch, seq)
        return [probs[b, tags].tolist() for b, tags in enumerate(self._tag_rows(items))]


class CausalPRM(_PRMBase):
    """A Math-Shepherd-style causal PRM: ``P(good) / (P(good) + P(bad))`` at the last step tag.

    Args:
        model: A causal LM trained to predict ``good_token`` / ``bad_token`` after each step tag.
        tokenizer: Its tokenizer; ``step_tag``, ``good_token`` and ``bad_token`` must each be a single token.
        step_tag: Math-Shepherd's ``"ки"`` by default.
        good_token, bad_token: The two answers compared at the tag.
        system_prompt: Used only with a chat template (default: none).
        **kwargs: ``step_separator`` (default ``"\\n"``), ``use_chat_template``, ``batch_size``, ``max_length``,
            ``premise_selection``, ``cache_size``, ``prefix_cache`` (default: on).
    """

    def __init__(self, model: Any, tokenizer: Any, step_tag: str = "ки", good_token: str = "+",
                 bad_token: str = "-", system_prompt: str | None = None, step_separator: str = "\n",
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, step_tag, system_prompt=system_prompt, step_separator=step_separator,
                         **kwargs)
        self.good_id = single_token_id(tokenizer, good_token, "good_token")
        self.bad_id = single_token_id(tokenizer, bad_token, "bad_token")
        if self.good_id == self.bad_id:
            raise ValueError(f"good_token={good_token!r} and bad_token={bad_token!r} are the same token.")

    auto_class = "AutoModelForCausalLM"

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """``P(good) / (P(good) + P(bad))`` at the wanted tags (see :meth:`_PRMBase.tag_probs`)."""
        import torch

        columns = [self.good_id, self.bad_id]
        logits = self.forward_logits(self.pad(items), lambda x: x[..., columns])  # (batch, seq, 2): next-token
        pair = torch.softmax(logits.float(), dim=-1)[..., 0]  # (batch, seq)
        return [pair[b, tags].tolist() for b, tags in enumerate(self._tag_rows(items))]
