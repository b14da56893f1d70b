"""ARES rewards for verl: custom reward functions and a dense (per-step) reward manager. verl is not a dependency.

Which verl versions: the keys and call forms below were run on verl 0.9.1 (its Hydra config, reward loop, agent loop
and ``DataProto``; tests/frameworks/test_verl_reward_loop.py, which CI runs) and, with the same tests, on 0.9.0 and
0.8.0; 0.7.1's reward loop has the same interfaces (read, not run) but no token-level hook
(:meth:`AresDenseRewardManager.assemble_rm_scores` is called from 0.8.0 on). verl 0.4-0.6 build reward managers the
older way (see *Older verl* below).

**Custom reward functions** (verl 0.7-0.9: the ``reward.custom_reward_function`` keys; the top-level
``custom_reward_function.*`` keys are a legacy block that 0.9's ``main_ppo`` never reads, so verl would silently score
with its own rule for the data source)::

    reward.custom_reward_function.path=pkg://ares_rerank.verl reward.custom_reward_function.name=async_compute_score

:func:`async_compute_score` and :func:`compute_score` have verl's signature ``(data_source, solution_str,
ground_truth, extra_info=None, **kwargs)``; verl's reward loop calls it once per response, concurrently.
``async_compute_score`` is a coroutine function: verl awaits it on its reward worker's event loop, and the calls that
are waiting there are scored together, in one reranker call (or one server request): the calls that arrive while a
batch is being scored form the next batch, so nothing waits on a timer (the batch grows with the load; at most 256
responses). ``compute_score`` scores one response per call (verl runs it in a thread; calls on one backbone take
turns). Each returns ``{"score": reward, "ares_scored", "ares_num_steps", "ares_first_error", "ares_flagged_frac",
"ares_evaluations"}``:
verl puts ``score`` at the response's last token and logs the rest. verl gives a reward function no prompt, so the
prompt (the base claims ARES judges the steps against) is read from ``extra_info[prompt_key]`` (default
``"question"``, which verl's gsm8k preprocessing stores); ``data_source`` and ``ground_truth`` are unused, whatever
the data source (ARES needs no reference answer).

**A dense reward manager** (verl 0.7-0.9)::

    reward.reward_manager.source=importlib reward.reward_manager.module.path=pkg://ares_rerank.verl
    reward.reward_manager.name=AresDenseRewardManager

verl builds it as ``cls(config=, tokenizer=, compute_score=, reward_router_address=, reward_model_tokenizer=)`` and
awaits ``run_single(data)`` once per response (the calls batched as ``async_compute_score``'s are). Its options come
from ``reward.reward_kwargs`` (e.g. ``+reward.reward_kwargs.server_url=...``). Where the per-step rewards land
depends on verl's path, not on the manager:

- verl's *streaming* reward loop (the agent loop scores each response as its rollout finishes; what verl 0.7-0.9 do
  whenever no verl reward model is enabled, i.e. every ARES run) keeps **one float per response**, at its last
  token (``AgentLoopOutput.reward_score``). There the manager's reward is the chain reward, the same value as
  ``compute_score``'s; the step taus do not reach the trainer.
- verl's *colocated* path (``RewardLoopManager.compute_rm_score``: only when a verl reward model is enabled without
  its own resource pool, and with ``reward.custom_reward_function.path`` set, which makes verl call the manager
  rather than the reward model) assembles a token-level tensor with the manager class's ``assemble_rm_scores``
  (verl 0.8+): there each step's tau lands on the response token that ends the step (its character span mapped to
  tokens by the tokenizer's offsets), and a row sums to the sum of its steps' taus.

**Older verl** (0.4-0.6, read, not run): ``custom_reward_function.path`` / ``.name`` at the top level select
:func:`compute_score`, or :func:`compute_score_batch` with ``reward_model.reward_manager=batch`` (the ``batch``
manager of those versions). Their reward managers are built as ``cls(tokenizer=, num_examine=, compute_score=,
reward_fn_key=, **reward_kwargs)`` and called as ``manager(data, return_dict)``; :class:`AresDenseRewardManager`
takes that form too (it returns the token-level tensor), but those versions load only registered managers, so it must
be registered first (``verl.workers.reward_manager.register("ares_dense")(AresDenseRewardManager)``).

**Where scoring happens.** Locally, with the default reranker that :data:`ares_rerank.rewards.ares_reward` uses
(configured by the ``ARES_RERANK_*`` variables or :func:`~ares_rerank.rewards.configure_default`; one call at a
time per backbone in this process), or on a running ``ares-rerank serve`` when ``server_url=`` (a reward kwarg, e.g.
``+reward.custom_reward_function.reward_kwargs.server_url=http://127.0.0.1:5000``) or ``$ARES_RERANK_SERVER_URL`` is
set. A response that cannot be scored (empty, blank, a backbone error on it) gets ``unscorable_value``: by default 0.0
locally and the server's ``--unscorable-value`` through a server.

Longer than most modules (about 600 lines) on purpose: it is the one verl family module, holding verl's three
surfaces (the reward function, its async batched form, the dense manager in its 0.4-0.6 and 0.7+ forms) and the
step -> token mapping they share; split it when a second verl surface grows.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import inspect
import logging
import os
import threading
import weakref
from collections import defaultdict
from typing import Any, Mapping, Sequence

from ..backbones.served import map_bounded
from ..utils.http import JsonClient
from ..chain import PROMPT_ROLES, message_text
from ..utils.checks import is_finite_number
from .default import backbone_lock, default_reranker
from .openrlhf import REWARD_PATH, reward_answer
from .stats import LOG_KEYS


__all__ = [
    "SERVER_URL_ENV",
    "AresDenseRewardManager",
    "StepRewards",
    "async_compute_score",
    "compute_score",
    "compute_score_batch",
    "score_responses",
    "step_token_positions",
]

logger = logging.getLogger(__name__)

SERVER_URL_ENV = "ARES_RERANK_SERVER_URL"
_REQUEST_SIZE = 256  # responses per request to a server
_MAX_BATCH = 256  # concurrent calls scored together by one batcher call
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
        :func:`~ares_rerank.rewards.stats.completion_logs`, ``step_scores`` (tau per step) and ``step_ends`` (character
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
        item = {"score": float(reward), **{key: answer["extra_logs"][key][i] for key in LOG_KEYS},
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
    return reward_answer(records, responses, reranker.threshold, 0.0)


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
    merged["extra_logs"] = {key: [] for key in LOG_KEYS}
    for answer in answers:
        for key in ("rewards", "step_scores", "step_ends"):
            merged[key] += answer[key]
        for key in LOG_KEYS:
            merged["extra_logs"][key] += answer["extra_logs"][key]
    return merged


def _checked(answer: Any, size: int, root: str) -> dict[str, Any]:
    """``answer`` if it has the lists of an ``ares-rerank serve`` answer for ``size`` responses, else an error."""
    lists = ("rewards", "step_scores", "step_ends")
    logs = answer.get("extra_logs") if isinstance(answer, dict) else None
    ok = isinstance(logs, dict) and all(isinstance(answer.get(k), list) and len(answer[k]) == size for k in lists)
    if not ok or any(not isinstance(logs.get(k), list) or len(logs[k]) != size for k in LOG_KEYS):
        raise RuntimeError(f"{root}{REWARD_PATH} answered {str(answer)[:200]!r}, not an ares-rerank serve answer for "
                           f"{size} responses: is {root} an `ares-rerank serve`?")
    problem = _bad_number(answer, logs)
    if problem is not None:  # a NaN or 1e308 would reach verl's advantages as the reward
        raise RuntimeError(f"{root}{REWARD_PATH} answered {problem}: an ares-rerank serve answers finite rewards, "
                           "scores in [0, 1] and step scores in [0, 1]; check the server (its version, a proxy in "
                           "front of it), nothing was passed on to verl.")
    return answer


def _bad_number(answer: dict[str, Any], logs: dict[str, Any]) -> str | None:
    """What in a server's answer is not a number it can hold, or ``None``: every reward finite (a scored one in
    [0, 1]; an unscored one is the server's --unscorable-value), every step score in [0, 1], every log finite."""
    def unit(value: Any) -> bool:
        return is_finite_number(value) and not isinstance(value, bool) and 0.0 <= float(value) <= 1.0

    for i, reward in enumerate(answer["rewards"]):
        scored = logs["ares_scored"][i]
        if not is_finite_number(scored) or isinstance(scored, bool) or scored not in (0, 1):
            return f"ares_scored[{i}]={scored!r}, not 0 or 1"
        if not is_finite_number(reward) or isinstance(reward, bool) or (scored and not unit(reward)):
            return f"rewards[{i}]={reward!r}" + (", outside [0, 1] for a scored response" if scored else "")
        steps = answer["step_scores"][i]
        if not isinstance(steps, list) or not all(unit(v) for v in steps):
            return f"step_scores[{i}]={str(steps)[:80]}"
        ends = answer["step_ends"][i]
        if not isinstance(ends, list) or not all(isinstance(e, int) and not isinstance(e, bool) for e in ends):
            return f"step_ends[{i}]={str(ends)[:80]}"
    for key in LOG_KEYS:
        bad = [v for v in logs[key] if not is_finite_number(v)]
        if bad:
            return f"extra_logs[{key!r}] holding {bad[0]!r}"
    return None


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
    return {"score": item["score"], **{key: item[key] for key in LOG_KEYS}}


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
        ``{"score": reward}`` and the ``ares_*`` statistics of :data:`~ares_rerank.rewards.stats.LOG_KEYS`.
    """
    _check_kwargs(kwargs, "ares_rerank.verl.compute_score")
    prompt = _prompt_from(extra_info, prompt_key, "ares_rerank.verl.compute_score")
    (item,) = score_responses([prompt], [solution_str], server_url=server_url, unscorable_value=unscorable_value)
    return _result(item)


async def async_compute_score(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`compute_score` as a coroutine function, for verl 0.7+'s reward loop: the calls waiting on one event loop
    are scored together (see the module docstring). Same arguments and result as :func:`compute_score`: its
    signature, written there once, is this function's too (``inspect.signature`` shows it; calls are bound to it)."""
    where = "ares_rerank.verl.async_compute_score"
    try:
        call = _COMPUTE_SCORE.bind(*args, **kwargs)
    except TypeError as err:  # as a def says it, with the function's name
        raise TypeError(f"{where}(): {err}") from None
    call.apply_defaults()
    given = call.arguments
    _check_kwargs(given["kwargs"], where)
    prompt = _prompt_from(given["extra_info"], given["prompt_key"], where)
    item = await _batcher(given["server_url"], given["unscorable_value"], None).score(prompt, given["solution_str"])
    return _result(item)


