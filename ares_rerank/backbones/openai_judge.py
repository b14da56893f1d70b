"""A served LLM as an ARES entailment judge: any OpenAI-compatible server (vLLM, SGLang, llama.cpp, OpenAI).

Same question as the local :class:`~ares_rerank.backbones.judge.LLMJudge` (its prompt text, rendered by the same
method), asked over HTTP with ``max_tokens=1, temperature=0`` and read from the logprobs of the first answer token:

    score = P(yes) / (P(yes) + P(no)) = sigmoid(logprob(yes) - logprob(no))

**Where the two logprobs come from.** With answer token ids known (given, or ``answer_token_ids="auto"``: asked
from vLLM's ``/tokenize``), the request carries vLLM's ``logprob_token_ids`` (the server returns exactly those
tokens' logprobs, whatever their rank) and ``return_tokens_as_token_ids`` (keys ``"token_id:<id>"``). Otherwise,
and on servers that ignore those fields, the answers are looked up by their text among the top-k logprobs
(``top_logprobs``; OpenAI caps it at 20 for chat and 5 for completions, vLLM at ``--max-logprobs``, default 20).
No logprobs in the answer, or an answer token missing from them, is a :class:`ServerResponseError` that says what
to change (``missing_answer="floor"`` instead bounds a missing token's logprob by the smallest one returned).

**Endpoints.** ``"completions"`` sends the plain-text prompt (ending ``"\\nAnswer:"``, answers ``" Yes"`` / ``" No"``,
as the local judge without a chat template); ``"chat"`` sends a user turn (after an optional system turn) and the
server applies the model's chat template (answers ``"Yes"`` / ``"No"``). The paper's Likert mode needs constrained
scoring of multi-token labels, which these endpoints do not offer: use the local judge for it.

Deterministic for fixed inputs as ARES requires, provided the server is (greedy, no sampling; batch-invariant
kernels where the engine offers them). Requests run ``concurrency`` at a time; each distinct (selected premises,
hypothesis) pair is sent once and cached (LRU).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from .cache import LRUCache, ScoringStats, cached_values, pair_keys
from .judge import JUDGE_PROMPT, LIKERT_OPTIONS, PLAIN_SUFFIX, JudgeBase, check_missing_rating
from .selection import PremiseSelector, get_selector
from .served import JsonClient, ServerError, ServerResponseError, map_bounded


__all__ = ["OpenAIJudge"]

_ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class OpenAIJudge(JudgeBase):
    """An ARES backbone that asks a served LLM "does the context entail the hypothesis?" (see the module doc).

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8000"`` or ``"http://127.0.0.1:8000/v1"``.
        model: The served model name; ``None`` takes the first one ``/v1/models`` lists (on first use).
        endpoint: ``"completions"`` (plain prompt) or ``"chat"`` (the server applies the chat template).
        answers: ``(yes, no)`` strings; default ``(" Yes", " No")`` for completions, ``("Yes", "No")`` for chat.
        answer_token_ids: ``(yes_id, no_id)``; ``"auto"`` asks the server's ``/tokenize`` (vLLM) on first use and
            falls back to top-k when the server has none; ``None`` uses top-k only (standard OpenAI fields only).
        top_logprobs: How many top tokens to ask for.
        missing_answer: ``"error"`` (default) or ``"floor"`` when one answer is absent from the returned logprobs.
        prompt: Template with ``{context}`` and ``{hypothesis}`` (default: the local judge's).
        system_prompt: Optional system turn (chat endpoint only).
        premise_selection: ``"all"``, ``"relevant"``, ``"relevant:K"`` or a selector (before the cache).
        cache_size: LRU entries (0 disables the cache).
        concurrency: Requests in flight at once.
        timeout, max_retries, backoff, api_key: See :class:`~ares_rerank.backbones.served.JsonClient`.
        extra_body: Extra request fields, e.g. ``{"seed": 0}`` or vLLM's ``{"chat_template_kwargs": {...}}``.
        max_new_tokens, missing_rating: For :meth:`chain_step_probs` (the LLM-Judge baseline), as the local judge.

    ``stats`` counts requests sent (``forward_passes``), pairs computed and cache hits. The prompts and the
    whole-chain baseline are the local judge's (:class:`~ares_rerank.backbones.judge.JudgeBase`).
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        endpoint: str = "completions",
        answers: tuple[str, str] | None = None,
        answer_token_ids: tuple[int, int] | str | None = "auto",
        top_logprobs: int = 20,
        missing_answer: str = "error",
        prompt: str | None = None,
        system_prompt: str | None = None,
        premise_selection: str | PremiseSelector = "all",
        cache_size: int = 100_000,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        api_key: str | None = None,
        extra_body: dict[str, Any] | None = None,
        max_new_tokens: int | None = None,
        missing_rating: float | None = 0.5,
    ) -> None:
        if endpoint not in _ENDPOINTS:
            raise ValueError(f"endpoint={endpoint!r} is not supported: use 'completions' or 'chat'.")
        if missing_answer not in ("error", "floor"):
            raise ValueError(f"missing_answer={missing_answer!r} is not supported: use 'error' or 'floor'.")
        for name, value in (("top_logprobs", top_logprobs), ("concurrency", concurrency)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer.")
        self.client = JsonClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff, api_key=api_key)
        self.model = model
        self.endpoint = endpoint
        default = (" Yes", " No") if endpoint == "completions" else ("Yes", "No")
        self.answers = _check_pair(answers or default, "answers", str)
        self.answer_token_ids = answer_token_ids if answer_token_ids in (None, "auto") else _check_pair(
            answer_token_ids, "answer_token_ids", int)
        self.top_logprobs = top_logprobs
        self.missing_answer = missing_answer
        self.prompt = prompt or JUDGE_PROMPT
        self.likert_options = dict(LIKERT_OPTIONS)
        self.system_prompt = system_prompt
        self.selector = get_selector(premise_selection)
        self.cache = LRUCache(cache_size)
        self.stats = ScoringStats()
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self.max_new_tokens = max_new_tokens
        self.missing_rating = check_missing_rating(missing_rating)
        self.last_ratings: list[float | None] = []
        self._resolved = False

    @classmethod
    def from_pretrained(cls, name_or_path: str, **kwargs: Any) -> OpenAIJudge:
        """``load_backbone(url, kind="openai", **kwargs)`` lands here: ``name_or_path`` is the server URL."""
        return cls(str(name_or_path), **kwargs)

    # -- the protocol ---------------------------------------------------------------------------------------------
    def entailment_probs(self, premises: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> list[float]:
        """One probability per (premises[i], hypotheses[i]); distinct pairs are sent once, concurrently."""
        keys = pair_keys(self.selector, premises, hypotheses)
        return [float(v) for v in cached_values(self.cache, self.stats, keys, self._score_pairs)]

    def request_for(self, premises: Sequence[str], hypothesis: str) -> tuple[str, dict[str, Any]]:
        """The endpoint path and JSON body sent for one pair (after premise selection), for logging and debugging.

        Contacts the server on first use (model name, answer token ids), as scoring does.
        """
        self._resolve()
        kept, _, hypothesis = pair_keys(self.selector, [premises], [hypothesis])[0]
        return _ENDPOINTS[self.endpoint], self._payload(self.render(kept, hypothesis), max_tokens=1)

    # -- pairs --------------------------------------------------------------------------------------------------------
    def _score_pairs(self, keys: list[tuple]) -> list[float]:
        """One request per pair, ``concurrency`` at a time (the cache has already removed repeats)."""
        self._resolve()
        values = map_bounded(self._score_pair, keys, self.concurrency)
        self.stats.forward_passes += len(keys)
        self.stats.pairs_computed += len(keys)
        return values

    def _score_pair(self, key: tuple) -> float:
        kept, _, hypothesis = key
        path, payload = _ENDPOINTS[self.endpoint], self._payload(self.render(list(kept), hypothesis), max_tokens=1)
        answer = self.client.post(path, payload)
        top = self._first_token_logprobs(answer, self.client.root + path)
        yes, no = (self._lookup(top, i, self.client.root + path) for i in range(2))
        if yes == no:
            return 0.5  # also covers both at -inf
        diff = yes - no  # sigmoid(diff), written so that exp never overflows
        return 1.0 / (1.0 + math.exp(-diff)) if diff >= 0 else math.exp(diff) / (1.0 + math.exp(diff))

    def _payload(self, user_text: str, max_tokens: int, scoring: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "temperature": 0.0}
        if self.endpoint == "completions":
            body["prompt"] = user_text + PLAIN_SUFFIX
            if scoring:
                body["logprobs"] = self.top_logprobs
        else:
            messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            body["messages"] = messages + [{"role": "user", "content": user_text}]
            if scoring:
                body.update(logprobs=True, top_logprobs=self.top_logprobs)
        if scoring and isinstance(self.answer_token_ids, tuple):
            body.update(logprob_token_ids=list(self.answer_token_ids), return_tokens_as_token_ids=True)
        body.update(self.extra_body)
        return body

    def _first_token_logprobs(self, answer: Any, url: str) -> dict[str, float]:
        """``{token: logprob}`` at the first generated position, from a completions or chat answer."""
        try:
            choice = answer["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise ServerResponseError(f"{url} answered without choices: {str(answer)[:300]}", url) from None
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        if self.endpoint == "chat" and isinstance(logprobs, dict) and logprobs.get("content"):
            first = logprobs["content"][0]
            entries = [(e.get("token"), e.get("logprob")) for e in first.get("top_logprobs") or []]
            entries.append((first.get("token"), first.get("logprob")))
        elif self.endpoint == "completions" and isinstance(logprobs, dict) and logprobs.get("top_logprobs"):
            top = logprobs["top_logprobs"][0] or {}
            entries = list(top.items()) if isinstance(top, dict) else [(e.get("token"), e.get("logprob")) for e in top]
            if logprobs.get("tokens") and logprobs.get("token_logprobs"):
                entries.append((logprobs["tokens"][0], logprobs["token_logprobs"][0]))
        else:
            raise ServerResponseError(
                f"{url} returned no logprobs (choice: {str(choice)[:300]}). The judge needs them: use a server that "
                "returns logprobs (vLLM, SGLang, llama.cpp, OpenAI), and for vLLM keep --max-logprobs >= "
                f"top_logprobs={self.top_logprobs}.", url,
            )
        return {str(t): float(lp) for t, lp in entries if t is not None and lp is not None}

    def _lookup(self, top: dict[str, float], i: int, url: str) -> float:
        keys = [self.answers[i]]
        if isinstance(self.answer_token_ids, tuple):
            keys.insert(0, f"token_id:{self.answer_token_ids[i]}")
        for key in keys:
            if key in top:
                return top[key]
        if self.missing_answer == "floor" and any(k in top for k in self._all_keys(1 - i)):
            return min(top.values())  # the missing token ranks below every returned one
        shown = sorted(top, key=top.get, reverse=True)[:10]
        raise ServerResponseError(
            f"answer {self.answers[i]!r} is not among the {len(top)} logprobs {url} returned (top: {shown}). Raise "
            "top_logprobs=, pass answer_token_ids=(yes_id, no_id) so vLLM returns them by id (logprob_token_ids), set "
            "answers= to the strings this model's tokenizer produces, or set missing_answer='floor'.", url,
        )

    def _all_keys(self, i: int) -> list[str]:
        ids = self.answer_token_ids
        return [self.answers[i]] + ([f"token_id:{ids[i]}"] if isinstance(ids, tuple) else [])

    # -- first use: model name and answer token ids ---------------------------------------------------------------
    def _resolve(self) -> None:
        if self._resolved:
            return
        if self.model is None:
            listing = self.client.get("/v1/models")
            try:
                self.model = str(listing["data"][0]["id"])
            except (KeyError, IndexError, TypeError):
                raise ServerResponseError(
                    f"{self.client.root}/v1/models lists no model ({str(listing)[:200]}): pass model='<served name>'.",
                    self.client.root + "/v1/models",
                ) from None
        if self.answer_token_ids == "auto":
            self.answer_token_ids = self._tokenize_answers()
        self._resolved = True

    def _tokenize_answers(self) -> tuple[int, int] | None:
        """Ask vLLM's ``/tokenize`` for the answers' ids; ``None`` (top-k lookup) when the server has no such route."""
        ids = []
        for text in self.answers:
            try:
                body = {"model": self.model, "prompt": text, "add_special_tokens": False}
                answer = self.client.post("/tokenize", body)
            except ServerError as err:
                if err.status in (400, 404, 405, 422):
                    return None  # not vLLM: look the answers up by text among the top-k
                raise
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if not isinstance(tokens, list):
                return None
            if len(tokens) != 1:
                raise ValueError(
                    f"answers={self.answers!r}: {text!r} is {len(tokens)} tokens for this model ({tokens}); the judge "
                    "reads one next-token distribution, so each answer must be a single token: pass answers= that are."
                )
            ids.append(int(tokens[0]))
        return ids[0], ids[1]

    # -- LLM-Judge whole-chain baseline (JudgeBase.chain_step_probs) ------------------------------------------------
    def _generate(self, base_claims: list[str], steps: list[str], max_new_tokens: int) -> str:
        """One greedy request on the chain prompt (every base claim: the server's window is its own business)."""
        self._resolve()
        text = self.render_chain(base_claims, steps)
        payload = self._payload(text, max_tokens=max_new_tokens, scoring=False)
        answer = self.client.post(_ENDPOINTS[self.endpoint], payload)
        self.stats.forward_passes += 1
        try:
            choice = answer["choices"][0]
            generated = choice["message"]["content"] if self.endpoint == "chat" else choice["text"]
        except (KeyError, IndexError, TypeError):
            url = self.client.root + _ENDPOINTS[self.endpoint]
            raise ServerResponseError(f"{url} answered without generated text: {str(answer)[:300]}", url) from None
        return generated or ""

    def __repr__(self) -> str:
        return f"OpenAIJudge({self.client.root!r}, model={self.model!r}, endpoint={self.endpoint!r})"


def _check_pair(value: Any, name: str, kind: type) -> tuple[Any, Any]:
    if (
        not isinstance(value, (tuple, list)) or len(value) != 2
        or not all(isinstance(v, kind) and not isinstance(v, bool) for v in value) or value[0] == value[1]
    ):
        example = "(' Yes', ' No')" if kind is str else "(9454, 2753)"
        raise ValueError(f"{name}={value!r} must be two different {kind.__name__}s (yes, no), e.g. {name}={example}.")
    return value[0], value[1]
