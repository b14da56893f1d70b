"""ARES rewards through verl's own code (verl 0.9.1, installed with --no-deps by scripts/install_frameworks.sh).

What runs is verl's: its Hydra config (``verl/trainer/config/ppo_trainer.yaml`` composed with the README's override
strings, parsed out of README.md, so each README recipe is the one tested), the checks ``main_ppo`` makes on it, its
``RewardLoopManager`` and ``RewardLoopWorker`` (which load the custom reward function and build the reward manager
with ``load_reward_manager``), its ``AgentLoopWorker`` post-processing (the streaming path every ARES run takes:
each response scored as its rollout ends) and its ``DataProto``. Only ray, vllm, deepspeed and flash_attn are
stand-ins (``tests/frameworks/stubs.py`` says how: Ray actors run in this process, on their own threads and event
loops). The policy's tokenizer is trained locally (tests/tiny_models.py).

Every reward is compared with ``AresReward`` on the same (prompt, response) pairs, with a data source of
``openai/gsm8k`` and responses verl's gsm8k rule scores 0 or 1, so a run that scores with verl's default rule instead
of ARES fails (``test_the_legacy_keys_score_with_verls_gsm8k_rule_and_the_check_catches_it`` shows it does).
Dense rewards are checked against token positions computed from separately encoded pieces of each response.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from ares_rerank import AresReranker, FunctionBackbone
from ares_rerank.rewards import AresReward, configure_default
from ares_rerank.rewards.server import RewardServer, ServeConfig
from ares_rerank.rewards.verl import async_compute_score
from frameworks.stubs import install_stubs, shutdown_actors
from tiny_models import build_tokenizer


README = Path(__file__).resolve().parents[2] / "README.md"
SERVER_IN_README = "http://127.0.0.1:5000"  # the one part of a recipe the test replaces: the live server's address
VERL_VERSION = "0.9.1"


def _verl():
    """verl's modules, with the stand-ins installed; skips (fails under CI) when verl cannot be imported."""
    install_stubs()
    try:
        import verl
        import verl.trainer.config as verl_config
        from hydra import compose, initialize_config_dir
        from verl import DataProto
        from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput, AgentLoopWorker
        from verl.experimental.reward_loop import RewardLoopManager
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config
        from verl.utils.device import auto_set_device
    except ImportError as exc:
        reason = (f"verl {VERL_VERSION} or a module it imports is not installed ({exc}): run "
                  "scripts/install_frameworks.sh")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return {name: value for name, value in locals().items() if name != "exc"}


@pytest.fixture(scope="module")
def verl():
    modules = _verl()
    version = getattr(modules["verl"], "__version__", None)
    assert version == VERL_VERSION, f"these tests were written for verl {VERL_VERSION}, found {version}"
    yield modules
    shutdown_actors()


def hashed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """A deterministic 'probability' per (premises, hypothesis), never 0 or 1 (unlike verl's gsm8k rule)."""
    return [0.05 + 0.9 * int.from_bytes(hashlib.sha256(("\x01".join(p) + "\x02" + h).encode()).digest()[:4], "big")
            / 2**32 for p, h in zip(premises, hypotheses)]


def make_reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n")


@pytest.fixture(autouse=True)
def ares_default():
    """verl's reward workers run in this process, so they score with this default reranker."""
    configure_default(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n")
    yield
    configure_default()


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer):
    """What verl reads from ``actor_rollout_ref.model.path``: the tokenizer and a model config (no weights)."""
    from transformers import Qwen2Config

    path = tmp_path_factory.mktemp("policy")
    tokenizer.save_pretrained(path)
    Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, architectures=["Qwen2ForCausalLM"]).save_pretrained(path)
    return path


# -- the README's recipes -----------------------------------------------------------------------------------------
def readme_recipes() -> list[tuple[dict[str, str], list[str]]]:
    """Each ``python -m verl.trainer.main_ppo`` command in README.md's code blocks: its environment assignments and
    its override strings (``...`` stands for the user's own overrides; any other word must be an override)."""
    text = README.read_text(encoding="utf-8")
    recipes = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if "verl.trainer.main_ppo" not in line:
                continue
            words = shlex.split(line, comments=True)
            at = words.index("verl.trainer.main_ppo")
            env = dict(word.split("=", 1) for word in words[: at - 2])  # before `python -m`
            overrides = [word for word in words[at + 1:] if word != "..."]
            assert words[at - 2: at] in (["python", "-m"], ["python3", "-m"]), line
            assert all("=" in word for word in overrides), f"a README verl recipe word is not an override: {line}"
            recipes.append((env, overrides))
    assert len(recipes) == text.count("verl.trainer.main_ppo"), "a verl recipe in README.md was not parsed"
    return recipes


