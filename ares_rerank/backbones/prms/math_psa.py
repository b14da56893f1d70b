"""Math-psa (``kind="prm-math-psa"``): openreasoner/Math-psa, OpenR's PRM, a LoRA adapter on Qwen2.5-Math-7B-Instruct.

What OpenR's scoring path does (openreasoner/openr: ``reason/evaluation/evaluate.py`` builds the reward-model
caller, ``reason/inference/rm_call.py`` renders, ``prm/infer_fns._qwen_math_infer_fn`` reads), and so what this
family does:

- text: ``"{question} {answer}"`` (``prm_format_str``), where the answer is the policy's text split at its step tag
  (``"\\n\\n"`` for Qwen policies), each piece stripped, empty pieces dropped, and joined and ended by
  ``" " + "\\n\\n\\n\\n\\n "`` (``replace_step_tag`` with ``prm_step_tag = "\\n\\n\\n\\n\\n "``); so a step holding
  ``"\\n\\n"`` is several pieces and is read at its last. Tokenized in one ``tokenizer.encode`` (Qwen adds nothing);
- score: the softmax over the logits of ``" +"`` and ``" -"`` (``tokenizer.encode(" + -")``), column 0, at each
  ``" \\n\\n\\n\\n\\n"`` token (``tokenizer.encode(" \\n\\n\\n\\n\\n")[-1]``, one token in Qwen2.5's vocabulary).

The card's code reads every position whose id is the tag's; here each step is read at its own tag, found by character
offsets (the same positions for a text whose steps hold no tag of their own).

**The adapter on its base.** The hub repo is a peft LoRA adapter; it loads on its base with peft (``load_backbone``
reads ``adapter_config.json``). Its recorded base could not be read offline, so the base defaults to
:data:`MATH_PSA_BASE` (OpenR's training script and VersaPRM's published evaluation load the adapter on it); pass
``base_model=`` for a local copy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..tokenization import special_prefix
from .base import TaggedTextPRM, token_pair_probs


__all__ = ["MATH_PSA_BASE", "MathPSAPRM"]

#: The base model the Math-psa adapter was trained on (OpenR's ``prm/code`` scripts, VersaPRM's model_config.json).
MATH_PSA_BASE = "Qwen/Qwen2.5-Math-7B-Instruct"
_STEP_TAG = "\n\n\n\n\n"  # OpenR's prm_step_tag is this plus a space; rm_call puts a space before it


class MathPSAPRM(TaggedTextPRM):
    """Math-psa, scored as OpenR's reward-model path scores it (see the module docstring).

    Args:
        model: The causal LM (the base with the adapter).
        tokenizer: Its fast tokenizer (Qwen2.5's).
        lm_step_tag: Where the policy's text is split into pieces (OpenR: ``"\\n\\n"`` for Qwen policies).
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``window``, ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-math-psa"
    reads = "next-token"
    auto_class = "AutoModelForCausalLM"
    hub_ids = ("openreasoner/Math-psa",)

    def __init__(self, model: Any, tokenizer: Any, lm_step_tag: str = "\n\n", **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not isinstance(lm_step_tag, str) or not lm_step_tag:
            raise ValueError(f"lm_step_tag={lm_step_tag!r} must be a non-empty string (OpenR: '\\n\\n').")
        self.lm_step_tag = lm_step_tag
        prefix = len(special_prefix(tokenizer))
        candidates = tokenizer.encode(" + -")[prefix:]
        tag = tokenizer.encode(" " + _STEP_TAG)[prefix:]
        if len(candidates) != 2 or candidates[0] == candidates[1] or len(tag) != 1:
            raise ValueError(
                f"{type(tokenizer).__name__} does not have Math-psa's tokens (' +', ' -' and ' \\n\\n\\n\\n\\n' each "
                f"one token; this one gives {tokenizer.convert_ids_to_tokens(candidates)} and "
                f"{tokenizer.convert_ids_to_tokens(tag)}): load the PRM with its base's tokenizer (Qwen2.5's)."
            )
        self.good_id, self.bad_id = candidates
        self.tag_id = tag[0]

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, *, base_model: str | Path | None = None,
                        **kwargs: Any) -> MathPSAPRM:
        """Load the adapter on its base: ``base_model`` if given, else :data:`MATH_PSA_BASE` for the hub id."""
        if base_model is None and str(name_or_path).lower() == cls.hub_ids[0].lower():
            base_model = MATH_PSA_BASE
        return super().from_pretrained(name_or_path, base_model=base_model, **kwargs)

    def _pieces(self, step: str) -> list[str]:
        pieces = [p.strip() for p in step.split(self.lm_step_tag)]
        pieces = [p for p in pieces if p]
        if not pieces:
            raise ValueError(f"step {step[:80]!r} is empty once split at lm_step_tag={self.lm_step_tag!r} and "
                             "stripped, as OpenR's rm_call does: give each step some text.")
        return pieces

    def tagged_text(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        text, spans = self.question(base_claims) + " ", []
        for step in steps:
            for piece in self._pieces(step):
                text += piece + " "
                end = len(text) + len(_STEP_TAG)
                text += _STEP_TAG + " "
            spans.append((end - len(_STEP_TAG) - 1, end))  # the " \n\n\n\n\n" token of the step's last piece
        return text, spans

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        return token_pair_probs(self, items, self.good_id, self.bad_id)
