"""AsyncAresReward is awaited by every TRL release that has async rewards, whatever the release's detection.

TRL's detection of an async reward function ``f`` (read in huggingface/trl's ``trl/trainer/grpo_trainer.py``,
``rloo_trainer.py``, ``trl/trainer/utils.py`` and ``trl/experimental/async_grpo/async_rollout_worker.py``):

- before 0.27: none, every reward is called synchronously;
- 0.27 - 0.29 (PR 4567, RLOO in PR 4718): ``asyncio.iscoroutinefunction(f)``;
- 1.0 - 1.13: ``inspect.iscoroutinefunction(f)``, in the trainers and the experimental AsyncGRPO rollout worker;
- 1.14 and later (PR 7213): ``is_async_callable(f)``, which also looks at ``f.__call__``.

The first two look at the object itself; an instance of a class with an ``async def __call__`` passes neither, so
those releases called it as a synchronous reward ("'coroutine' object is not iterable"). The dispatch code of each
release is rewritten below as small functions and the reward is run through every combination.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import gc
import inspect
import math
import pickle
import threading
import typing
import warnings

import pytest
from test_rewards import last_word_entailed

from ares_rerank import FunctionBackbone
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rewards import AresReward, AsyncAresReward, async_ares_reward


def is_async_callable(func) -> bool:
    """TRL >= 1.14 (``trl/trainer/utils.py``)."""
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(func.__call__)


DETECTIONS = {
    "trl-0.27-0.29": asyncio.iscoroutinefunction,
    "trl-1.0-1.13": inspect.iscoroutinefunction,
    "trl-1.14+": is_async_callable,
}


def _nan_for_none(values) -> list[float]:
    return [v if v is not None else math.nan for v in values]


def trainer_reward_columns(reward_funcs, is_async, **inputs) -> list[list[float]]:
    """GRPOTrainer / RLOOTrainer ``_calculate_rewards`` (0.27 - 1.16, less the ``nn.Module`` branch): a reward that
    ``is_async`` says is synchronous is called inline and iterated; the async ones are gathered on an event loop that
    runs in a daemon thread (``asyncio.run_coroutine_threadsafe``)."""
    columns: list = [None] * len(reward_funcs)
    async_funcs = []
    for i, func in enumerate(reward_funcs):
        if is_async(func):
            async_funcs.append((i, func))
        else:
            columns[i] = _nan_for_none(func(**inputs))

    async def invoke(i, func):
        return i, _nan_for_none(await func(**inputs))

    async def run_all():
        return await asyncio.gather(*(invoke(i, func) for i, func in async_funcs))

    if async_funcs:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="trl-async-loop", daemon=True)
        thread.start()
        try:
            for i, column in asyncio.run_coroutine_threadsafe(run_all(), loop).result(timeout=120):
                columns[i] = column
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
    return columns


def async_grpo_worker_columns(reward_funcs, is_async, **inputs) -> list[list[float]]:
    """The experimental AsyncGRPO rollout worker's ``_score_group`` (1.0 and later): async rewards awaited, the others
    run in a thread, all gathered."""

    async def score():
        return await asyncio.gather(
            *(func(**inputs) if is_async(func) else asyncio.to_thread(func, **inputs) for func in reward_funcs)
        )

    return [_nan_for_none(column) for column in asyncio.run(score())]


DISPATCHES = {"trainer": trainer_reward_columns, "async-grpo-worker": async_grpo_worker_columns}
INPUTS = {"prompts": ["a b\nc"] * 3, "completions": ["so a\n\nso c", "so b\n\nso x", ""], "completion_ids": None}


def _same(column: list[float], expected: list[float | None]) -> bool:
    return len(column) == len(expected) and all(
        math.isnan(c) if e is None else c == e for c, e in zip(column, expected)
    )


class PlainAsyncCallable:
    """A callable class with an ``async def __call__`` and nothing else: what PR 7213 fixed in TRL 1.14."""

    __name__ = "plain"

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        return [1.0] * len(completions)


@pytest.mark.parametrize("dispatch", DISPATCHES, ids=list(DISPATCHES))
@pytest.mark.parametrize("detection", DETECTIONS, ids=list(DETECTIONS))
def test_every_trl_detection_awaits_async_ares_reward(detection, dispatch):
    is_async, run = DETECTIONS[detection], DISPATCHES[dispatch]
    reranker = AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines")
    async_reward = AsyncAresReward(reranker, aggregate="mean", name="async_mean")
    sync_reward = AresReward(reranker, aggregate="min")
    assert is_async(async_reward) and not is_async(sync_reward)
    async_column, sync_column = run([async_reward, sync_reward], is_async, **INPUTS)
    assert _same(async_column, AresReward(reranker, aggregate="mean")(**INPUTS))
    assert _same(sync_column, sync_reward(**INPUTS))
    assert _same(async_column, [1.0, 0.5, None])  # mean of per-step scores; the empty completion unscored


@pytest.mark.parametrize("detection", DETECTIONS, ids=list(DETECTIONS))
def test_the_rewritten_dispatch_reproduces_the_old_failure_for_a_plain_async_callable(detection):
    """The control: without AsyncAresReward's function-like attributes, releases before 1.14 call the instance as a
    synchronous reward and iterate the coroutine it returns."""
    is_async = DETECTIONS[detection]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the coroutine that was never awaited
        if detection == "trl-1.14+":
            assert trainer_reward_columns([PlainAsyncCallable()], is_async, **INPUTS) == [[1.0, 1.0, 1.0]]
        else:
            assert not is_async(PlainAsyncCallable())
            with pytest.raises(TypeError, match="'coroutine' object is not iterable"):
                trainer_reward_columns([PlainAsyncCallable()], is_async, **INPUTS)
        gc.collect()


def test_async_reward_is_a_coroutine_function_with_the_sync_signature_through_pickling_and_copies():
    reranker = AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines")
    reward, sync = AsyncAresReward(reranker, name="ares_async"), AresReward(reranker)
    clones = [pickle.loads(pickle.dumps(reward)), copy.copy(reward), copy.deepcopy(reward), async_ares_reward]
    for obj in [reward, *clones]:
        assert inspect.iscoroutinefunction(obj) and asyncio.iscoroutinefunction(obj)
        assert inspect.iscoroutinefunction(type(obj).__call__)
        assert inspect.signature(obj) == inspect.signature(sync)  # (prompts, completions, completion_ids=None, **kw)
    assert [c.__name__ for c in clones] == ["ares_async"] * 3 + ["ares_reward_async"]
    assert asyncio.run(clones[0](["a\nb"], ["so b"])) == [1.0]
    # The sync reward and the class itself stay what they were.
    assert not inspect.iscoroutinefunction(sync) and not asyncio.iscoroutinefunction(sync)
    assert not inspect.iscoroutinefunction(AsyncAresReward)
    assert list(inspect.signature(AsyncAresReward).parameters)[:2] == ["reranker", "aggregate"]
    assert typing.get_type_hints(AsyncAresReward) == {}  # the call's annotations are not the class's
    assert "__code__" not in vars(reward) and pickle.loads(pickle.dumps(reward)).__dict__.keys() == vars(reward).keys()


def test_a_subclass_must_keep_call_async():
    class Recording(AsyncAresReward):
        async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
            return await super().__call__(prompts, completions, completion_ids, **kwargs)

    reward = Recording(AresReranker(FunctionBackbone(last_word_entailed), prompt_split="lines"))
    assert inspect.iscoroutinefunction(reward) and asyncio.run(reward(["a\nb"], ["so c"])) == [0.0]
    with pytest.raises(TypeError, match=r"Synchronous\.__call__ must be an `async def`.*Subclass AresReward"):

        class Synchronous(AsyncAresReward):
            def __call__(self, prompts, completions, completion_ids=None, **kwargs):
                return [0.0] * len(completions)