_COMPUTE_SCORE = inspect.signature(compute_score)
async_compute_score.__signature__ = _COMPUTE_SCORE  # type: ignore[attr-defined]


class _Batcher:
    """Scores the (prompt, response) pairs that calls on one event loop hand it, in batches, off the loop.

    The first call starts a flush; the flush lets the calls already runnable on the loop join (one loop turn), then
    scores what is waiting in a worker thread; calls arriving meanwhile are scored in the next round.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, server_url: str | None, unscorable_value: float | None,
                 reranker: Any) -> None:
        self.loop = loop
        self.score_many = functools.partial(score_responses, server_url=server_url,
                                            unscorable_value=unscorable_value, reranker=reranker)
        self.waiting: list[tuple[Any, str, asyncio.Future]] = []
        self.flushing = False

    async def score(self, prompt: Any, response: str) -> dict[str, Any]:
        future = self.loop.create_future()
        self.waiting.append((prompt, response, future))
        if not self.flushing:
            self.flushing = True
            self.loop.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            await asyncio.sleep(0)
            while self.waiting:
                batch, self.waiting = self.waiting[:_MAX_BATCH], self.waiting[_MAX_BATCH:]
                prompts, responses = [b[0] for b in batch], [b[1] for b in batch]
                try:
                    items = await self.loop.run_in_executor(None, self.score_many, prompts, responses)
                except Exception as exc:  # every call of the batch gets the error (a server down, a bad value)
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for item, (_, _, future) in zip(items, batch):
                    if not future.done():  # its caller may have been cancelled
                        future.set_result(item)
        finally:
            self.flushing = False


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, _Batcher]] = weakref.WeakKeyDictionary()


def _batcher(server_url: str | None, unscorable_value: float | None, reranker: Any) -> _Batcher:
    loop = asyncio.get_running_loop()
    by_target = _batchers.setdefault(loop, {})
    key = (server_url, unscorable_value, id(reranker))
    if key not in by_target:
        by_target[key] = _Batcher(loop, server_url, unscorable_value, reranker)
    return by_target[key]


def compute_score_batch(
    data_sources: Sequence[Any] | None = None,
    solution_strs: Sequence[str] | None = None,
    ground_truths: Sequence[Any] | None = None,
    extra_infos: Sequence[Mapping[str, Any]] | None = None,
    *,
    server_url: str | None = None,
    prompt_key: str = "question",
    unscorable_value: float | None = None,
    **kwargs: Any,
) -> list[dict[str, Any]]:
    """The ``batch`` reward manager form of :func:`compute_score` (verl 0.4-0.6): all responses scored in one call.

    verl 0.7+ has no ``batch`` manager and calls a reward function once per response: this function then refuses
    the call, naming :func:`async_compute_score`, which batches those calls.
    """
    if solution_strs is None and "solution_str" in kwargs:
        raise TypeError(
            "ares_rerank.verl.compute_score_batch was called with one response (solution_str=...): verl 0.7+ calls "
            "a reward function once per response and has no 'batch' reward manager. Use "
            "reward.custom_reward_function.name=async_compute_score, which scores the concurrent calls together."
        )
    if solution_strs is None:
        raise TypeError("compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos) needs "
                        "solution_strs, the responses' text.")
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


class StepRewards(float):
    """One response's reward as :meth:`AresDenseRewardManager.run_single` returns it: a float (the chain reward,
    what verl's streaming path places at the last token) that also carries the per-token step rewards, which
    :meth:`AresDenseRewardManager.assemble_rm_scores` places on verl's token-level path.

    Attributes:
        token_rewards: ``(position, reward)`` pairs, positions counted from the response's first token; a step
            that ends at a token puts its tau there (two steps ending in one token share it).
    """

    token_rewards: tuple[tuple[int, float], ...]

    def __new__(cls, value: float, token_rewards: Sequence[tuple[int, float]] = ()) -> StepRewards:
        reward = super().__new__(cls, value)
        reward.token_rewards = tuple((int(position), float(tau)) for position, tau in token_rewards)
        return reward

    def __reduce__(self) -> tuple[Any, tuple[float, tuple[tuple[int, float], ...]]]:
        return (StepRewards, (float(self), self.token_rewards))  # survives Ray's pickling between processes

    def __repr__(self) -> str:
        return f"StepRewards({float(self)!r}, token_rewards={list(self.token_rewards)!r})"


_MANAGER_OPTIONS = ("server_url", "prompt_key", "unscorable_value")


class AresDenseRewardManager:
    """A verl reward manager with dense ARES rewards: each step's tau at the response token that ends the step.

    verl 0.7+ builds it as ``cls(config=, tokenizer=, compute_score=, reward_router_address=,
    reward_model_tokenizer=)``, awaits :meth:`run_single` per response and, on its token-level path (0.8+), calls
    :meth:`assemble_rm_scores`; verl 0.4-0.6 build it as ``cls(tokenizer=, num_examine=, compute_score=,
    reward_fn_key=, **reward_kwargs)`` and call it (:meth:`__call__`). Where the step rewards reach the trainer and
    where only the chain reward does: see the module docstring.

    Args:
        config: verl 0.7+'s whole config; the options below are read from ``config.reward.reward_kwargs``
            (``+reward.reward_kwargs.server_url=...``) unless given here.
        tokenizer: The policy's tokenizer (decodes responses; its offsets map steps to tokens).
        compute_score: verl passes its default reward function here; unused (ARES scores).
        reward_router_address, reward_model_tokenizer: verl 0.7+'s, for a verl reward model; unused.
        num_examine: Responses per data source printed on the first calls (verl 0.4-0.6's habit).
        reward_fn_key: The ``non_tensor_batch`` key of the data source (for ``num_examine``).
        server_url, unscorable_value: See :func:`score_responses`. An unscorable response gets
            ``unscorable_value`` at its last token.
        prompt_key: The ``extra_info`` key holding the prompt (default ``"question"``); a row without it is scored
            against its ``raw_prompt`` messages (verl's chat-format prompt), else its decoded prompt tokens.
        reranker: An :class:`~ares_rerank.rerank.AresReranker` to score with locally (Python use).
    """

    def __init__(
        self,
        config: Any = None,
        tokenizer: Any = None,
        compute_score: Any = None,
        reward_router_address: Any = None,
        reward_model_tokenizer: Any = None,
        *,
        num_examine: int = 0,
        reward_fn_key: str = "data_source",
        server_url: str | None = None,
        prompt_key: str | None = None,
        unscorable_value: float | None = None,
        reranker: Any = None,
    ) -> None:
        if tokenizer is None and hasattr(config, "decode"):
            raise TypeError("AresDenseRewardManager's first argument is verl's config: pass the tokenizer as "
                            "AresDenseRewardManager(tokenizer=...).")
        if not hasattr(tokenizer, "decode"):
            raise TypeError(f"AresDenseRewardManager(tokenizer=...) needs a tokenizer, got {type(tokenizer).__name__}.")
        given = {"server_url": server_url, "prompt_key": prompt_key, "unscorable_value": unscorable_value}
        options = {**_config_options(config), **{k: v for k, v in given.items() if v is not None}}
        self.config = config
        self.tokenizer = tokenizer
        self.num_examine = num_examine
        self.reward_fn_key = reward_fn_key
        self.server_url = options.get("server_url")
        self.prompt_key = options.get("prompt_key") or "question"
        self.unscorable_value = options.get("unscorable_value")
        self.reranker = reranker
        self._printed: dict[Any, int] = defaultdict(int)

    async def run_single(self, data: Any) -> dict[str, Any]:
        """verl 0.7+'s call: the reward of ``data``'s last row (verl scores the last sequence of a multi-sequence
        output), as ``{"reward_score": StepRewards, "reward_extra_info": {"score", "ares_*"}}``."""
        data = data[-1:]
        ids, text, prompt = self._row(data, 0)
        item = await _batcher(self.server_url, self.unscorable_value, self.reranker).score(prompt, text)
        self._examine(data, [prompt], [text], [item])
        reward = StepRewards(item["score"], self._token_rewards(ids, text, item))
        return {"reward_score": reward, "reward_extra_info": _result(item)}

    @classmethod
    def assemble_rm_scores(cls, data: Any, scores: Sequence[Any]) -> Any:
        """verl 0.8+'s token-level hook: ``rm_scores`` (float32, the shape of ``data.batch["responses"]``) with each
        row's step rewards (:class:`StepRewards`) at their tokens; a plain float goes to the last response token,
        where verl's own managers put it."""
        import torch

        width = data.batch["prompts"].shape[-1]
        lengths = [int(n) for n in data.batch["attention_mask"][:, width:].sum(dim=-1)]
        rm_scores = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        for row, score in enumerate(scores):
            token_rewards = getattr(score, "token_rewards", None)
            if token_rewards is None:
                if lengths[row]:
                    rm_scores[row, lengths[row] - 1] = float(score)
                continue
            for position, reward in token_rewards:
                rm_scores[row, position] += reward
        return rm_scores

    def __call__(self, data: Any, return_dict: bool = False) -> Any:
        """verl 0.4-0.6's call: the whole batch at once.

        Returns:
            ``reward_tensor`` (float32, shape of ``batch["responses"]``: zeros except the step ends; the sum over a
            row is the sum of its steps' tau), or with ``return_dict=True`` ``{"reward_tensor",
            "reward_extra_info"}``, the latter holding per-row lists ``score`` (the chain reward) and the ``ares_*``
            logs.
        """
        rows = [self._row(data, i) for i in range(len(data.batch["responses"]))]
        items = score_responses([r[2] for r in rows], [r[1] for r in rows], server_url=self.server_url,
                                unscorable_value=self.unscorable_value, reranker=self.reranker)
        scores = [StepRewards(item["score"], self._token_rewards(ids, text, item))
                  for (ids, text, _), item in zip(rows, items)]
        reward = self.assemble_rm_scores(data, scores)
        self._examine(data, [r[2] for r in rows], [r[1] for r in rows], items)
        if not return_dict:
            return reward
        extra = {key: [item[key] for item in items] for key in ("score",) + LOG_KEYS}
        return {"reward_tensor": reward, "reward_extra_info": extra}

    def _row(self, data: Any, row: int) -> tuple[list[int], str, Any]:
        """A row's response token ids, response text and prompt."""
        prompt_ids, response_ids = data.batch["prompts"][row], data.batch["responses"][row]
        mask = data.batch["attention_mask"][row]
        width = prompt_ids.shape[-1]
        ids = response_ids[: int(mask[width:].sum())].tolist()
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return ids, text, self._prompt(data, row, prompt_ids[mask[:width].bool()].tolist())

    def _prompt(self, data: Any, row: int, prompt_ids: list[int]) -> Any:
        columns = getattr(data, "non_tensor_batch", None) or {}
        infos = columns.get("extra_info")
        info = infos[row] if infos is not None else None
        if isinstance(info, Mapping) and info.get(self.prompt_key) is not None:
            return info[self.prompt_key]
        messages = columns.get("raw_prompt")
        if messages is not None and len(messages[row]):
            return list(messages[row])
        return self.tokenizer.decode(prompt_ids, skip_special_tokens=True)

    def _token_rewards(self, ids: list[int], text: str, item: dict[str, Any]) -> list[tuple[int, float]]:
        if not ids:
            return []  # no response token to hold a reward
        if not item["ares_scored"]:
            return [(len(ids) - 1, item["score"])]
        positions = step_token_positions(self.tokenizer, ids, text, item["step_ends"])
        return list(zip(positions, item["step_scores"]))

    def _examine(self, data: Any, prompts: list[Any], texts: list[str], items: list[dict[str, Any]]) -> None:
        if not self.num_examine:
            return
        sources = (getattr(data, "non_tensor_batch", None) or {}).get(self.reward_fn_key)
        for i, item in enumerate(items):
            source = sources[i] if sources is not None else None
            if self._printed[source] < self.num_examine:
                self._printed[source] += 1
                print("[prompt]", prompts[i])
                print("[response]", texts[i])
                print("[ares]", {k: item[k] for k in ("score", "step_scores")})


def _config_options(config: Any) -> dict[str, Any]:
    """The manager's options in verl's ``config.reward.reward_kwargs`` (none when there is no config)."""
    reward = config.get("reward") if hasattr(config, "get") else None
    given = reward.get("reward_kwargs") if hasattr(reward, "get") else None
    options = dict(given) if given else {}
    unknown = sorted(set(options) - set(_MANAGER_OPTIONS))
    if unknown:
        raise ValueError(f"reward.reward_kwargs has {unknown}, which AresDenseRewardManager does not take: it takes "
                         f"{list(_MANAGER_OPTIONS)} (e.g. +reward.reward_kwargs.server_url=http://127.0.0.1:5000).")
    return options
