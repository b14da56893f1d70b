"""A process reward model served by vLLM's ``/pooling`` endpoint (``task: "token_classify"``) as an ARES backbone.

This is how vLLM serves Qwen2.5-Math-PRM (``Qwen2ForProcessRewardModel``) and other token-classifier PRMs. The
backbone is the local :class:`~ares_rerank.backbones.prms.StepTagPRM` (or, with ``family=``, a published
token-classifier family: ``prm-qwen``, ``prm-reasonflux``, ``prm-trl``, ``prm-pure``; :class:`ServedPooling` is the
served forward pass over any of them) with the forward pass replaced by an HTTP request: premise selection, the
cache, the window policy, base-claim / step roles and **the mask rendering are the local PRM's own code**
(``render_prm_text`` + tag ids placed at recorded positions). The client tokenizes locally and sends token ids, so
the server scores exactly the ids the local PRM would score and the step-tag positions are known, never searched for.
Score = positive-class probability at the judged step's tag.

**Server** (checked against vLLM's source and docs, versions 0.15-0.18: ``/pooling`` with ``task`` and
``PoolingResponse``; earlier releases named the task ``"encode"``, pass ``task="encode"`` there)::

    vllm serve Qwen/Qwen2.5-Math-PRM-7B --runner pooling --trust-remote-code \\
        --max-model-len 4096 --tensor-parallel-size 1

Both row layouts vLLM can return are read: one row per input token (pooling type ``ALL``, or ``STEP`` without a
``step_tag_id``), or one row per step tag (``--pooler-config '{"pooling_type": "STEP", "step_tag_id": 151651}'``).
Rows are class probabilities (vLLM applies the softmax by default): with ``probabilities="auto"`` a row that is not a
probability vector is an error, never softmaxed here unasked (``probabilities="logits"`` says the rows are a token
classifier's logits). **Causal PRMs (Math-Shepherd, RLHFlow) are not served this way**: vLLM's STEP pooling with
``returned_token_ids`` indexes the hidden states, not the logits (vLLM issue 16545, read in vLLM's pooler up to 0.33),
so its rows are no +/- probabilities; score them with their local families (docs/PRMS.md).

Tested against response bodies written from vLLM's ``PoolingResponse`` schema (``tests/fixtures/``) and a local fake
server that runs a real tiny token classifier; vLLM itself cannot run on the CPU-only test machines.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

from .hub import check_model_files
from .loading import backbone_class
from .prms import PRMBackbone, StepTagPRM
from .served import (
    DEFAULT_MAX_RESPONSE_BYTES,
    JsonClient,
    ServerResponseError,
    check_concurrency,
    finite_number,
    score_in_requests,
    served_model_and_window,
)


__all__ = ["ServedPooling", "VLLMPoolingPRM", "served_pooling_family"]


class ServedPooling:
    """Mixin over a token-classifier PRM family (first in the bases): the forward pass is vLLM's ``/pooling``
    (module doc); the family renders, tokenizes and picks the read positions as it does locally.

    Args:
        base_url: The vLLM server, e.g. ``"http://127.0.0.1:8000"``.
        tokenizer: The PRM's tokenizer (object, local folder or hub id): renders and tokenizes the input locally.
        model: The served model name; ``None`` takes the first one ``/v1/models`` lists (on first use).
        task: The ``/pooling`` task (``"token_classify"``; ``"encode"`` for vLLM before the split into tasks).
        probabilities: ``"auto"`` (rows must be probability vectors: anything else is an error naming the cause),
            ``"probs"`` (rows are probabilities) or ``"logits"`` (a token classifier's logits: softmax them here).
        concurrency: Requests in flight at once; each request carries up to ``batch_size`` inputs.
        timeout, max_retries, backoff, api_key, total_timeout, max_response_bytes: See
            :class:`~ares_rerank.backbones.served.JsonClient` (defaults here: 120 s per attempt, 3 retries, 0.5 s,
            ``OPENAI_API_KEY`` for https / loopback servers only, 600 s per request, 32 MiB per answer).
        extra_body: Extra request fields (e.g. ``{"truncate_prompt_tokens": -1}``).
        trust_remote_code: For loading a tokenizer by name.
        **kwargs: The family's own options (``batch_size``, ``max_length`` (default: the smaller of the tokenizer's
            and the server's ``max_model_len``), ``premise_selection``, ``cache_size``, its layout's options).
    """

    def __init__(
        self,
        base_url: str,
        tokenizer: Any,
        model: str | None = None,
        *,
        task: str = "token_classify",
        probabilities: str = "auto",
        concurrency: int = 4,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        api_key: str | None = None,
        total_timeout: float = 600.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        extra_body: dict[str, Any] | None = None,
        trust_remote_code: bool = False,
        **kwargs: Any,
    ) -> None:
        if probabilities not in ("auto", "probs", "logits"):
            raise ValueError(f"probabilities={probabilities!r} is not supported: use 'auto', 'probs' or 'logits'.")
        check_concurrency(concurrency, 4)
        positive_index = kwargs.get("positive_index", 1)
        if not isinstance(positive_index, int) or isinstance(positive_index, bool) or positive_index < 0:
            raise ValueError(f"positive_index={positive_index!r} must be a non-negative integer (Qwen PRM: 1).")
        self.client = JsonClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff, api_key=api_key,
                                 total_timeout=total_timeout, max_response_bytes=max_response_bytes)
        self._window_given = kwargs.get("max_length") is not None
        super().__init__(None, _load_tokenizer(tokenizer, trust_remote_code), **kwargs)  # no local model
        self.served_model = model
        self.task = task
        self.probabilities = probabilities
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self._resolved = False

    def row_token(self) -> int | None:
        """The token id vLLM's STEP pooling would give rows at (``step_tag_id``): the family's tag, or the last id of
        its step separator (TRL's layout); ``None`` when it has neither (then rows must be one per token)."""
        tag = getattr(self, "tag_id", None)
        if isinstance(tag, int):
            return tag
        separator = getattr(self, "separator_ids", None)
        return int(separator[-1]) if separator else None

    # -- the served forward pass --------------------------------------------------------------------------------------
    def _compute(self, keys: list[tuple]) -> list[float]:
        self._resolve()  # only called with pairs to compute: a call answered from the cache needs no server
        return super()._compute(keys)

    def chain_step_probs(self, base_claims: Sequence[str], steps: Sequence[str]) -> list[float]:
        self._resolve()
        return super().chain_step_probs(base_claims, steps)

    def score_encoded(self, items: Sequence[dict[str, Any]]) -> list[Any]:
        """Send items in length-sorted batches of ``batch_size``, ``concurrency`` requests at a time."""
        return score_in_requests(self._score_batch, items, self.batch_size, self.concurrency, self.stats)

    def tag_probs(self, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """One ``/pooling`` request for the batch; the positive-class probability at each wanted tag."""
        body = {"model": self.served_model, "input": [list(item["input_ids"]) for item in items], "task": self.task}
        body.update(self.extra_body)
        return self.tag_probs_from_answer(self.client.post("/pooling", body), items)

    def tag_probs_from_answer(self, answer: Any, items: Sequence[dict[str, Any]]) -> list[list[float]]:
        """The positive-class probability at each wanted tag of ``items``, read from a decoded ``/pooling`` answer.

        Returns:
            Per item, one finite probability in [0, 1] per wanted tag (every tag, or the last).

        Raises:
            ServerResponseError: Entries, rows or numbers that do not fit the request (wrong counts, not numbers,
                NaN / inf, a probability outside [0, 1]).
        """
        url = self.client.root + "/pooling"
        entries = _entries(answer, len(items), url)
        out = []
        for item, entry, wanted in zip(items, entries, self.tag_rows(items)):
            rows = entry.get("data") if isinstance(entry, dict) else None
            if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
                raise ServerResponseError(
                    f"{url} returned data that is not a list of rows ({str(entry)[:200]}): serve the PRM with "
                    f"task={self.task!r} (one row of class scores per token) and encoding_format 'float'.", url,
                )
            index = self._row_index(item["input_ids"], len(rows), url)
            missing = [p for p in wanted if p not in index]
            if missing:
                raise ServerResponseError(
                    f"{url} returned one row per token id {self.row_token()}, but the PRM reads position "
                    f"{missing[0]}, which holds token {item['input_ids'][missing[0]]}: serve it with one row per token "
                    "(pooling_type ALL).", url)
            out.append([self._positive(rows[index[p]], url) for p in wanted])
        return out

    def _row_index(self, ids: Sequence[int], num_rows: int, url: str) -> dict[int, int]:
        """Map token positions of step tags to rows: rows are per token, or per step-tag occurrence."""
        if num_rows == len(ids):
            return {p: p for p in range(len(ids))}
        token = self.row_token()
        tags = [p for p, t in enumerate(ids) if t == token] if token is not None else []
        if token is not None and num_rows == len(tags):
            return {p: r for r, p in enumerate(tags)}
        per_tag = (f" or one per step tag (STEP with step_tag_id={token})" if token is not None else "")
        raise ServerResponseError(
            f"{url} returned {num_rows} rows for an input of {len(ids)} tokens with {len(tags)} step tags (id "
            f"{token}): expected one row per token (pooling_type ALL, or STEP without step_tag_id){per_tag}. Check "
            "the server's --pooler-config and the PRM's layout (step_tag=, family=).", url,
        )

    def _positive(self, row: list[Any], url: str) -> float:
        values = [finite_number(x) for x in row]
        if len(row) <= self.positive_index or None in values:
            raise ServerResponseError(
                f"{url} returned the row {str(row[:8])[:200]}: expected numbers (all finite, no NaN / inf) with a "
                f"column positive_index={self.positive_index} (a 2-label PRM head gives [P(negative), P(positive)]).",
                url,
            )
        is_probs = all(0.0 <= v <= 1.0 for v in values) and abs(sum(values) - 1.0) < 1e-3
        if self.probabilities == "auto" and not is_probs:
            raise ServerResponseError(
                f"{url} returned the row {values[:8]}, which is not a probability vector (vLLM softmaxes a token "
                "classifier's rows unless told not to). A causal PRM served with STEP pooling and returned_token_ids "
                "(Math-Shepherd's recipe) returns rows of hidden states there, not logits (vLLM issue 16545): score "
                "it locally with its family (kind='prm-math-shepherd' / 'prm-rlhflow', docs/PRMS.md). If the rows are "
                "a token classifier's logits, pass probabilities='logits'.", url,
            )
        if self.probabilities == "probs" or is_probs and self.probabilities == "auto":
            if not 0.0 <= values[self.positive_index] <= 1.0:
                raise ServerResponseError(
                    f"{url} returned {values[:8]} with probabilities='probs': not in [0, 1].", url,
                )
            return values[self.positive_index]
        top = max(values)
        weights = [math.exp(v - top) for v in values]
        return weights[self.positive_index] / sum(weights)

    # -- first use: model name and window -----------------------------------------------------------------------------
    def _resolve(self) -> None:
        if not self._resolved:
            self.served_model, self.max_length = served_model_and_window(self.client, self.served_model,
                                                                         self.max_length, self._window_given)
            self._resolved = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client.root!r}, model={self.served_model!r})"


