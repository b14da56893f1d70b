"""Skywork-o1-Open-PRM (``kind="prm-skywork"``): Skywork/Skywork-o1-Open-PRM-Qwen-2.5-1.5B and -7B.

What SkyworkAI/skywork-o1-prm-inference does (``prepare_input`` with ``step_token="\\n"``, also copied in
huggingface/search-and-learn), and so what this family does:

- ids: ``tokenizer.encode(tokenizer.bos_token + problem + "\\n")``, then for each piece of the response split on
  ``"\\n"`` its own ``tokenizer.encode(piece)`` (nothing for an empty piece) followed by the id of ``"\\n"``
  (``tokenizer.encode("\\n")[-1]``); the response is the steps joined by ``"\\n"``, so a step holding newlines is
  several pieces, read at its last;
- score: the sigmoid of a value head (``v_head.summary``, ``Linear(hidden, 1)``) on the decoder's last hidden state,
  at each step's ``"\\n"`` token.

**Loaded natively, no remote code.** The checkpoints name ``Qwen2ForPrmModel`` (``model_type`` ``qwen2``);
:func:`skywork_prm_model_class` is a Qwen2 decoder (``model.*``) plus ``v_head.summary`` under the published weight
names; the causal LM head the checkpoint also carries (``lm_head``) is not read.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import PRMBackbone, sigmoid_probs
from .native import native_model_class


__all__ = ["SkyworkPRM", "skywork_prm_model_class"]


def _build(base: Any) -> type:
    import torch
    from transformers import Qwen2Model, Qwen2PreTrainedModel
    from transformers.modeling_outputs import TokenClassifierOutput

    class ValueHead(torch.nn.Module):
        def __init__(self, hidden: int, dropout: float) -> None:
            super().__init__()
            self.dropout = torch.nn.Dropout(dropout) if dropout else torch.nn.Identity()
            self.summary = torch.nn.Linear(hidden, 1)

        def forward(self, hidden: Any) -> Any:
            hidden = self.dropout(hidden)
            return self.summary(hidden.to(self.summary.weight.dtype))

    class Qwen2ForPrmModel(base, Qwen2PreTrainedModel):
        """Qwen2 + ``v_head.summary = Linear(h, 1)``: one value logit per token (sigmoid = P(step correct))."""

        _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.model = Qwen2Model(config)
            self.v_head = ValueHead(config.hidden_size, getattr(config, "summary_dropout_prob", 0.1))
            self.post_init()

        def head(self, hidden: Any) -> TokenClassifierOutput:
            return TokenClassifierOutput(logits=self.v_head(hidden))  # (batch, seq, 1)

    return Qwen2ForPrmModel


def skywork_prm_model_class() -> type:
    """The native ``Qwen2ForPrmModel`` class (built on first use)."""
    return native_model_class("Qwen2ForPrmModel", _build)


class SkyworkPRM(PRMBackbone):
    """Skywork-o1-Open-PRM, scored as its authors' inference code scores it (see the module docstring).

    Args:
        model: A loaded ``Qwen2ForPrmModel`` (:func:`skywork_prm_model_class`).
        tokenizer: Its tokenizer (its ``bos_token`` starts the input: ``<|im_start|>`` for the published ones).
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-skywork"
    reads = "value"
    hub_ids = ("Skywork/Skywork-o1-Open-PRM-Qwen-2.5-1.5B", "Skywork/Skywork-o1-Open-PRM-Qwen-2.5-7B")
    architectures = ("Qwen2ForPrmModel",)

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not tokenizer.bos_token:
            raise ValueError(f"{type(tokenizer).__name__} has no bos_token: Skywork's PRM input starts with it "
                             "(the published tokenizers set bos_token='<|im_start|>'). Load the PRM's own tokenizer.")
        self.step_token_id = tokenizer.encode("\n")[-1]

    @classmethod
    def model_class(cls) -> type:
        return skywork_prm_model_class()

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        return self.tokenizer.bos_token + self.question(base_claims) + "\n" + "".join(s + "\n" for s in steps)

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        ids = list(self.tokenizer.encode(self.tokenizer.bos_token + self.question(base_claims) + "\n"))
        tags = []
        for step in steps:
            for piece in step.split("\n"):
                ids += self.tokenizer.encode(piece) if piece else []
                ids.append(self.step_token_id)
            tags.append(len(ids) - 1)
        return {"input_ids": ids, "tags": tags}

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        return sigmoid_probs(self, items)
