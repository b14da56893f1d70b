"""VersaPRM (``kind="prm-versaprm"``): UW-Madison-Lee-Lab/VersaPRM and its siblings, Llama-3.1 causal LMs read at a
``" \\n\\n\\n\\n"`` tag.

What VersaPRM's published evaluation does (mtzig/MultiDomainPRM: ``evaluation/get_rewards_reasoning_step.py``, the
branch for Llama-PRM800K and the VersaPRM models, and ``evaluation/prm_models/prm_llama.LlamaPRM``), and so what this
family does:

- text: the question and each step stripped, with ``" \\n\\n\\n\\n"`` removed from them, then
  ``f"{question} \\n\\n" + "".join(f"{step} \\n\\n\\n\\n" for step in steps)``; tokenized in one ``tokenizer.encode``
  (Llama-3's BOS added). The training rows (``model_train/prm_datasets.py``) tokenize ``f"{question} \\n\\n"`` and
  each ``f"{step} \\n\\n\\n\\n"`` apart; the evaluation's one-call text is followed here, as for every family;
- score: the softmax over the logits of ``"-"`` and ``"+"`` (``LlamaPRM``'s ids 12 and 10), column 1 (``"+"``), at
  each ``" \\n\\n\\n\\n"`` token (id 23535 in Llama-3's vocabulary; found here as
  ``tokenizer.encode(" \\n\\n\\n\\n", add_special_tokens=False)[-1]``, as the repository's ``general_prm`` does).

The evaluation reads every position whose id is the tag's; here each step is read at its own tag, found by character
offsets. Some of the ids are peft adapters on their base (the card's "LoRA on MMLU-Pro-Train"): ``load_backbone``
reads ``adapter_config.json`` and loads the base it records (``base_model=`` to override).
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import TaggedTextPRM, token_pair_probs


__all__ = ["VersaPRM"]

_TAG = " \n\n\n\n"


class VersaPRM(TaggedTextPRM):
    """VersaPRM, scored as its published evaluation scores it (see the module docstring).

    Args:
        model: The causal LM.
        tokenizer: Its fast tokenizer (Llama-3's).
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``window``, ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-versaprm"
    reads = "next-token"
    auto_class = "AutoModelForCausalLM"
    # The ids the published evaluation scores with this layout (evaluation/prm_models/model_config.json).
    hub_ids = ("UW-Madison-Lee-Lab/VersaPRM", "UW-Madison-Lee-Lab/VersaPRM-Aug",
               "UW-Madison-Lee-Lab/VersaPRM-Small-Subset", "UW-Madison-Lee-Lab/VersaPRM-Math-Subset",
               "UW-Madison-Lee-Lab/VersaPRM-Base-8B", "UW-Madison-Lee-Lab/VersaPRM-Base-3B",
               "UW-Madison-Lee-Lab/Llama-PRM800K")

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        tag = tokenizer.encode(_TAG, add_special_tokens=False)
        good = tokenizer.encode("+", add_special_tokens=False)
        bad = tokenizer.encode("-", add_special_tokens=False)
        if len(tag) != 1 or len(good) != 1 or len(bad) != 1 or good == bad:
            raise ValueError(
                f"{type(tokenizer).__name__} does not have VersaPRM's tokens ('+', '-' and ' \\n\\n\\n\\n' each one "
                f"token; this one gives {tokenizer.convert_ids_to_tokens(good + bad + tag)}): load the PRM's own "
                "tokenizer (Llama-3's)."
            )
        self.tag_id, self.good_id, self.bad_id = tag[0], good[0], bad[0]

    def tagged_text(self, base_claims: Sequence[str], steps: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
        text, spans = self.question(base_claims).strip().replace(_TAG, "") + " \n\n", []
        for step in steps:
            text += step.strip().replace(_TAG, "")
            spans.append((len(text), len(text) + len(_TAG)))
            text += _TAG
        return text, spans

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        return token_pair_probs(self, items, self.good_id, self.bad_id)  # softmax over (+, -), column 0 = "+"
