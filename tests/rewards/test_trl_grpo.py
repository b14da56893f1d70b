"""Real TRL training runs on CPU with AresReward in ``reward_funcs``: GRPOTrainer (standard and conversational
prompts) and RLOOTrainer, which share the reward contract, and AsyncAresReward awaited beside a second reward. A tiny
Qwen2 policy is built offline; 2 optimizer steps."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import Dataset

from ares_rerank import FunctionBackbone
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rewards import AresReward, AsyncAresReward


PROMPTS = ["I have AB. Rule: AB -> CD", "Let x = 3. Then 2x = 6", "What is 2 + 3?", "We have pepper. We have garlic."]


def char_overlap(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """A deterministic soft backbone for random policy text: the share of the step's characters seen in the premises,
    squeezed into [0.05, 0.95] so that rewards vary between completions."""
    out = []
    for p, h in zip(premises, hypotheses):
        known = set("".join(p))
        out.append(0.05 + 0.9 * sum(ch in known for ch in h) / max(len(h), 1))
    return out


class RecordingReward(AresReward):
    """AresReward that keeps what TRL passed in and what it returned (module level: picklable)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[dict] = []

    def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        values = super().__call__(prompts, completions, completion_ids, **kwargs)
        self.calls.append(
            {"prompts": list(prompts), "completions": list(completions), "completion_ids": completion_ids,
             "kwargs": dict(kwargs), "values": values}
        )
        return values


