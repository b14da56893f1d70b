"""ActPRM (``kind="prm-actprm"``): ActPRM/ActPRM and ActPRM/ActPRM-X (also published as sail/ActPRM, sail/ActPRM-X),
Qwen2 PRMs with an ensemble head, trained by active learning.

What the authors' evaluation does (sail-sg/ActivePRM ``examples/py_scripts/test_actprm_on_processbench.py``,
``EnsemblePRMWorker``; the architecture ``src/active_prm/models/qwen2_ensemble_prm/modeling_qwen2.Qwen2ForEnsemblePRM``
and the head ``src/active_prm/models/nets.EnsembleModel``), and so what this family does:

- text: the chat template over a system turn (``"You are a helpful and harmless assistant. You should think
  step-by-step and put your final answer within \\boxed{}."``) and the question as the user turn, with the generation
  prompt, then ``rr_token.join(steps) + rr_token`` written after it (no end of turn), where ``rr_token`` is the
  config's (``<extra_0>``; ``" \\n\\n"`` when the config has none) and the steps are stripped; tokenized in one call;
- score: the head is ``num_ensemble`` (8) MLPs, ``hidden -> 128 -> 128 -> 1`` with ReLU (``EnsembleFC`` weights of
  shape ``(members, in, out)``); each member's sigmoid at each ``rr_token``, averaged over the members
  (``reduce="mean"``).

**Loaded natively, no remote code.** The checkpoints name ``Qwen2ForEnsemblePRM`` (``model_type`` ``qwen2``);
:func:`actprm_model_class` is transformers' Qwen2 decoder (``model.*``) plus the ensemble under the published weight
names (``score.model.nn1`` / ``nn2`` / ``nn_out``); ``score.reg_model.*``, a frozen copy used only by the training
regulariser, is not read.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import TaggedTextPRM
from .native import native_model_class


__all__ = ["ACTPRM_SYSTEM_PROMPT", "ActPRM", "actprm_model_class"]

#: The system turn of the authors' ``EnsemblePRMWorker.prompt2message``.
ACTPRM_SYSTEM_PROMPT = ("You are a helpful and harmless assistant. You should think step-by-step and put your final "
                        "answer within \\boxed{}.")


def _build(base: Any) -> type:
    import torch
    from transformers import Qwen2Model, Qwen2PreTrainedModel
    from transformers.modeling_outputs import TokenClassifierOutput

    class EnsembleFC(torch.nn.Module):
        """One linear layer per member: weight ``(members, in, out)``, bias ``(members, out)``."""

        def __init__(self, in_features: int, out_features: int, members: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(members, in_features, out_features))
            self.bias = torch.nn.Parameter(torch.zeros(members, out_features))

        def forward(self, x: Any) -> Any:  # (members, batch, length, in) -> (members, batch, length, out)
            x = x.to(self.weight.dtype)
            return torch.add(torch.einsum("eblh,ehm->eblm", x, self.weight), self.bias[:, None, None, :])

    class Members(torch.nn.Module):
        def __init__(self, hidden: int, members: int, width: int = 128) -> None:
            super().__init__()
            self.nn1 = EnsembleFC(hidden, width, members)
            self.nn2 = EnsembleFC(width, width, members)
            self.nn_out = EnsembleFC(width, 1, members)

        def forward(self, x: Any) -> Any:
            return self.nn_out(torch.relu(self.nn2(torch.relu(self.nn1(x)))))

    class EnsembleHead(torch.nn.Module):
        def __init__(self, hidden: int, members: int) -> None:
            super().__init__()
            self.num_ensemble = members
            self.model = Members(hidden, members)

        def forward(self, hidden: Any) -> Any:  # (batch, length, h) -> (members, batch, length, 1)
            return self.model(hidden[None].repeat(self.num_ensemble, 1, 1, 1))

    class Qwen2ForEnsemblePRM(base, Qwen2PreTrainedModel):
        """Qwen2 + ``score``: ``num_ensemble`` MLP members, one logit each per token (logits ``(b, l, members)``)."""

        _keys_to_ignore_on_load_unexpected = [r"^score\.reg_model\.", r"^lm_head\."]

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.model = Qwen2Model(config)
            self.score = EnsembleHead(config.hidden_size, int(getattr(config, "num_ensemble", 8)))
            self.post_init()

        def head(self, hidden: Any) -> TokenClassifierOutput:
            logits = self.score(hidden)[..., 0].float()  # (members, batch, length)
            return TokenClassifierOutput(logits=logits.permute(1, 2, 0))

    return Qwen2ForEnsemblePRM


def actprm_model_class() -> type:
    """The native ``Qwen2ForEnsemblePRM`` class (built on first use)."""
    return native_model_class("Qwen2ForEnsemblePRM", _build)


class ActPRM(TaggedTextPRM):
    """ActPRM, scored as its authors' evaluation scores it (see the module docstring).

    Args:
        model: A loaded ``Qwen2ForEnsemblePRM`` (:func:`actprm_model_class`).
        tokenizer: Its tokenizer (Qwen2.5's: ``<extra_0>`` a special token, ChatML template).
        system_prompt: The authors' system turn by default.
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``window``, ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-actprm"
    reads = "value"
    # The ids the authors' evaluation script accepts, and the ones their README names (the sail organisation).
    hub_ids = ("ActPRM/ActPRM", "ActPRM/ActPRM-X", "sail/ActPRM", "sail/ActPRM-X")
    architectures = ("Qwen2ForEnsemblePRM",)

    def __init__(self, model: Any, tokenizer: Any, system_prompt: str = ACTPRM_SYSTEM_PROMPT, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"{type(tokenizer).__name__} has no chat template: ActPRM's input is the Qwen2.5 chat "
                             "template's system and user turns. Load the PRM's own tokenizer.")
        rr_token = getattr(model.config, "rr_token", None)
        self.rr_token = rr_token if rr_token is not None else " \n\n"  # the worker's fallback
        self.tag_id = tokenizer(self.rr_token)["input_ids"][0]
        self.system_prompt = system_prompt

    @classmethod
    def model_class(cls) -> type:
        return actprm_model_class()

    def tagged_text(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        messages = [{"role": "system", "content": self.system_prompt},
                    {"role": "user", "content": self.question(base_claims)}]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        spans = []
        for step in steps:
            text += step.strip()
            spans.append((len(text), len(text) + len(self.rr_token)))
            text += self.rr_token
        return text, spans

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        import torch

        logits = self.forward_logits(self.pad(items), transform_key="all")  # (batch, seq, members)
        probs = torch.sigmoid(logits.float()).mean(dim=-1)  # each member's sigmoid, averaged (reduce="mean")
        return [probs[b, rows].tolist() for b, rows in enumerate(self.tag_rows(items))]