RECIPES = readme_recipes()


def test_the_readme_has_the_recipes_these_tests_run():
    names = [" ".join(overrides) for _, overrides in RECIPES]
    assert len(RECIPES) >= 4, names
    assert any("name=async_compute_score" in n and "server_url" not in n for n in names)
    assert any("name=compute_score" in n for n in names)
    assert any("AresDenseRewardManager" in n for n in names)
    assert any(SERVER_IN_README in n or SERVER_IN_README in env.values() for env, _ in RECIPES for n in names)


# -- driving verl -------------------------------------------------------------------------------------------------
QUESTIONS = ["Let x = 3.", "I have AB.", "We have pepper. We have garlic.", "Let y = 2.", "The quick brown fox."]
RESPONSES = [
    "Then 2x = 6.\n\nso x + 1 = 4.\n\nThe answer is 5.",
    "I use rule (AB -> CD) to derive CD, now I have CD",
    "We have pepper, so we can do the step.\n\nBecause we have completed all previous steps, we can now do it.",
    "So 2y = 4.\n\n#### 5",  # verl's gsm8k rule gives this 1.0 (its answer format, the gold 5)
    "   ",  # blank: unscorable, 0.0
]
GROUND_TRUTH = "5"


def compose(verl, model_dir, overrides: list[str]):
    """verl's config from its own YAML and ``overrides``, checked as ``main_ppo`` checks it, then resolved."""
    from omegaconf import OmegaConf

    ours = [f"actor_rollout_ref.model.path={model_dir}", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.rollout.prompt_length=64", "actor_rollout_ref.rollout.response_length=64",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "algorithm.adv_estimator=grpo",
            "actor_rollout_ref.rollout.n=2", "reward.num_workers=2"]
    config_dir = os.path.dirname(verl["verl_config"].__file__)
    with verl["initialize_config_dir"](config_dir=config_dir, version_base=None):
        config = verl["compose"](config_name="ppo_trainer", overrides=ours + list(overrides))  # the recipe's win
    verl["auto_set_device"](config)
    verl["validate_config"](config=config, use_reference_policy=verl["need_reference_policy"](config),
                            use_critic=verl["need_critic"](config))
    OmegaConf.resolve(config)
    return config


