"""ARES rewards for verl: a custom reward function and a dense (per-step) reward manager. verl is not a dependency.

**A custom reward function** (verl's ``custom_reward_function``): :func:`compute_score` has verl's signature
``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`` (the ``naive`` reward manager
and the reward loop call it per response) and :func:`compute_score_batch` the ``batch`` manager's
``(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)``::

    custom_reward_function.path=pkg://ares_rerank.verl custom_reward_function.name=compute_score
    # or, scoring a whole batch in one call:
    custom_reward_function.name=compute_score_batch reward_model.reward_manager=batch

Each returns ``{"score": reward, "ares_scored", "ares_num_steps", "ares_first_error", "ares_flagged_frac"}`` per
response (verl uses ``score`` as the reward, at the response's last token, and logs the rest). verl gives a reward
function no prompt, so the prompt (the base claims ARES judges the steps against) is read from
``extra_info[prompt_key]`` (default ``"question"``, which verl's gsm8k preprocessing stores); ``ground_truth`` is
unused (ARES needs no reference answer).

**A dense reward manager**: :class:`AresDenseRewardManager` takes verl's ``DataProto`` (``batch["prompts"]``
left-padded, ``batch["responses"]`` right-padded, ``batch["attention_mask"]`` over both) and returns a
``reward_tensor`` of shape (batch, response_length) holding each step's tau at the response token that ends that
step (its character spans mapped to tokens by the tokenizer's offsets), for token-level rewards::

    reward_manager.source=importlib reward_manager.module.path=pkg://ares_rerank.verl
    reward_manager.name=AresDenseRewardManager

**Where scoring happens.** Locally, with the default reranker that :data:`ares_rerank.rewards.ares_reward` uses
(configured by the ``ARES_RERANK_*`` variables or :func:`~ares_rerank.rewards.configure_default`; one call at a
time in this process), or on a running ``ares-rerank serve`` when ``server_url=`` (a reward kwarg, e.g.
``+custom_reward_function.reward_kwargs.server_url=http://127.0.0.1:5000``) or ``$ARES_RERANK_SERVER_URL`` is set.
A response that cannot be scored (empty, blank, a backbone error on it) gets ``unscorable_value``: by default 0.0
locally and the server's ``--unscorable-value`` through a server.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections import defaultdict
from typing import Any, Mapping, Sequence

from .backbones.served import JsonClient, map_bounded
from .config import is_finite_number
from .records import PROMPT_ROLES, message_text
from .rewards import backbone_lock, default_reranker
from .openrlhf import REWARD_PATH, reward_answer


__all__ = [
    "SERVER_URL_ENV",
    "AresDenseRewardManager",
    "compute_score",
    "compute_score_batch",
    "score_responses",
    "step_token_positions",
]

logger = logging.getLogger(__name__)

SERVER_URL_ENV = "ARES_RERANK_SERVER_URL"
_LOG_KEYS = ("ares_scored", "ares_num_steps", "ares_first_error", "ares_flagged_frac")
_REQUEST_SIZE = 256  # responses per request to a server
_CONCURRENT_REQUESTS = 8
# Keywords verl's reward managers may add to a reward function call; accepted and unused.
_VERL_KWARGS = {"reward_router_address", "reward_model_tokenizer", "sandbox_fusion_url", "concurrent_semaphore",
                "memory_limit_mb"}
_clients: dict[str, JsonClient] = {}
_clients_lock = threading.Lock()
_warned: set[str] = set()


def score_responses(
    prompts: Sequence[Any],
    responses: Sequence[str],
    *,
    server_url: str | None = None,
    unscorable_value: float | None = None,
    reranker: Any = None,
) -> list[dict[str, Any]]:
    """ARES rewards for (prompt, response) pairs, locally or on a server (see the module docstring).

    Args:
        prompts: One prompt per response (text; locally also a list of chat messages).
        responses: The responses' text.
        server_url: A running ``ares-rerank serve`` (its root, or its ``/get_reward`` URL); ``None``:
            ``$ARES_RERANK_SERVER_URL``, else score locally.
        unscorable_value: The reward of a response that cannot be scored; ``None``: 0.0 locally, the server's value
            through a server.
        reranker: An :class:`~ares_rerank.rerank.AresReranker` to score with locally (default: the default reranker).

    Returns:
        One dict per response: ``score`` (the reward), the ``ares_*`` logs of
        :func:`~ares_rerank.batching.completion_logs`, ``step_scores`` (tau per step) and ``step_ends`` (character
        offsets in the response).
    """
    if unscorable_value is not None and not is_finite_number(unscorable_value):
        raise ValueError(f"unscorable_value={unscorable_value!r} must be a finite number (verl needs a float reward "
                         "for every response), e.g. 0.0, or None.")
    url = server_url if server_url is not None else os.environ.get(SERVER_URL_ENV, "").strip() or None
    if url is not None and reranker is not None:
        raise ValueError(f"both reranker= and a server URL ({url!r}) are given: pass one (the server scores with "
                         "its own reranker).")
    if url is None:
        answer = _score_locally(prompts, responses, reranker)
    else:
        answer = _score_on_server(url, [message_text(p, PROMPT_ROLES, "prompt") for p in prompts], responses)
    out = []
    for i, reward in enumerate(answer["rewards"]):
        item = {"score": float(reward), **{key: answer["extra_logs"][key][i] for key in _LOG_KEYS},
                "step_scores": answer["step_scores"][i], "step_ends": answer["step_ends"][i]}
        if not item["ares_scored"] and unscorable_value is not None:
            item["score"] = float(unscorable_value)
        out.append(item)
    return out


def _score_locally(prompts: Sequence[Any], responses: Sequence[str], reranker: Any) -> dict[str, Any]:
    if reranker is None:
        reranker = default_reranker()
    with backbone_lock(reranker.backbone):  # a backbone is not thread-safe; shared with the TRL rewards' lock
        records = reranker.score_pairs(list(prompts), list(responses), on_error="none", show_progress_bar=False)
    return reward_answer(records, responses, reranker.config.threshold, 0.0)


def _score_on_server(url: str, prompts: list[str], responses: Sequence[str]) -> dict[str, Any]:
    """The server's answer for all pairs, sent as requests of at most ``_REQUEST_SIZE`` pairs (a server's
    ``--max-items`` is 4,096 by default), a few at a time; the server batches them together again."""
    root = url.rstrip("/")
    root = root[: -len(REWARD_PATH)] if root.endswith(REWARD_PATH) else root
    with _clients_lock:
        client = _clients.get(root)
        if client is None:  # generous deadlines: a request waits behind the server's queue
            client = _clients[root] = JsonClient(root, api_key="", timeout=1800.0, total_timeout=3600.0)
    starts = range(0, len(responses), _REQUEST_SIZE)

    def post(start: int) -> dict[str, Any]:
        end = start + _REQUEST_SIZE
        payload = {"query": [p + r for p, r in zip(prompts[start:end], responses[start:end])],
                   "prompts": prompts[start:end]}
        return _checked(client.post(REWARD_PATH, payload), len(payload["query"]), root)

    answers = map_bounded(post, list(starts), _CONCURRENT_REQUESTS)
    merged: dict[str, Any] = {key: [] for key in ("rewards", "step_scores", "step_ends")}
    merged["extra_logs"] = {key: [] for key in _LOG_KEYS}
    for answer in answers:
        for key in ("rewards", "step_scores", "step_ends"):
            merged[key] += answer[key]
        for key in _LOG_KEYS:
            merged["extra_logs"][key] += answer["extra_logs"][key]
    return merged


def _checked(answer: Any, size: int, root: str) -> dict[str, Any]:
    """``answer`` if it has the lists of an ``ares-rerank serve`` answer for ``size`` responses, else an error."""
    lists = ("rewards", "step_scores", "step_ends")
    logs = answer.get("extra_logs") if isinstance(answer, dict) else None
    ok = isinstance(logs, dict) and all(isinstance(answer.get(k), list) and len(answer[k]) == size for k in lists)
    if not ok or any(not isinstance(logs.get(k), list) or len(logs[k]) != size for k in _LOG_KEYS):
        raise RuntimeError(f"{root}{REWARD_PATH} answered {str(answer)[:200]!r}, not an ares-rerank serve answer for "
                           f"{size} responses: is {root} an `ares-rerank serve`?")
    return answer


def _prompt_from(extra_info: Any, prompt_key: str, where: str) -> Any:
    if isinstance(extra_info, Mapping) and extra_info.get(prompt_key) is not None:
        return extra_info[prompt_key]
    keys = sorted(extra_info) if isinstance(extra_info, Mapping) else f"a {type(extra_info).__name__}"
    raise ValueError(
        f"{where}: extra_info has no {prompt_key!r} (extra_info: {keys}). ARES judges each step against the prompt, "
        "which verl does not pass to a reward function: store the question in each row's extra_info (verl's gsm8k "
        "preprocessing stores extra_info['question']), or name the key that holds it with the reward kwarg "
        "prompt_key=..."
    )


def _check_kwargs(kwargs: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(kwargs) - _VERL_KWARGS - _warned)
    if unknown:
        _warned.update(unknown)
        logger.warning("%s ignores the keyword arguments %s (it takes server_url, prompt_key, unscorable_value).",
                       where, unknown)


def _result(item: dict[str, Any]) -> dict[str, Any]:
    return {"score": item["score"], **{key: item[key] for key in _LOG_KEYS}}


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any = None,
    extra_info: Mapping[str, Any] | None = None,
    *,
    server_url: str | None = None,
    prompt_key: str = "question",
    unscorable_value: float | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's custom reward function: the ARES reward of one response (see the module docstring).

    Args:
        data_source, ground_truth: verl's; unused.
        solution_str: The response text.
        extra_info: The row's ``extra_info``; ``extra_info[prompt_key]`` is the prompt.
        server_url, unscorable_value: See :func:`score_responses`.
        prompt_key: The ``extra_info`` key holding the prompt.
        **kwargs: Other keywords verl passes; ignored (a warning names unknown ones once).

    Returns:
        ``{"score": reward, "ares_scored", "ares_num_steps", "ares_first_error", "ares_flagged_frac"}``.
    """
    _check_kwargs(kwargs, "ares_rerank.verl.compute_score")
    prompt = _prompt_from(extra_info, prompt_key, "ares_rerank.verl.compute_score")
    (item,) = score_responses([prompt], [solution_str], server_url=server_url, unscorable_value=unscorable_value)
    return _result(item)


