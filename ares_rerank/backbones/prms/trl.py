"""PRMs trained with TRL's PRMTrainer (``kind="prm-trl"``): token classifiers such as
HuggingFaceH4/Qwen2.5-Math-7B-Instruct-PRM-0.2 or trl-lib/Qwen2-0.5B-Reward-Math-Sheperd; and PURE's PRM
(``kind="prm-pure"``, :class:`PUREPRM`: jinachris/PURE-PRM-7B), the same layout with the separator ``"\n"``.

What TRL's ``PRMTrainer.tokenize_row`` built the training rows from (``trl/experimental/prm``), and so what this
family does: ``[bos]`` (when the tokenizer has one) + the prompt's ids + for each step its own ids followed by the
separator's ids (``tokenizer(text, add_special_tokens=False)`` for each piece; no separator after the prompt, no chat
template); the score is the softmax over the two labels, column 1 (``LABEL_1`` = correct), at the last token of each
step's separator, where the training label sat.

``step_separator`` must be the one the PRM was trained with (TRL's default ``"\\n"``; the H4 PRM: ``"\\n\\n"``, set
from its hub id). TRL's documentation scores with a ``token-classification`` pipeline on
``separator.join((prompt, *steps)) + separator`` instead, which adds a separator after the prompt the model never saw
in training; this family follows the training rows.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import PRMBackbone, positive_class_probs


__all__ = ["PUREPRM", "TRLPRM"]


class TRLPRM(PRMBackbone):
    """A token-classification PRM trained by TRL's PRMTrainer, read as it was trained (see the module docstring).

    Args:
        model: The token classifier (2 labels).
        tokenizer: Its tokenizer.
        step_separator: The separator it was trained with (TRL's default ``"\\n"``).
        positive_index: The label of a correct step (1).
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``prefix_cache``.
    """

    kind = "prm-trl"
    reads = "token-class"
    auto_class = "AutoModelForTokenClassification"
    hub_ids = ("HuggingFaceH4/Qwen2.5-Math-7B-Instruct-PRM-0.2", "HuggingFaceH4/Qwen2.5-Math-1.5B-Instruct-PRM-0.2",
               "trl-lib/Qwen2-0.5B-Reward-Math-Sheperd")
    hub_presets = {"huggingfaceh4/qwen2.5-math-7b-instruct-prm-0.2": {"step_separator": "\n\n"},
                   "huggingfaceh4/qwen2.5-math-1.5b-instruct-prm-0.2": {"step_separator": "\n\n"}}

    def __init__(self, model: Any, tokenizer: Any, step_separator: str = "\n", positive_index: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        self.separator_ids = tokenizer.encode(step_separator, add_special_tokens=False) if step_separator else []
        if not self.separator_ids:
            raise ValueError(f"step_separator={step_separator!r} encodes to no token: pass the separator the PRM was "
                             "trained with (TRL's default '\\n').")
        self.step_separator = step_separator
        self.positive_index = positive_index

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        bos = self.tokenizer.bos_token if self.tokenizer.bos_token_id is not None else ""
        return bos + self.question(base_claims) + "".join(s + self.step_separator for s in steps)

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        def encode(text: str) -> list[int]:
            return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

        bos = self.tokenizer.bos_token_id
        ids = ([bos] if bos is not None else []) + encode(self.question(base_claims))
        tags = []
        for step in steps:
            ids += encode(step) + self.separator_ids
            tags.append(len(ids) - 1)
        return {"input_ids": ids, "tags": tags}

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        return positive_class_probs(self, items, self.positive_index)


class PUREPRM(TRLPRM):
    """PURE's PRM (``kind="prm-pure"``): jinachris/PURE-PRM-7B, TRL's layout with the separator ``"\n"``.

    A ``Qwen2ForTokenClassification`` (the card loads it with ``AutoModelForTokenClassification``) fine-tuned from
    Qwen2.5-Math-7B (no BOS) on HuggingFaceH4/prm800k-trl-dedup. The separator is ``"\n"``, from the code that
    trained and used the model: TRL's training rows put the separator after each step (TRL's default ``"\n"``), and
    PURE's RL code (CJReinforce/PURE ``openrlhf/trainer/ppo_utils/experience_maker.py``, ``prm_step_separator =
    '\n'``) splits the policy's answer at ``"\n\n"``, drops that, and appends the ``"\n"`` id after each step before
    the PRM reads it. The card says the same (steps split at ``"\n\n"``, a ``"\n"`` token inserted after each).
    PRMBench's adapter (``mr_eval/models/pure_prm.py``) uses ``"\n\n"``, but that file cannot run as published (a
    ``squeenze`` typo, an ``ipdb`` breakpoint, an int concatenated to tensors), so it is not followed.

    The score: the card's and the RL code's reward is ``p1 - p0`` of the softmax (in [-1, 1]); ARES needs a
    probability, so this reads ``p1``, which is ``(reward + 1) / 2``: the same ranking and the same threshold
    (reward > 0 is p1 > 0.5).

    Args:
        model: The token classifier (2 labels).
        tokenizer: Its tokenizer.
        step_separator: ``"\n"`` (what PURE's code inserts).
        **kwargs: As :class:`TRLPRM`.
    """

    kind = "prm-pure"
    hub_ids = ("jinachris/PURE-PRM-7B",)
    hub_presets: dict[str, dict[str, Any]] = {}