class VLLMPoolingPRM(ServedPooling, StepTagPRM):
    """A served token-classifier PRM, rendered exactly as the local :class:`StepTagPRM` (see the module doc);
    ``load_backbone(url, kind="vllm-pooling", tokenizer=..., family=...)`` serves a published family's layout
    instead (:func:`served_pooling_family`).

    Args:
        base_url, tokenizer, model: See :class:`ServedPooling`.
        step_tag: The tag after every step; its id is looked up from the tokenizer (Qwen: ``"<extra_0>"``).
        positive_index: Column of the positive class in each row (Qwen: 1).
        **kwargs: :class:`ServedPooling`'s options (``task``, ``probabilities``, ``concurrency``, timeouts,
            ``extra_body``, ``trust_remote_code``) and :class:`StepTagPRM`'s (``system_prompt``, ``step_separator``,
            ``use_chat_template``, ``batch_size``, ``max_length``, ``premise_selection``, ``cache_size``).
    """

    def __init__(self, base_url: str, tokenizer: Any, model: str | None = None, *, step_tag: str = "<extra_0>",
                 positive_index: int = 1, **kwargs: Any) -> None:
        super().__init__(base_url, tokenizer, model, step_tag=step_tag, positive_index=positive_index, **kwargs)

    @classmethod
    def from_pretrained(cls, name_or_path: str, tokenizer: Any = None, family: str | None = None,
                        **kwargs: Any) -> Any:
        """``load_backbone(url, kind="vllm-pooling", tokenizer=..., family=..., **kwargs)`` lands here
        (``name_or_path`` = URL); without ``family`` the configurable layout (``step_tag=``, ``system_prompt=``...)."""
        if tokenizer is None:
            raise ValueError(
                "kind='vllm-pooling' needs tokenizer=: the PRM's tokenizer (a local folder, a hub id or a tokenizer "
                "object), so inputs are rendered and tokenized exactly as the local PRM does."
            )
        if family is None or family == "prm":
            return cls(str(name_or_path), tokenizer, **kwargs)
        return served_pooling_family(family)(str(name_or_path), tokenizer, **kwargs)

    def __repr__(self) -> str:
        return f"VLLMPoolingPRM({self.client.root!r}, model={self.served_model!r}, step_tag={self.step_tag!r})"