def compute_score_batch(
    data_sources: Sequence[Any],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any] | None = None,
    extra_infos: Sequence[Mapping[str, Any]] | None = None,
    *,
    server_url: str | None = None,
    prompt_key: str = "question",
    unscorable_value: float | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """verl's ``batch`` reward manager form of :func:`compute_score`: all responses scored in one call."""
    _check_kwargs(kwargs, "ares_rerank.verl.compute_score_batch")
    if extra_infos is None or len(extra_infos) != len(solution_strs):
        got = "none" if extra_infos is None else len(extra_infos)
        raise ValueError(f"compute_score_batch got {len(solution_strs)} responses and {got} extra_infos: each row's "
                         f"extra_info must hold its prompt under {prompt_key!r}.")
    prompts = [_prompt_from(info, prompt_key, f"compute_score_batch row {i}") for i, info in enumerate(extra_infos)]
    items = score_responses(prompts, solution_strs, server_url=server_url, unscorable_value=unscorable_value)
    return [_result(item) for item in items]


def step_token_positions(tokenizer: Any, token_ids: Sequence[int], text: str, ends: Sequence[int]) -> list[int]:
    """For each character offset in ``ends``, the index in ``token_ids`` of the token holding character ``end - 1``
    of ``text`` (the token that ends a step ending there).

    ``text`` must be ``tokenizer.decode(token_ids, skip_special_tokens=True)``. When the tokenizer re-encodes
    ``text`` to the same tokens (special ones left out), their offsets give the answer; otherwise (a non-canonical
    tokenization a sampler produced, a slow tokenizer) the shortest prefix of ``token_ids`` whose decoded text
    reaches ``end`` is found by bisection (about log2(len) decodes per step).
    """
    ids = [int(t) for t in token_ids]
    if not ids:
        return []
    positions = _positions_from_offsets(tokenizer, ids, text, ends)
    return positions if positions is not None else _positions_from_prefixes(tokenizer, ids, ends)