def prompt_messages(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def prompt_ids(tokenizer, question: str) -> list[int]:
    text = tokenizer.apply_chat_template(prompt_messages(question), add_generation_prompt=True, tokenize=False)
    return encode(tokenizer, text)


def response_ids(tokenizer, response: str) -> list[int]:
    return encode(tokenizer, response) + [tokenizer.eos_token_id]  # as a policy ends its response


def row_fields(question: str, index: int) -> dict:
    """A dataset row's fields as verl's RLHFDataset gives them to the agent loop (gsm8k preprocessing's layout)."""
    return {"raw_prompt": np.array(prompt_messages(question), dtype=object), "data_source": "openai/gsm8k",
            "reward_model": {"style": "rule", "ground_truth": GROUND_TRUTH},
            "extra_info": {"split": "train", "index": index, "question": question}, "index": index}


def streamed(verl, config, tokenizer, questions=QUESTIONS, responses=RESPONSES):
    """verl's streaming path: the agent loop's post-processing of each finished rollout (concurrently, as verl runs
    them), which sends it to a reward loop worker, then the batch verl builds; returns (batch, manager)."""
    manager = verl["RewardLoopManager"](config)
    assert manager.reward_loop_worker_handles is not None  # no verl reward model: verl streams the rewards
    worker = verl["AgentLoopWorker"](config, llm_client=None,
                                     reward_loop_worker_handles=manager.reward_loop_worker_handles)

    async def run():
        outputs = [verl["AgentLoopOutput"](prompt_ids=prompt_ids(tokenizer, q), response_ids=response_ids(tokenizer, r),
                                           response_mask=[1] * len(response_ids(tokenizer, r)), num_turns=2,
                                           metrics=verl["AgentLoopMetrics"]())
                   for q, r in zip(questions, responses)]
        done = await asyncio.gather(*[worker._agent_loop_postprocess(out, validate=False, **row_fields(q, i))
                                      for i, (out, q) in enumerate(zip(outputs, questions))])
        return worker._postprocess(list(done))

    return asyncio.run(run()), manager


def colocated_batch(verl, tokenizer, questions=QUESTIONS, responses=RESPONSES):
    """A batch in verl's layout (prompts left-padded, responses right-padded) with the dataset's columns."""
    from tensordict import TensorDict

    pad = tokenizer.pad_token_id
    prompts = [prompt_ids(tokenizer, q) for q in questions]
    answers = [response_ids(tokenizer, r) for r in responses]
    width, length = max(map(len, prompts)), max(map(len, answers)) + 3
    fields = [row_fields(q, i) for i, q in enumerate(questions)]
    columns = {key: np.empty(len(fields), dtype=object) for key in fields[0]}
    for i, row in enumerate(fields):
        for key, value in row.items():
            columns[key][i] = value
    batch = TensorDict({
        "prompts": torch.tensor([[pad] * (width - len(p)) + p for p in prompts]),
        "responses": torch.tensor([a + [pad] * (length - len(a)) for a in answers]),
        "attention_mask": torch.tensor([[0] * (width - len(p)) + [1] * (len(p) + len(a)) + [0] * (length - len(a))
                                        for p, a in zip(prompts, answers)]),
    }, batch_size=len(questions))
    return verl["DataProto"](batch=batch, non_tensor_batch=columns)


def last_token_rewards(rm_scores: torch.Tensor, lengths: list[int]) -> list[float]:
    """Each row's reward, checking it is the only one and sits on the row's last response token."""
    rewards = []
    for row, length in enumerate(lengths):
        nonzero = rm_scores[row].nonzero().flatten().tolist()
        assert set(nonzero) <= {length - 1}, (row, nonzero, length)
        rewards.append(float(rm_scores[row, length - 1]))
    return rewards


def ares_rewards(questions=QUESTIONS, responses=RESPONSES) -> list[float]:
    return AresReward(make_reranker(), unscorable_value=0.0)(questions, responses)


def assert_ares(rewards: list[float], expected: list[float]) -> None:
    """The check every recipe passes: ARES's rewards, not verl's rule (which gives the 4th response 1.0, others 0)."""
    assert rewards == pytest.approx(expected, abs=1e-6), (rewards, expected)


def run_recipe(verl, model_dir, tokenizer, env: dict[str, str], overrides: list[str], monkeypatch):
    """Runs one README recipe on verl's streaming path; returns (batch, manager)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return streamed(verl, compose(verl, model_dir, overrides), tokenizer)


@pytest.fixture()
def live_server():
    with RewardServer(make_reranker(), ServeConfig(port=0)) as server:
        yield server


@pytest.mark.parametrize("recipe", RECIPES, ids=[" ".join(o).replace("pkg://ares_rerank.verl", "") for _, o in RECIPES])
def test_each_readme_recipe_runs_on_verls_reward_loop_and_gives_ares_rewards(verl, model_dir, tokenizer, recipe,
                                                                            live_server, monkeypatch):
    env, overrides = recipe
    env = {k: v.replace(SERVER_IN_README, live_server.url) for k, v in env.items()}
    overrides = [o.replace(SERVER_IN_README, live_server.url) for o in overrides]
    batch, _ = run_recipe(verl, model_dir, tokenizer, env, overrides, monkeypatch)
    lengths = [len(response_ids(tokenizer, r)) for r in RESPONSES]
    rewards = last_token_rewards(batch.batch["rm_scores"], lengths)
    assert_ares(rewards, ares_rewards())  # the streaming path keeps one float per response, at its last token
    assert list(batch.non_tensor_batch["ares_scored"]) == [1, 1, 1, 1, 0]
    assert list(batch.non_tensor_batch["ares_num_steps"]) == [3, 1, 2, 2, 0]
    uses_server = any(live_server.url in v for v in [*env.values(), *overrides])
    assert (live_server.answered > 0) == uses_server


def test_the_legacy_keys_score_with_verls_gsm8k_rule_and_the_check_catches_it(verl, model_dir, tokenizer,
                                                                              monkeypatch):
    """The keys the README gave before (the top-level custom_reward_function block, which 0.9.1's main_ppo never
    migrates): verl scores with its gsm8k rule, ARES is never called, and the recipes' check fails on it."""
    legacy = ["custom_reward_function.path=pkg://ares_rerank.verl", "custom_reward_function.name=compute_score"]
    batch, _ = run_recipe(verl, model_dir, tokenizer, {}, legacy, monkeypatch)
    lengths = [len(response_ids(tokenizer, r)) for r in RESPONSES]
    rewards = last_token_rewards(batch.batch["rm_scores"], lengths)
    assert rewards == [0.0, 0.0, 0.0, 1.0, 0.0]  # verl's gsm8k rule
    assert "ares_scored" not in batch.non_tensor_batch
    with pytest.raises(AssertionError):
        assert_ares(rewards, ares_rewards())


def test_compute_score_batch_under_verl_09_names_the_function_to_use(verl, model_dir, tokenizer, monkeypatch):
    overrides = ["reward.custom_reward_function.path=pkg://ares_rerank.verl",
                 "reward.custom_reward_function.name=compute_score_batch"]
    config = compose(verl, model_dir, overrides)
    manager = verl["RewardLoopManager"](config)
    with pytest.raises(TypeError, match="once per response.*async_compute_score"):
        manager.compute_rm_score(colocated_batch(verl, tokenizer))


def test_async_compute_score_through_verls_reward_worker_shares_requests_across_calls(verl, model_dir, tokenizer,
                                                                                      live_server):
    """verl's reward worker awaits one call per response; the calls waiting together are one server request."""
    overrides = ["reward.custom_reward_function.path=pkg://ares_rerank.verl",
                 "reward.custom_reward_function.name=async_compute_score",
                 f"+reward.custom_reward_function.reward_kwargs.server_url={live_server.url}", "reward.num_workers=1"]
    config = compose(verl, model_dir, overrides)
    manager = verl["RewardLoopManager"](config)
    questions, responses = QUESTIONS * 4, RESPONSES * 4
    out = manager.compute_rm_score(colocated_batch(verl, tokenizer, questions, responses))
    lengths = [len(response_ids(tokenizer, r)) for r in responses]
    assert_ares(last_token_rewards(out.batch["rm_scores"], lengths), ares_rewards(questions, responses))
    # verl's worker starts the 20 calls together (its compute_score_batch); each waits for its decode in a thread
    # first, so the first calls may be scored before the rest arrive, and the rest share the next request(s)
    assert 1 <= live_server.answered <= len(responses) // 2, live_server.answered


def test_async_compute_score_calls_waiting_together_are_one_request(live_server):
    async def run():
        return await asyncio.gather(*[
            async_compute_score("openai/gsm8k", r, GROUND_TRUTH, {"question": q}, server_url=live_server.url)
            for q, r in zip(QUESTIONS * 4, RESPONSES * 4)])

    got = asyncio.run(run())
    assert live_server.answered == 1
    assert_ares([g["score"] for g in got], ares_rewards(QUESTIONS * 4, RESPONSES * 4))


# -- dense rewards ------------------------------------------------------------------------------------------------
DENSE_QUESTIONS = ["Let x = 3.", "We have pepper. We have garlic.", "I have AB.", "Nothing."]
DENSE_RESPONSES = [
    "Then 2x = 6.\n\nso x + 1 = 4.\n\nThe answer is 5.",
    "We have pepper, so we can do the step.\n\nBecause we have completed all previous steps, we can now do it.",
    "I use rule (AB -> CD) to derive CD, now I have CD",
    "   ",
]


def reference_step_ends(tokenizer, response: str) -> list[int]:
    """The token ending each step, from separately encoded pieces (steps and separators): their token counts."""
    pieces = re.split(r"(\n\n)", response)
    encoded = [encode(tokenizer, piece) for piece in pieces]
    assert [t for piece in encoded for t in piece] == encode(tokenizer, response)  # the pieces' tokens are the text's
    ends, count = [], 0
    for piece, ids in zip(pieces, encoded):
        count += len(ids)
        if piece != "\n\n":
            ends.append(count - 1)
    return ends


DENSE_RECIPE = next(overrides for _, overrides in RECIPES
                    if "reward.reward_manager.name=AresDenseRewardManager" in overrides
                    and not any("server_url" in o for o in overrides))


def test_dense_rewards_land_on_step_ending_tokens_on_verls_token_level_path(verl, model_dir, tokenizer):
    """verl 0.9.1 keeps token-level rewards on its colocated path: RewardLoopManager.compute_rm_score, which awaits
    the manager's run_single per response and assembles them with the manager class's assemble_rm_scores. verl's
    trainer calls it only when a verl reward model is enabled (which would start a vLLM server); it is called here
    directly, on the manager verl built from the README recipe."""
    config = compose(verl, model_dir, DENSE_RECIPE)
    manager = verl["RewardLoopManager"](config)
    data = colocated_batch(verl, tokenizer, DENSE_QUESTIONS, DENSE_RESPONSES)
    rm_scores = manager.compute_rm_score(data).batch["rm_scores"]
    assert rm_scores.shape == data.batch["responses"].shape

    reranker = make_reranker()
    records = reranker.score_pairs(DENSE_QUESTIONS, DENSE_RESPONSES, on_error="none")
    expected = torch.zeros_like(rm_scores)
    for row, (record, response) in enumerate(zip(records[:3], DENSE_RESPONSES[:3])):
        ends = reference_step_ends(tokenizer, response)
        assert len(ends) == len(record["step_scores"]) == [3, 2, 1][row]
        for end, tau in zip(ends, record["step_scores"]):
            expected[row, end] += tau
    # the blank response is unscorable: 0.0 at its last token
    assert torch.allclose(rm_scores, expected, atol=1e-6), (rm_scores, expected)
    for row in range(3):  # a row sums to its steps' taus
        assert rm_scores[row].sum().item() == pytest.approx(sum(records[row]["step_scores"]), abs=1e-5)


def test_dense_manager_on_verls_streaming_path_gives_the_chain_reward_at_the_last_token(verl, model_dir, tokenizer):
    """The limit of verl 0.9.1's streaming path (every run without a verl reward model): one float per response."""
    config = compose(verl, model_dir, DENSE_RECIPE)
    batch, _ = streamed(verl, config, tokenizer, DENSE_QUESTIONS, DENSE_RESPONSES)
    lengths = [len(response_ids(tokenizer, r)) for r in DENSE_RESPONSES]
    assert_ares(last_token_rewards(batch.batch["rm_scores"], lengths), ares_rewards(DENSE_QUESTIONS, DENSE_RESPONSES))


def test_dense_manager_reads_its_options_from_verls_reward_kwargs(verl, model_dir, tokenizer, live_server):
    config = compose(verl, model_dir, DENSE_RECIPE + [f"+reward.reward_kwargs.server_url={live_server.url}",
                                                      "+reward.reward_kwargs.unscorable_value=-1.0"])
    manager = verl["RewardLoopManager"](config)
    data = colocated_batch(verl, tokenizer, DENSE_QUESTIONS, DENSE_RESPONSES)
    rm_scores = manager.compute_rm_score(data).batch["rm_scores"]
    assert live_server.answered >= 1  # scored on the server named in the config
    local = AresReward(make_reranker(), unscorable_value=-1.0)(DENSE_QUESTIONS, DENSE_RESPONSES)
    lengths = [len(response_ids(tokenizer, r)) for r in DENSE_RESPONSES]
    assert rm_scores[3, lengths[3] - 1].item() == -1.0 == local[3]  # the blank response's unscorable_value
    for row in range(3):
        assert rm_scores[row].count_nonzero().item() == [3, 2, 1][row]

    typo = compose(verl, model_dir, DENSE_RECIPE + ["+reward.reward_kwargs.sever_url=http://127.0.0.1:1"])
    with pytest.raises(ValueError, match=r"\['sever_url'\].*server_url"):
        verl["RewardLoopManager"](typo)