def served_pooling_family(family: str) -> type:
    """The class of ``family`` (a token-classifier PRM kind: ``"prm-qwen"``, ``"prm-reasonflux"``, ``"prm-trl"``,
    ``"prm-pure"``, ``"prm"``) with :class:`ServedPooling` for its forward pass."""
    cls = backbone_class(family)
    if not (isinstance(cls, type) and issubclass(cls, PRMBackbone) and getattr(cls, "reads", "") == "token-class"):
        raise ValueError(
            f"family={family!r} is not a token-classifier PRM: use 'prm-qwen', 'prm-reasonflux', 'prm-trl', "
            "'prm-pure' or 'prm' (a causal PRM read from next-token log-probabilities is served by "
            "kind='vllm-completions'; a value-head PRM (Skywork, ActPRM) has no /pooling reading here)."
        )
    if cls is StepTagPRM:
        return VLLMPoolingPRM
    return type(f"Served{cls.__name__}", (ServedPooling, cls), {"__module__": __name__})


def _load_tokenizer(tokenizer: Any, trust_remote_code: bool) -> Any:
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        check_model_files(tokenizer)  # a FIFO tokenizer.json would block the load
        return AutoTokenizer.from_pretrained(str(tokenizer), trust_remote_code=trust_remote_code)
    if not hasattr(tokenizer, "encode"):
        raise TypeError(f"tokenizer={tokenizer!r} is not a tokenizer: pass a folder, a hub id or a tokenizer object.")
    return tokenizer


def _entries(answer: Any, count: int, url: str) -> list[Any]:
    """The ``data`` entries of a ``PoolingResponse``, in input order (sorted by their ``index``)."""
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list) or len(entries) != count:
        got = len(entries) if isinstance(entries, list) else "no"
        raise ServerResponseError(
            f"{url} answered with {got} data entries for {count} inputs ({str(answer)[:200]}): is this vLLM's "
            "/pooling serving a token classifier?", url,
        )
    if all(isinstance(e, dict) and isinstance(e.get("index"), int) for e in entries):
        entries = sorted(entries, key=lambda e: e["index"])
        if [e["index"] for e in entries] != list(range(count)):
            raise ServerResponseError(
                f"{url} answered with entry indexes {[e['index'] for e in entries][:20]} for {count} inputs: expected "
                f"each of 0..{count - 1} once.", url,
            )
    return entries
