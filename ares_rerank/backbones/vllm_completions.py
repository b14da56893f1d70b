"""A causal PRM (Math-Shepherd, RLHFlow, VersaPRM, Math-psa, your own ``CausalPRM``, or an implicit PRM) served by
vLLM's OpenAI-compatible ``/v1/completions``, read from real token log-probabilities (``kind="vllm-completions"``).

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

**Implicit PRMs** (``family="prm-implicit"`` / ``"prm-eurus"``, :class:`ServedLogRatio`): the PRM on this server and
its reference LM on ``ref_url=``; per batch one request to each with the inputs' ids up to their last read and
``"prompt_logprobs": 0``, whose per-token log-probabilities the family sums as it does locally.
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
    map_bounded,
    score_in_requests,
    served_model_and_window,
)


__all__ = ["ServedCompletions", "ServedLogRatio", "ServedPairs", "VLLMCompletionsPRM", "served_family"]


class ServedCompletions:
    """Mixin over a PRM family (first in the bases): the family's rendering and reading, its forward pass on vLLM's
    ``/v1/completions`` (the client, the served name and window on first use, requests of ``batch_size`` items)."""

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, concurrency: int = 4,
                 timeout: float = 120.0, max_retries: int = 3, backoff: float = 0.5, api_key: str | None = None,
                 total_timeout: float = 600.0, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 extra_body: dict[str, Any] | None = None, **kwargs: Any) -> None:
        check_concurrency(concurrency, 4)
        self.http = {"timeout": timeout, "max_retries": max_retries, "backoff": backoff, "api_key": api_key,
                     "total_timeout": total_timeout, "max_response_bytes": max_response_bytes}
        self.client = JsonClient(base_url, **self.http)
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

    def prompt_logprobs(self, client: JsonClient, model: str | None, prompts: Sequence[Sequence[int]],
                        spans: Sequence[tuple[int, int]]) -> list[list[float]]:
        """One ``/v1/completions`` request for ``prompts`` (token ids, ``"prompt_logprobs": 0``, one new token):
        per prompt, ``log P(ids[t] | ids[:t])`` for ``t`` in its span ``(first, last)``."""
        body = {"model": model, "prompt": [list(p) for p in prompts], "max_tokens": 1, "temperature": 0.0,
                "prompt_logprobs": 0, **self.extra_body}
        answer = client.post("/v1/completions", body)
        url = client.root + "/v1/completions"
        choices = answer_choices(answer, len(prompts), url, f"{len(prompts)} prompts",
                                 "is this vLLM's /v1/completions?")
        out = []
        for choice, prompt, (first, last) in zip(choices, prompts, spans):
            rows = choice.get("prompt_logprobs")
            if not isinstance(rows, list) or len(rows) != len(prompt):
                rows = None
            values = []
            for t in range(first, last + 1):
                row = rows[t] if rows is not None else None
                entry = row.get(str(prompt[t])) if isinstance(row, dict) else None
                value = finite_number(entry.get("logprob")) if isinstance(entry, dict) else None
                if value is None or value > 1e-6:
                    raise ServerResponseError(
                        f"{url} returned no usable prompt log-probability of token {prompt[t]} at position {t} of "
                        f"{len(prompt)} ({str(choice)[:200]}): serve the model with vLLM >= 0.5.5, which answers "
                        "\"prompt_logprobs\" with one entry per prompt token.", url)
                values.append(min(value, 0.0))
            out.append(values)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.root!r}, model={self.served_model!r})"


class ServedPairs(ServedCompletions):
    """A causal PRM family's forward pass on ``/v1/completions``: the good and the bad token after each read
    position (module doc)."""

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """One request for the batch: two prompts per read position; ``P(good) / (P(good) + P(bad))`` at each."""
        reads = [(i, p) for i, rows in enumerate(self.tag_rows(items)) for p in rows]
        prompts = []
        for i, p in reads:
            head = [int(t) for t in items[i]["input_ids"][: p + 1]]
            prompts += [head + [self.good_id], head + [self.bad_id]]
        last = [(len(p) - 1, len(p) - 1) for p in prompts]
        logprobs = [row[0] for row in self.prompt_logprobs(self.client, self.served_model, prompts, last)]
        out: list[list[float]] = [[] for _ in items]
        for j, (i, _) in enumerate(reads):
            good, bad = logprobs[2 * j], logprobs[2 * j + 1]
            out[i].append(1.0 / (1.0 + math.exp(bad - good)))
        self.token_stats.tokens += sum(map(len, prompts))
        self.token_stats.positions += sum(map(len, prompts))
        return out


class ServedLogRatio(ServedCompletions):
    """An implicit PRM's forward pass (``family="prm-implicit"`` / ``"prm-eurus"``): the PRM on ``base_url`` and the
    reference LM on ``ref_url``, each one ``/v1/completions`` request per batch with ``"prompt_logprobs": 0`` on the
    PRM tokenizer's ids; the per-token log-probabilities from the step reads' first to last position, then the
    family's own sums (:meth:`~ares_rerank.backbones.prms.implicit.ImplicitPRM.tag_rewards`).

    Args:
        ref_url: The server of the reference LM (EurusPRM's: Qwen/Qwen2.5-Math-7B-Instruct), serving the same
            vocabulary.
        ref_model: Its served name (default: the first ``ref_url``'s ``/v1/models`` lists).
        (the rest): :class:`ServedCompletions`'s and the family's.
    """

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, ref_url: str | None = None,
                 ref_model: str | None = None, **kwargs: Any) -> None:
        if not isinstance(ref_url, str) or not ref_url:
            raise ValueError(f"ref_url={ref_url!r}: a served implicit PRM needs the reference LM's server too, e.g. "
                             "ref_url='http://127.0.0.1:8001' (a vLLM serving Qwen/Qwen2.5-Math-7B-Instruct for "
                             "EurusPRM).")
        if ref_model is not None and not isinstance(ref_model, str):
            raise TypeError(f"ref_model={type(ref_model).__name__}: served, it is the reference's served name (a "
                            "string) on ref_url, or None for the first model it lists.")
        super().__init__(base_url, tokenizer, model, **kwargs)
        self.ref_client = JsonClient(ref_url, **self.http)
        self.ref_served_model = ref_model

    def _resolve(self) -> None:
        if not self._resolved:  # the reference first: the PRM's marks both resolved, so a failure here is retried
            self.ref_served_model, self.max_length = served_model_and_window(
                self.ref_client, self.ref_served_model, self.max_length, self._window_given)
            super()._resolve()

    def token_logprobs(self, items: Sequence[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
        """Per item, the two models' token log-probabilities from ``start`` to the last read (two requests, sent
        together)."""
        import torch

        self._resolve()
        prompts = [[int(t) for t in item["input_ids"][: max(item["tags"][-1], item["start"]) + 1]] for item in items]
        spans = [(item["start"], len(p) - 1) for item, p in zip(items, prompts)]
        asked = [(self.client, self.served_model), (self.ref_client, self.ref_served_model)]
        prm, ref = map_bounded(lambda server: self.prompt_logprobs(server[0], server[1], prompts, spans), asked,
                               min(2, self.concurrency))
        self.token_stats.tokens += 2 * sum(map(len, prompts))
        self.token_stats.positions += 2 * sum(map(len, prompts))
        as_tensor = [torch.tensor(values, dtype=torch.float64) for values in prm]
        return as_tensor, [torch.tensor(values, dtype=torch.float64) for values in ref]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.client.root!r}, model={self.served_model!r}, "
                f"ref_url={self.ref_client.root!r})")


def served_family(family: str) -> type:
    """The class of ``family`` with its forward pass on ``/v1/completions``: a causal PRM kind read from next-token
    log-probabilities (``"prm-math-shepherd"``, ``"prm-rlhflow"``, ``"prm-versaprm"``, ``"prm-math-psa"`` (its
    adapter merged into the served model), ``"prm-causal"``) with :class:`ServedPairs`, or an implicit PRM
    (``"prm-implicit"``, ``"prm-eurus"``; ``ref_url=`` the reference's server) with :class:`ServedLogRatio`."""
    cls = backbone_class(family)
    reads = getattr(cls, "reads", "") if isinstance(cls, type) and issubclass(cls, PRMBackbone) else ""
    if reads not in ("next-token", "log-ratio"):
        raise ValueError(
            f"family={family!r} is not a causal PRM read from next-token log-probabilities: use 'prm-math-shepherd', "
            "'prm-rlhflow', 'prm-versaprm', 'prm-math-psa' or 'prm-causal', or an implicit PRM ('prm-implicit', "
            "'prm-eurus', with ref_url=) (a token-classifier PRM such as Qwen's is served by kind='vllm-pooling')."
        )
    mixin = ServedPairs if reads == "next-token" else ServedLogRatio
    return type(f"Served{cls.__name__}", (mixin, cls), {"__module__": __name__})


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
            **kwargs: ``ref_url`` and ``ref_model`` (an implicit PRM's reference server and its served name),
                ``model`` (the served name; default the first ``/v1/models`` lists), ``max_length`` (default:
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
