"""Qwen2.5-Math-PRM (``kind="prm-qwen"``): Qwen/Qwen2.5-Math-PRM-7B, -72B and Qwen2.5-Math-7B-PRM800K; and the
Qwen layout without the system turn (``kind="prm-reasonflux"``, :class:`ReasonFluxPRM`): Gen-Verse/ReasonFlux-PRM-7B.

What the model card's scoring code does, and so what this family does:

- text: ChatML with the system turn ``"Please reason step by step, and put your final answer within \\boxed{}."``,
  the question as the user turn and ``"<extra_0>".join(steps) + "<extra_0>"`` as the assistant turn
  (``apply_chat_template(..., tokenize=False, add_generation_prompt=False)``), tokenized in one ``encode`` (the tag
  is a special token, so placing its id at recorded positions gives the same ids);
- score: softmax over the two labels of the head, column 1, at each ``<extra_0>``.

**Loaded natively, no remote code.** The checkpoints declare ``Qwen2ForProcessRewardModel`` with remote code written
for transformers 4.37 (``model_type`` is ``qwen2``); :class:`Qwen2ForProcessRewardModel` here is that architecture on
transformers' own ``Qwen2Model``: a Linear-ReLU-Linear head to two labels with the published weight names
(``model.*``, ``score.0.*``, ``score.2.*``), so ``trust_remote_code`` stays off.
"""

from __future__ import annotations

from typing import Any

from .generic import QWEN_PRM_SYSTEM_PROMPT, StepTagPRM
from .native import native_model_class


__all__ = ["QwenPRM", "ReasonFluxPRM", "qwen_prm_model_class"]


def _build(base: Any) -> type:
    import torch
    from transformers import Qwen2Model, Qwen2PreTrainedModel
    from transformers.modeling_outputs import TokenClassifierOutput

    class Qwen2ForProcessRewardModel(base, Qwen2PreTrainedModel):
        """Qwen2 + ``score = Sequential(Linear(h, h), ReLU, Linear(h, num_labels))`` per token (num_labels = 2)."""

        _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.model = Qwen2Model(config)
            hidden = config.hidden_size
            self.score = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                             torch.nn.Linear(hidden, config.num_labels))
            self.post_init()

        def head(self, hidden: Any) -> TokenClassifierOutput:
            return TokenClassifierOutput(logits=self.score(hidden))  # (batch, seq, num_labels)

    return Qwen2ForProcessRewardModel


def qwen_prm_model_class() -> type:
    """The native ``Qwen2ForProcessRewardModel`` class (built on first use: transformers is imported then)."""
    return native_model_class("Qwen2ForProcessRewardModel", _build)


class QwenPRM(StepTagPRM):
    """Qwen2.5-Math-PRM, scored as its model card scores it (see the module docstring).

    Args:
        model: A loaded ``Qwen2ForProcessRewardModel`` (this module's, or the remote-code one).
        tokenizer: Its tokenizer (``<extra_0>`` a single token, ChatML template).
        system_prompt: The card's system turn by default.
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-qwen"
    hub_ids = ("Qwen/Qwen2.5-Math-PRM-7B", "Qwen/Qwen2.5-Math-PRM-72B", "Qwen/Qwen2.5-Math-7B-PRM800K")
    architectures = ("Qwen2ForProcessRewardModel",)

    def __init__(self, model: Any, tokenizer: Any, system_prompt: str | None = QWEN_PRM_SYSTEM_PROMPT,
                 **kwargs: Any) -> None:
        for fixed in ("step_tag", "positive_index", "step_separator", "use_chat_template"):
            if fixed in kwargs:
                raise TypeError(f"{fixed}= is fixed by the Qwen2.5-Math-PRM convention: for another layout load the "
                                "model with kind='prm' (configurable).")
        super().__init__(model, tokenizer, step_tag="<extra_0>", positive_index=1, system_prompt=system_prompt,
                         step_separator="", use_chat_template=True, **kwargs)

    @classmethod
    def model_class(cls) -> type:
        return qwen_prm_model_class()


class ReasonFluxPRM(QwenPRM):
    """ReasonFlux-PRM-7B (``kind="prm-reasonflux"``): the Qwen layout without a system turn of its own.

    The card's code (Gen-Verse/ReasonFlux, ``ReasonFlux_PRM/README.md`` and ``utils/rm_utils.make_step_rewards``)
    renders ``[user: problem, assistant: "<extra_0>".join(steps) + "<extra_0>"]`` with the tokenizer's chat template,
    passing no system message, so the system turn is whatever that template writes by default (Qwen2.5-Math's
    ``"Please reason step by step..."``); it reads the softmax over the two labels, column 1, at each
    ``<extra_0>``, as Qwen2.5-Math-PRM. Picked from its hub id only: its config names the same architecture as
    Qwen's PRM, so a local copy needs ``kind="prm-reasonflux"`` (else it is read as ``prm-qwen``, whose system turn
    is the one Qwen's card passes).

    Args:
        model: A loaded ``Qwen2ForProcessRewardModel``.
        tokenizer: Its tokenizer (its chat template writes the default system turn).
        system_prompt: ``None`` (the card passes none); a string adds that system turn.
        **kwargs: As :class:`QwenPRM`.
    """

    kind = "prm-reasonflux"
    hub_ids = ("Gen-Verse/ReasonFlux-PRM-7B",)
    architectures = ()  # the architecture is Qwen's: picked from the hub id

    def __init__(self, model: Any, tokenizer: Any, system_prompt: str | None = None, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, system_prompt=system_prompt, **kwargs)
