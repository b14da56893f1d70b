"""Universal-PRM (``kind="prm-universal"``): infly/Universal-PRM-7B (AURORA, arXiv 2502.11520).

What the model card's usage code does (the ``RewardModel.evaluate_steps`` loop copied in the card's users' repositories
under "see https://huggingface.co/infly/Universal-PRM-7B"), and so what this family does:

- query: ``apply_chat_template`` (tokenized, with the generation prompt) of a system turn ``"You are a helpful
  assistant."`` and a user turn ``question + "\\n\\n###\\n\\nThe reference answer is: " + reference``; with no
  reference, as at inference, the reference is ``"There is no reference answer for this question."`` (the card's
  branch for an empty ground truth). This family always takes that branch: a chain carries no reference answer;
- answer: ``tokenizer("\\n\\n".join(steps[:k]) + "\\n\\n")["input_ids"]`` followed by the tokenizer's
  ``eos_token_id``; the model reads query + answer;
- score: ``sigmoid(model(input_ids=...)[0])``, one value per input: the card runs one input per prefix ``k`` and
  scores step ``k`` by it.

So each step is its own input (the chain up to it), read once; a whole chain is one input per step. The model is
the checkpoint's own code (``AutoModel`` with ``trust_remote_code=True``; the Hub lists it as ``custom_code``), called
as the card calls it, one unpadded input per call: its head and how it pools are not in any code that could be read
here, so nothing is assumed about them beyond what the card reads (one value per input), and no batching, padding or
shared-prefix reuse is applied to a model whose handling of them is unknown.
"""

from __future__ import annotations

from typing import Any, Sequence

from .base import PRMBackbone


__all__ = ["UNIVERSAL_PRM_NO_REFERENCE", "UNIVERSAL_PRM_SYSTEM_PROMPT", "UniversalPRM"]

#: The system turn of the card's messages.
UNIVERSAL_PRM_SYSTEM_PROMPT = "You are a helpful assistant."
#: What follows the question in the card's user turn when there is no reference answer.
UNIVERSAL_PRM_NO_REFERENCE = "\n\n###\n\nThe reference answer is: There is no reference answer for this question."


class UniversalPRM(PRMBackbone):
    """Universal-PRM, scored as its model card's code scores it (see the module docstring).

    Args:
        model: The loaded model (the checkpoint's own code, ``AutoModel`` + ``trust_remote_code=True``).
        tokenizer: Its tokenizer (ChatML chat template; its ``eos_token_id`` ends every input).
        **kwargs: ``question_separator``, ``max_length``, ``premise_selection``, ``cache_size``, ``window``;
            ``batch_size`` must be 1 (one input a call, as the card) and ``prefix_cache`` is off.
    """

    kind = "prm-universal"
    reads = "value"
    auto_class = "AutoModel"
    hub_ids = ("infly/Universal-PRM-7B",)
    one_pass_chain = False  # one input per prefix, as the card runs it

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any) -> None:
        if kwargs.setdefault("batch_size", 1) != 1:
            raise ValueError(f"batch_size={kwargs['batch_size']!r}: Universal-PRM reads one input a call, unpadded, as "
                             "its card does (its own code's padding is unknown): pass batch_size=1 or leave it out.")
        if kwargs.setdefault("prefix_cache", False):
            raise ValueError("prefix_cache=True: Universal-PRM's own code is called as its card calls it, with "
                             "input_ids only; pass prefix_cache=False or leave it out.")
        super().__init__(model, tokenizer, **kwargs)
        if tokenizer.eos_token_id is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"{type(tokenizer).__name__} has no eos_token or no chat template: Universal-PRM's "
                             "input is its ChatML query and ends with the eos id. Load the PRM's own tokenizer.")

    @classmethod
    def from_pretrained(cls, name_or_path: Any, *, trust_remote_code: bool = False, **kwargs: Any) -> PRMBackbone:
        if not trust_remote_code:
            raise ValueError(
                f"{name_or_path!s} (Universal-PRM) is the checkpoint's own model code (custom_code on the Hub), which "
                "this family calls as the model card does: pass trust_remote_code=True to run that code."
            )
        return super().from_pretrained(name_or_path, trust_remote_code=True, **kwargs)

    def messages(self, base_claims: Sequence[str]) -> list[dict[str, str]]:
        """The card's query turns: its system turn and the question with the no-reference slot."""
        return [{"role": "system", "content": UNIVERSAL_PRM_SYSTEM_PROMPT},
                {"role": "user", "content": self.question(base_claims) + UNIVERSAL_PRM_NO_REFERENCE}]

    def query_ids(self, base_claims: Sequence[str]) -> list[int]:
        """The card's query ids: the chat template over :meth:`messages`, tokenized, with the generation prompt."""
        ids = self.tokenizer.apply_chat_template(self.messages(base_claims), tokenize=True,
                                                 add_generation_prompt=True, return_dict=False)
        return [int(i) for i in ids]

    def render(self, base_claims: Sequence[str], steps: Sequence[str]) -> str:
        query = self.tokenizer.apply_chat_template(self.messages(base_claims), tokenize=False,
                                                   add_generation_prompt=True)
        return query + "\n\n".join(steps) + "\n\n" + self.tokenizer.eos_token

    def encode_chain(self, base_claims: Sequence[str], steps: Sequence[str]) -> dict[str, Any]:
        """The input that scores the last step: ``tags`` holds one position, the last (this model reads one value
        per input; :meth:`chain_step_probs` reads each earlier step from its own prefix)."""
        ids = self.query_ids(base_claims)
        ids += list(self.tokenizer("\n\n".join(steps) + "\n\n")["input_ids"]) + [int(self.tokenizer.eos_token_id)]
        return {"input_ids": ids, "tags": [len(ids) - 1]}

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        """The whole-chain baseline as the card runs it: step ``k`` scored on the chain up to it, one input each
        (windowed as ARES's inputs are, when one does not fit)."""
        base_claims, steps = [str(c) for c in base_claims], [str(s) for s in steps]
        premises = [base_claims + steps[:k] for k in range(len(steps))]
        return self.entailment_probs(premises, steps, num_base=[len(base_claims)] * len(steps))

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        import torch

        out = []
        with torch.inference_mode():
            for item in items:
                value = self.model(input_ids=torch.tensor([item["input_ids"]], device=self.device))[0]
                if value.numel() != 1:
                    raise ValueError(
                        f"{type(self.model).__name__} returned {tuple(value.shape)} as its first output, where "
                        "Universal-PRM's code returns one value per input: load the checkpoint with "
                        "trust_remote_code=True (a plain Qwen2 model returns hidden states)."
                    )
                out.append([float(torch.sigmoid(value.float()).reshape(()))])
        return out
