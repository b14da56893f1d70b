"""RLHFlow PRMs (``kind="prm-rlhflow"``): RLHFlow/Llama3.1-8B-PRM-Deepseek-Data and -Mistral-Data, the default PRM
of huggingface/search-and-learn.

What the authors' scoring code does (RLHFlow/RLHF-Reward-Modeling ``math-rm/prm_evaluate.py``; search-and-learn
``RLHFFlow._score_single``), and so what this family does:

- a conversation: the first user turn is ``question + " " + step_1``, each later step its own user turn, and every
  user turn is answered by an assistant turn ``"+"``; rendered by the tokenizer's own chat template
  (``apply_chat_template``, which tokenizes with no special tokens added: the template holds BOS);
- score of step k: the softmax over the logits of ``"+"`` and ``"-"`` (``tokenizer.encode("+")[-1]``, and the same
  for ``"-"``), column 0, at the position that predicts step k's ``"+"`` (position -3 of the conversation that ends
  with step k's turns).

A decoder reads position t from the tokens before it only, so the whole conversation read at every ``"+"``'s
predecessor gives every step's score in one pass (search-and-learn's batched path does the same).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tokenization import MARKER, clean_claim
from .base import PRMBackbone, encode_spans, token_pair_probs


__all__ = ["RLHFlowPRM"]


class RLHFlowPRM(PRMBackbone):
    """An RLHFlow PRM, scored as its authors' code scores it (see the module docstring).

    Args:
        model: The causal LM.
        tokenizer: Its fast tokenizer, with the model's chat template.
        good_token, bad_token: ``"+"`` / ``"-"``: the assistant's answer to each step, and the two tokens compared.
        **kwargs: ``question_separator``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``,
            ``prefix_cache`` (on: a decoder).
    """

    kind = "prm-rlhflow"
    reads = "next-token"
    auto_class = "AutoModelForCausalLM"
    hub_ids = ("RLHFlow/Llama3.1-8B-PRM-Deepseek-Data", "RLHFlow/Llama3.1-8B-PRM-Mistral-Data")

    def __init__(self, model: Any, tokenizer: Any, good_token: str = "+", bad_token: str = "-",
                 **kwargs: Any) -> None:
        super().__init__(model, tokenizer, **kwargs)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("an RLHFlow PRM reads a chat (each step a user turn answered '+'), and this tokenizer "
                             "has no chat_template: load the PRM's own tokenizer.")
        self.good_token = good_token
        self.good_id, self.bad_id = tokenizer.encode(good_token)[-1], tokenizer.encode(bad_token)[-1]
        if self.good_id == self.bad_id:
            raise ValueError(f"good_token={good_token!r} and bad_token={bad_token!r} are the same token.")

    def conversation(self, base_claims: Sequence[str], steps: Sequence[str], answer: str) -> list[dict[str, str]]:
        """The chat the model reads: ``question + " " + step_1`` and each later step as user turns, each answered
        by ``answer``."""
        turns = []
        for k, step in enumerate(steps):
            text = self.question(base_claims) + " " + step if k == 0 else step
            turns += [{"content": text, "role": "user"}, {"content": answer, "role": "assistant"}]
        return turns

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        return self.tokenizer.apply_chat_template(self.conversation(base_claims, steps, self.good_token),
                                                  tokenize=False)

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        # Render with a one-character marker as every answer, note where each lands, then put the answer back: the
        # spans of the real answers, in the text tokenized whole as apply_chat_template tokenizes it.
        base_claims = [clean_claim(c, [MARKER]) for c in base_claims]
        steps = [clean_claim(s, [MARKER]) for s in steps]
        marked = self.tokenizer.apply_chat_template(self.conversation(base_claims, steps, MARKER), tokenize=False)
        pieces = marked.split(MARKER)
        if len(pieces) != len(steps) + 1:
            raise ValueError(f"the chat template rendered {len(pieces) - 1} assistant answers for {len(steps)} steps.")
        text, spans = pieces[0], []
        for piece in pieces[1:]:
            spans.append((len(text), len(text) + len(self.good_token)))
            text += self.good_token + piece
        ids, answers = encode_spans(self.tokenizer, text, spans, add_special_tokens=False,
                                    expected_ids=[self.good_id] * len(spans))
        return {"input_ids": ids, "tags": [t - 1 for t in answers]}  # the position that predicts each answer

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        return token_pair_probs(self, items, self.good_id, self.bad_id)
