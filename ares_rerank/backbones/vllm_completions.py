"""A causal PRM (Math-Shepherd, RLHFlow, or your own ``CausalPRM``) served by vLLM's OpenAI-compatible
``/v1/completions``, read from real token log-probabilities (``kind="vllm-completions"``).

The inputs are the local family's own (``family=``, rendered and tokenized here, sent as token ids), and so are the
read positions; only the forward pass is the server's. For each read position ``p`` of an input (the judged step's;
every step's for ``prm-chain``) two prompts are sent: the input's first ``p + 1`` ids followed by the family's good
token, and the same followed by its bad token, with ``"prompt_logprobs": 0`` and ``"max_tokens": 1``. The last prompt
log-probability of each is ``log P(token | ids[:p + 1])`` over the whole vocabulary, and
``P(good) / (P(good) + P(bad))`` is exactly the softmax over the two logits that the local family reads.

vLLM's ``/pooling`` cannot serve these models: its STEP pooling with ``returned_token_ids`` indexes hidden states, not
logits (vLLM issue 16545). Checked against vLLM's source (not a live server: no GPU here): ``prompt_logprobs`` on
``/v1/completions`` since 0.5.5, a prompt of token ids (or a list of them) in every version since, ``max_tokens`` at
least 1, and ``choices[i].prompt_logprobs`` a list with ``null`` first, then per position an object keyed by token id
(a string) holding ``{"logprob", "rank", "decoded_token"}`` for the prompt's own token (and the top ``k``). A request
with prompt log-probabilities does not read vLLM's prefix cache, so every prompt runs whole: two per read.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .hub import check_model_files
from .loading import backbone_class
from .prms.base import PRMBackbone
from .served import (
    DEFAULT_MAX_RESPONSE_BYTES,
    JsonClient,
    ServerResponseError,
    answer_choices,
    check_concurrency,
    finite_number,
    score_in_requests,
    served_model_and_window,
)


__all__ = ["ServedPairs", "VLLMCompletionsPRM", "served_family"]


class ServedPairs:
    """Mixin over a causal PRM family (first in the bases): the forward pass is ``/v1/completions`` (module doc)."""

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, concurrency: int = 4,
                 timeout: float = 120.0, max_retries: int = 3, backoff: float = 0.5, api_key: str | None = None,
                 total_timeout: float = 600.0, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 extra_body: dict[str, Any] | None = None, **kwargs: Any) -> None:
        check_concurrency(concurrency, 4)
        self.client = JsonClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff, api_key=api_key,
                                 total_timeout=total_timeout, max_response_bytes=max_response_bytes)
        self._window_given = kwargs.get("max_length") is not None
        super().__init__(None, tokenizer, **kwargs)  # the family's rendering, no local model
        self._resolved = False
        self.served_model = model
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})

    def _compute(self, keys: list[Any]) -> list[Any]:
        self._resolve()  # before the window policy renders anything: the server's max_model_len is the window
        return super()._compute(keys)

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        self._resolve()
        return super().chain_step_probs(base_claims, steps)

    def _resolve(self) -> None:
        if not self._resolved:
            self.served_model, self.max_length = served_model_and_window(self.client, self.served_model,
                                                                         self.max_length, self._window_given)
            self._resolved = True

    def score_encoded(self, items: Sequence[dict[str, Any]]) -> list[Any]:
        """Length-sorted batches of ``batch_size`` items, one request each, ``concurrency`` in flight."""
        self._resolve()
        return score_in_requests(self._score_batch, items, self.batch_size, self.concurrency, self.stats)

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """One request for the batch: two prompts per read position; ``P(good) / (P(good) + P(bad))`` at each."""
        reads = [(i, p) for i, rows in enumerate(self.tag_rows(items)) for p in rows]
        prompts = []
        for i, p in reads:
            head = [int(t) for t in items[i]["input_ids"][: p + 1]]
            prompts += [head + [self.good_id], head + [self.bad_id]]
        body = {"model": self.served_model, "prompt": prompts, "max_tokens": 1, "temperature": 0.0,
                "prompt_logprobs": 0, **self.extra_body}
        logprobs = self.last_logprobs(self.client.post("/v1/completions", body), prompts)
        out: list[list[float]] = [[] for _ in items]
        for j, (i, _) in enumerate(reads):
            good, bad = logprobs[2 * j], logprobs[2 * j + 1]
            out[i].append(1.0 / (1.0 + math.exp(bad - good)))
        self.token_stats.tokens += sum(map(len, prompts))
        self.token_stats.positions += sum(map(len, prompts))
        return out

    def last_logprobs(self, answer: Any, prompts: Sequence[Sequence[int]]) -> list[float]:
        """The log-probability of each prompt's last token, read from a decoded ``/v1/completions`` answer.

        Raises:
            ServerResponseError: Choices or log-probabilities that do not fit the request (counts, a missing token,
                a number that is not finite or above 0).
        """
        url = self.client.root + "/v1/completions"
        choices = answer_choices(answer, len(prompts), url, f"{len(prompts)} prompts",
                                 "is this vLLM's /v1/completions?")
        out = []
        for choice, prompt in zip(choices, prompts):
            rows = choice.get("prompt_logprobs")
            last = rows[-1] if isinstance(rows, list) and len(rows) == len(prompt) else None
            entry = last.get(str(prompt[-1])) if isinstance(last, dict) else None
            value = finite_number(entry.get("logprob")) if isinstance(entry, dict) else None
            if value is None or value > 1e-6:
                raise ServerResponseError(
                    f"{url} returned no usable prompt log-probability of token {prompt[-1]} at the last of "
                    f"{len(prompt)} positions ({str(choice)[:200]}): serve the model with vLLM >= 0.5.5, which "
                    "answers \"prompt_logprobs\" with one entry per prompt token.", url)
            out.append(min(value, 0.0))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.root!r}, model={self.served_model!r})"


def served_family(family: str) -> type:
    """The class of ``family`` (a causal PRM kind: ``"prm-math-shepherd"``, ``"prm-rlhflow"``, ``"prm-versaprm"``,
    ``"prm-math-psa"`` (its adapter merged into the served model), ``"prm-causal"``) with :class:`ServedPairs` for its
    forward pass."""
    cls = backbone_class(family)
    if not (isinstance(cls, type) and issubclass(cls, PRMBackbone) and getattr(cls, "reads", "") == "next-token"):
        raise ValueError(
            f"family={family!r} is not a causal PRM read from next-token log-probabilities: use 'prm-math-shepherd', "
            "'prm-rlhflow', 'prm-versaprm', 'prm-math-psa' or 'prm-causal' (a token-classifier PRM such as Qwen's is "
            "served by kind='vllm-pooling')."
        )
    return type(f"Served{cls.__name__}", (ServedPairs, cls), {"__module__": __name__})


class VLLMCompletionsPRM:
    """``load_backbone(url, kind="vllm-completions", tokenizer=..., family=...)``: see the module docstring."""

    @classmethod
    def from_pretrained(cls, name_or_path: str, tokenizer: Any = None, family: str = "prm-math-shepherd",
                        trust_remote_code: bool = False, **kwargs: Any) -> Any:
        """A served causal PRM of ``family`` at the server ``name_or_path``.

        Args:
            name_or_path: The server, e.g. ``"http://127.0.0.1:8000"``.
            tokenizer: The PRM's tokenizer (object, folder or hub id): the inputs are rendered and tokenized here.
            family: The PRM's family kind (its rendering and tokens).
            trust_remote_code: For loading a tokenizer by name.
            **kwargs: ``model`` (the served name; default the first ``/v1/models`` lists), ``max_length`` (default:
                the smaller of the tokenizer's and the server's ``max_model_len``), ``concurrency``,
                ``timeout``, ``max_retries``, ``backoff``, ``api_key``, ``total_timeout``, ``max_response_bytes``,
                ``extra_body``, and the family's own options (``batch_size``, ``premise_selection``, ...).
        """
        if tokenizer is None:
            raise ValueError("kind='vllm-completions' needs tokenizer=: the PRM's tokenizer (a folder, a hub id or a "
                             "tokenizer object), so inputs are rendered and tokenized exactly as the local family.")
        if isinstance(tokenizer, str) or hasattr(tokenizer, "__fspath__"):
            from transformers import AutoTokenizer

            check_model_files(tokenizer)  # a FIFO tokenizer.json would block the load
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer), trust_remote_code=trust_remote_code)
        return served_family(family)(str(name_or_path), tokenizer, **kwargs)