def _positions_from_offsets(tokenizer: Any, ids: list[int], text: str, ends: Sequence[int]) -> list[int] | None:
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    kept = [i for i, t in enumerate(ids) if t not in special]
    try:
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    except (NotImplementedError, TypeError, ValueError):  # a slow tokenizer has no offsets
        return None
    if not kept or list(encoded["input_ids"]) != [ids[i] for i in kept]:
        return None
    starts = [start for start, _ in encoded["offset_mapping"]]
    return [kept[max(bisect.bisect_left(starts, end) - 1, 0)] for end in ends]


def _positions_from_prefixes(tokenizer: Any, ids: list[int], ends: Sequence[int]) -> list[int]:
    lengths: dict[int, int] = {}

    def decoded_length(k: int) -> int:
        if k not in lengths:
            lengths[k] = len(tokenizer.decode(ids[:k], skip_special_tokens=True))
        return lengths[k]

    out = []
    for end in ends:
        lo, hi = 1, len(ids)  # the smallest k with decoded_length(k) >= end (or all of them)
        while lo < hi:
            mid = (lo + hi) // 2
            if decoded_length(mid) >= end:
                hi = mid
            else:
                lo = mid + 1
        out.append(lo - 1)
    return out


class AresDenseRewardManager:
    """A verl reward manager with dense ARES rewards: each step's tau at the response token that ends the step.

    Built by verl as ``cls(tokenizer=..., num_examine=..., compute_score=..., reward_fn_key=..., **reward_kwargs)``
    and called as ``manager(data, return_dict=False)`` (see the module docstring for the config).

    Args:
        tokenizer: The policy's tokenizer (decodes responses; its offsets map steps to tokens).
        num_examine: Responses per data source printed on the first calls (verl's habit).
        compute_score: verl passes its default reward function here; unused (ARES scores).
        reward_fn_key: The ``non_tensor_batch`` key of the data source (for ``num_examine``).
        server_url, unscorable_value: See :func:`score_responses`. An unscorable response gets
            ``unscorable_value`` at its last token.
        prompt_key: The ``extra_info`` key holding the prompt; a row without it is scored against its decoded prompt
            tokens (chat template text included).
        reranker: An :class:`~ares_rerank.rerank.AresReranker` to score with locally (Python use).

    Returns (when called):
        ``reward_tensor`` (float32, shape of ``batch["responses"]``: zeros except the step ends; the sum over a row
        is the sum of its steps' tau), or with ``return_dict=True`` ``{"reward_tensor", "reward_extra_info"}``,
        the latter holding per-row lists ``score`` (the chain reward) and the ``ares_*`` logs.
    """

    def __init__(
        self,
        tokenizer: Any,
        num_examine: int = 0,
        compute_score: Any = None,
        reward_fn_key: str = "data_source",
        *,
        server_url: str | None = None,
        prompt_key: str = "question",
        unscorable_value: float | None = None,
        reranker: Any = None,
    ) -> None:
        if not hasattr(tokenizer, "decode"):
            raise TypeError(f"AresDenseRewardManager(tokenizer=...) needs a tokenizer, got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.reward_fn_key = reward_fn_key
        self.server_url = server_url
        self.prompt_key = prompt_key
        self.unscorable_value = unscorable_value
        self.reranker = reranker
        self._printed: dict[Any, int] = defaultdict(int)

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        import torch

        prompt_ids, response_ids = data.batch["prompts"], data.batch["responses"]
        prompt_length = prompt_ids.shape[-1]
        mask = data.batch["attention_mask"]
        response_lengths = [int(n) for n in mask[:, prompt_length:].sum(dim=-1)]
        prompt_lengths = [int(n) for n in mask[:, :prompt_length].sum(dim=-1)]
        rows = len(response_lengths)
        responses = [response_ids[i, : response_lengths[i]].tolist() for i in range(rows)]
        texts = [self.tokenizer.decode(ids, skip_special_tokens=True) for ids in responses]
        prompts = [self._prompt(data, i, prompt_ids[i, prompt_length - prompt_lengths[i]:].tolist())
                   for i in range(rows)]
        items = score_responses(prompts, texts, server_url=self.server_url, unscorable_value=self.unscorable_value,
                                reranker=self.reranker)
        reward = torch.zeros_like(response_ids, dtype=torch.float32)
        for i, item in enumerate(items):
            if not responses[i]:
                continue  # no response token to hold a reward
            if not item["ares_scored"]:
                reward[i, len(responses[i]) - 1] = item["score"]
                continue
            positions = step_token_positions(self.tokenizer, responses[i], texts[i], item["step_ends"])
            for position, tau in zip(positions, item["step_scores"]):
                reward[i, position] += tau  # two steps ending in one token share it
        self._examine(data, prompts, texts, items)
        if not return_dict:
            return reward
        extra = {key: [item[key] for item in items] for key in ("score",) + _LOG_KEYS}
        return {"reward_tensor": reward, "reward_extra_info": extra}

    def _prompt(self, data: Any, row: int, prompt_ids: list[int]) -> Any:
        infos = data.non_tensor_batch.get("extra_info") if hasattr(data, "non_tensor_batch") else None
        info = infos[row] if infos is not None else None
        if isinstance(info, Mapping) and info.get(self.prompt_key) is not None:
            return info[self.prompt_key]
        return self.tokenizer.decode(prompt_ids, skip_special_tokens=True)

    def _examine(self, data: Any, prompts: list[Any], texts: list[str], items: list[dict[str, Any]]) -> None:
        if not self.num_examine:
            return
        sources = getattr(data, "non_tensor_batch", {}).get(self.reward_fn_key)
        for i, item in enumerate(items):
            source = sources[i] if sources is not None else None
            if self._printed[source] < self.num_examine:
                self._printed[source] += 1
                print("[prompt]", prompts[i])
                print("[response]", texts[i])
                print("[ares]", {k: item[k] for k in ("score", "step_scores")})
