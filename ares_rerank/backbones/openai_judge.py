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
to change (``missing_answer="floor"`` instead bounds a missing token's logprob by the smallest one returned). So is
an answer of the wrong shape, and any logprob that is not a finite number <= 0 (NaN, Infinity, a string, 7.0): such
an answer is never turned into a score, so it is never cached and the pair is asked again on the next call.

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

from ..utils.checks import check_positive_int
from .cache import LRUCache, ScoringStats, cached_values, pair_keys
from .judge import JUDGE_PROMPT, LIKERT_OPTIONS, PLAIN_SUFFIX, JudgeBase, check_missing_rating
from .selection import PremiseSelector, get_selector
from .served import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TOTAL_TIMEOUT,
    JsonClient,
    ServerError,
    ServerResponseError,
    check_concurrency,
    finite_number,
    map_bounded,
    model_card,
)


__all__ = ["OpenAIJudge"]

_ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# A logprob a little above 0 is float rounding of log(p) for p ~ 1 (read as 0); anything larger is a broken answer.
LOGPROB_ROUNDING = 1e-4


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
        timeout, max_retries, backoff, api_key, total_timeout, max_response_bytes: See
            :class:`~ares_rerank.backbones.served.JsonClient` (defaults 60 s, 3, 0.5 s, ``OPENAI_API_KEY`` for
            https / loopback servers only, 300 s, 32 MiB).
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
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        extra_body: dict[str, Any] | None = None,
        max_new_tokens: int | None = None,
        missing_rating: float | None = 0.5,
    ) -> None:
        if endpoint not in _ENDPOINTS:
            raise ValueError(f"endpoint={endpoint!r} is not supported: use 'completions' or 'chat'.")
        if missing_answer not in ("error", "floor"):
            raise ValueError(f"missing_answer={missing_answer!r} is not supported: use 'error' or 'floor'.")
        check_positive_int(top_logprobs, "top_logprobs", 5)
        check_concurrency(concurrency, 8)
        self.client = JsonClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff, api_key=api_key,
                                 total_timeout=total_timeout, max_response_bytes=max_response_bytes)
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
        return self.prob_from_answer(self.client.post(path, payload))

    def prob_from_answer(self, answer: Any) -> float:
        """P(yes) / (P(yes) + P(no)) from one decoded answer of the scoring endpoint; always finite, in [0, 1].

        Raises:
            ServerResponseError: The answer has no usable first-token logprobs (missing, of the wrong shape, not a
                finite number <= 0) or lacks an answer token (see ``missing_answer``).
        """
        url = self.client.root + _ENDPOINTS[self.endpoint]
        top = self._first_token_logprobs(answer, url)
        yes, no = (self._lookup(top, i, url) for i in range(2))
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
        """``{token: logprob}`` at the first generated position, from a completions or chat answer; every logprob a
        finite number <= 0 (a null one is skipped, as servers send for tokens they could not score)."""
        choice = _first_choice(answer, url)
        entries = self._logprob_entries(choice.get("logprobs"), url)
        if entries is None:
            raise ServerResponseError(
                f"{url} returned no logprobs (choice: {str(choice)[:300]}). The judge needs them: use a server that "
                "returns logprobs (vLLM, SGLang, llama.cpp, OpenAI), and for vLLM keep --max-logprobs >= "
                f"top_logprobs={self.top_logprobs}.", url,
            )
        top = {}
        for token, logprob in entries:
            if token is None or logprob is None:
                continue
            value = finite_number(logprob)
            if value is None or value > LOGPROB_ROUNDING:
                raise ServerResponseError(
                    f"{url} returned the logprob {logprob!r} for the token {str(token)[:50]!r}: a logprob must be a "
                    "finite number <= 0. The server (or a proxy in front of it) is broken; the answer is not used, "
                    "not cached, and the pair is asked again next time.", url,
                )
            top[str(token)] = min(value, 0.0)
        return top

    def _logprob_entries(self, logprobs: Any, url: str) -> list[tuple[Any, Any]] | None:
        """The (token, logprob) pairs of the first position: its top-k plus the sampled token; ``None`` if absent."""
        if not isinstance(logprobs, dict):
            return None
        if self.endpoint == "chat":  # {"content": [{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}]}
            content = logprobs.get("content")
            if not content:
                return None
            first = content[0] if isinstance(content, list) else None
            if not isinstance(first, dict):
                raise _malformed(url, "logprobs.content", content)
            top, own = first.get("top_logprobs") or [], [(first.get("token"), first.get("logprob"))]
        else:  # {"top_logprobs": [{token: logprob} or [{"token", "logprob"}]], "tokens", "token_logprobs"}
            positions = logprobs.get("top_logprobs")
            if not positions:
                return None
            top = (positions[0] if isinstance(positions, list) else None) or {}
            if isinstance(top, dict):
                top = [{"token": token, "logprob": value} for token, value in top.items()]
            tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
            own = []
            if tokens and values:
                if not isinstance(tokens, list) or not isinstance(values, list):
                    raise _malformed(url, "logprobs.tokens / token_logprobs", [tokens, values])
                own = [(tokens[0], values[0])]
        if not isinstance(top, list) or not all(isinstance(e, dict) for e in top):
            raise _malformed(url, "top_logprobs", top)
        return [(e.get("token"), e.get("logprob")) for e in top] + own

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
            self.model = model_card(self.client, None, "pass model='<served name>'.")["id"]
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
            if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
                raise _malformed(self.client.root + "/tokenize", "tokens (token ids)", tokens)
            if len(tokens) != 1:
                raise ValueError(
                    f"answers={self.answers!r}: {text!r} is {len(tokens)} tokens for this model ({tokens}); the judge "
                    "reads one next-token distribution, so each answer must be a single token: pass answers= that are."
                )
            ids.append(tokens[0])
        return ids[0], ids[1]

    # -- LLM-Judge whole-chain baseline (JudgeBase.chain_step_probs) ------------------------------------------------
    def _generate(self, base_claims: list[str], steps: list[str], max_new_tokens: int) -> str:
        """One greedy request on the chain prompt (every base claim: the server's window is its own business)."""
        self._resolve()
        text = self.render_chain(base_claims, steps)
        payload = self._payload(text, max_tokens=max_new_tokens, scoring=False)
        answer = self.client.post(_ENDPOINTS[self.endpoint], payload)
        self.stats.forward_passes += 1
        url = self.client.root + _ENDPOINTS[self.endpoint]
        choice, field = _first_choice(answer, url), "content" if self.endpoint == "chat" else "text"
        holder = choice.get("message") if self.endpoint == "chat" else choice
        generated = holder[field] if isinstance(holder, dict) and field in holder else 0  # 0: not text, see below
        if not isinstance(generated, (str, type(None))):
            raise ServerResponseError(f"{url} answered without generated text: {str(answer)[:300]}", url)
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


def _first_choice(answer: Any, url: str) -> dict[str, Any]:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        raise ServerResponseError(f"{url} answered without choices: {str(answer)[:300]}", url)
    return choice


def _malformed(url: str, where: str, value: Any) -> ServerResponseError:
    return ServerResponseError(
        f"{url} returned {where} of an unexpected shape: {str(value)[:200]}. Expected the OpenAI / vLLM schema: is "
        "base_url an OpenAI-compatible server, and does no proxy rewrite its answers?", url,
    )