class RecordingAsyncReward(AsyncAresReward):
    """AsyncAresReward that records the thread its scoring ran in and the values it returned (module level)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[dict] = []

    def _score(self, prompts, completions):
        import threading

        self.calls.append({"thread": threading.current_thread().name})
        return super()._score(prompts, completions)

    async def __call__(self, prompts, completions, completion_ids=None, **kwargs):
        import asyncio
        import threading

        asyncio.get_running_loop()  # raises RuntimeError unless TRL awaits this call on an event loop
        awaited_in = threading.current_thread().name
        values = await super().__call__(prompts, completions, completion_ids, **kwargs)
        self.calls[-1].update(values=values, awaited_in=awaited_in)
        return values


def _dataset(conversational: bool) -> Dataset:
    prompts = [[{"role": "user", "content": p}] for p in PROMPTS] if conversational else PROMPTS
    return Dataset.from_dict({"prompt": prompts, "topic": ["rules", "algebra", "arithmetic", "cooking"]})


def _train(trainer_name: str, model_path, tmp_path, conversational: bool = False) -> tuple[RecordingReward, list]:
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    config_cls, trainer_cls = (GRPOConfig, GRPOTrainer) if trainer_name == "grpo" else (RLOOConfig, RLOOTrainer)
    reward = RecordingReward(AresReranker(FunctionBackbone(char_overlap), step_separator="\n"), aggregate="mean")
    args = config_cls(
        output_dir=str(tmp_path / trainer_name), use_cpu=True, bf16=False, report_to="none", seed=0,
        per_device_train_batch_size=4, num_generations=2, max_completion_length=12, max_steps=2, logging_steps=1,
        learning_rate=1e-3, save_strategy="no", disable_tqdm=True,
    )
    dataset = _dataset(conversational)
    trainer = trainer_cls(model=str(model_path), reward_funcs=[reward], args=args, train_dataset=dataset)
    trainer.train()
    assert trainer.state.global_step == 2
    return reward, [h for h in trainer.state.log_history if "loss" in h]


def _check_contract_and_metrics(reward: RecordingReward, logs: list, conversational: bool) -> None:
    assert len(reward.calls) == 2 and len(logs) == 2  # one reward call per optimizer step (one generation batch)
    for call, log in zip(reward.calls, logs):
        n = len(call["completions"])
        assert n == 4 and len(call["prompts"]) == n and len(call["values"]) == n
        assert call["prompts"][0] == call["prompts"][1]  # num_generations=2: each prompt repeated per generation
        assert len(call["completion_ids"]) == n and all(isinstance(t, int) for t in call["completion_ids"][0])
        kwargs = call["kwargs"]
        assert {"trainer_state", "log_metric", "log_extra", "topic"} <= set(kwargs)
        assert kwargs["topic"][0] == kwargs["topic"][1] and kwargs["topic"][0] in {"rules", "algebra", "arithmetic",
                                                                                   "cooking"}
        if conversational:
            assert isinstance(call["completions"][0], list) and call["completions"][0][0]["role"] == "assistant"
        else:
            assert all(isinstance(c, str) for c in call["completions"])
        scored = [v for v in call["values"] if v is not None]
        assert scored and all(0.0 <= v <= 1.0 for v in scored)
        # The values we returned are the ones TRL logged (mean over scorable completions; float32 in TRL).
        assert log["rewards/ares_mean/mean"] == pytest.approx(sum(scored) / len(scored), abs=1e-5)
        assert log["ares_mean/scored"] == pytest.approx(len(scored) / n)
        assert math.isfinite(log["loss"])


@pytest.mark.parametrize("conversational", [False, True], ids=["standard", "conversational"])
def test_grpo_trainer_runs_with_ares_reward(tiny_causal_lm_path, tmp_path, conversational):
    reward, logs = _train("grpo", tiny_causal_lm_path, tmp_path, conversational)
    _check_contract_and_metrics(reward, logs, conversational)


def test_rloo_trainer_runs_with_ares_reward(tiny_causal_lm_path, tmp_path):
    reward, logs = _train("rloo", tiny_causal_lm_path, tmp_path)
    _check_contract_and_metrics(reward, logs, conversational=False)


@pytest.mark.slow
def test_trl_grpo_command_with_dotted_reward_path(tiny_causal_lm_path, tiny_nli_path, tmp_path):
    """``trl grpo --reward_funcs ares_rerank.rewards.ares_reward`` as users run it; the lazy default reranker loads
    the backbone named by ``$ARES_RERANK_BACKBONE`` (a tiny entailment head) on the first reward call."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "ARES_RERANK_BACKBONE": str(tiny_nli_path)}
    command = [
        sys.executable, "-c", "import sys; from trl.cli import main; sys.exit(main())", "grpo",
        "--model_name_or_path", str(tiny_causal_lm_path),
        "--dataset_name", str(data), "--reward_funcs", "ares_rerank.rewards.ares_reward", "--output_dir", str(out),
        "--max_steps", "2", "--per_device_train_batch_size", "4", "--num_generations", "2",
        "--max_completion_length", "8", "--use_cpu", "--bf16", "false", "--report_to", "none",
        "--logging_steps", "1", "--save_strategy", "no",
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    logged = done.stdout + done.stderr
    assert logged.count("'rewards/ares_reward/mean'") == 2 and "'ares_reward/scored'" in logged


def test_grpo_trainer_awaits_async_ares_reward_beside_a_second_reward(tiny_causal_lm_path, tmp_path):
    """TRL 1.16 gathers ``async def`` rewards on its event-loop thread; ours scores in a worker thread, beside a
    synchronous AresReward with another aggregate. Both are logged with their own values."""
    import inspect
    import threading

    from trl import GRPOConfig, GRPOTrainer

    reranker = AresReranker(FunctionBackbone(char_overlap), step_separator="\n")
    async_reward = RecordingAsyncReward(reranker, aggregate="mean", name="ares_async")
    sync_reward = RecordingReward(AresReranker(FunctionBackbone(char_overlap), step_separator="\n"), aggregate="min")
    args = GRPOConfig(
        output_dir=str(tmp_path / "grpo-async"), use_cpu=True, bf16=False, report_to="none", seed=0,
        per_device_train_batch_size=4, num_generations=2, max_completion_length=12, max_steps=2, logging_steps=1,
        learning_rate=1e-3, save_strategy="no", disable_tqdm=True,
    )
    trainer = GRPOTrainer(model=str(tiny_causal_lm_path), reward_funcs=[async_reward, sync_reward], args=args,
                          train_dataset=_dataset(conversational=False))
    assert trainer._has_async_funcs  # TRL saw the async __call__
    # Also what TRL 0.27 - 1.13 asked of the object itself (they dispatched a plain async callable as a sync reward).
    assert inspect.iscoroutinefunction(async_reward) and not inspect.iscoroutinefunction(sync_reward)
    trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert trainer.state.global_step == 2 and len(logs) == 2
    assert len(async_reward.calls) == 2 and len(sync_reward.calls) == 2
    main_thread = threading.main_thread().name
    for call, sync_call, log in zip(async_reward.calls, sync_reward.calls, logs):
        # Awaited on TRL's event-loop thread (the async path), then scored in a worker thread (asyncio.to_thread).
        assert call["awaited_in"] == trainer.async_loop_thread.name != main_thread
        assert call["thread"] not in (main_thread, call["awaited_in"])
        scored = [v for v in call["values"] if v is not None]
        assert len(call["values"]) == 4 and scored and all(0.0 <= v <= 1.0 for v in scored)
        assert log["rewards/ares_async/mean"] == pytest.approx(sum(scored) / len(scored), abs=1e-5)
        sync_scored = [v for v in sync_call["values"] if v is not None]
        assert log["rewards/ares_min/mean"] == pytest.approx(sum(sync_scored) / len(sync_scored), abs=1e-5)
        assert log["ares_async/scored"] == pytest.approx(len(scored) / 4)
        assert math.isfinite(log["loss"])
