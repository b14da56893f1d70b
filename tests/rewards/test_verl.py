"""ARES rewards for verl (``ares_rerank.verl``) without verl: the reward functions scored locally or through
``ares-rerank serve``, and the dense reward manager's verl 0.4-0.6 call form (``manager(data, return_dict)``) on a
stand-in of verl's ``DataProto`` (the fields verl's reward managers read: ``batch["prompts"]`` left-padded,
``batch["responses"]`` right-padded, ``batch["attention_mask"]`` over both, ``non_tensor_batch`` object arrays), with a
tokenizer trained locally (tests/tiny_models.py). verl 0.9.1's own config, reward loop and agent loop drive these
functions in tests/frameworks/test_verl_reward_loop.py.

The token that ends each step is checked against references computed independently of the code under test: the
token counts of separately encoded pieces, and the shortest decoded prefix that holds the step.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import pickle
import re
import uuid

import numpy as np
import pytest
import torch

from ares_rerank import AresReranker, FunctionBackbone
from ares_rerank.rewards import AresReward, configure_default
from ares_rerank.rewards.server import RewardServer, ServeConfig
from ares_rerank.rewards.verl import (SERVER_URL_ENV, AresDenseRewardManager, StepRewards, async_compute_score,
                                      compute_score, compute_score_batch)
from tiny_models import build_tokenizer


LOG_KEYS = ("ares_scored", "ares_num_steps", "ares_first_error", "ares_flagged_frac", "ares_evaluations")


def hashed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """A deterministic 'probability' per (premises, hypothesis)."""
    return [0.05 + 0.9 * int.from_bytes(hashlib.sha256(("\x01".join(p) + "\x02" + h).encode()).digest()[:4], "big")
            / 2**32 for p, h in zip(premises, hypotheses)]


def make_reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n")


@pytest.fixture(autouse=True)
def clean_defaults(monkeypatch):
    monkeypatch.delenv(SERVER_URL_ENV, raising=False)
    configure_default()
    yield
    configure_default()


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


QUESTIONS = ["We have pepper. We have garlic.", "Let x = 3.", "I have AB.", "The quick brown fox.", "I have XY."]
RESPONSES = [
    " We have pepper, so we can do the step.\n\nBecause we have completed all previous steps, we can now do it.",
    "Then 2x = 6.\n\nso x + 1 = 4.\n\nThe answer is 5.",
    "",
    "   ",
    "I use rule (AB -> CD) to derive CD, now I have CD",
]


# -- the custom reward function -----------------------------------------------------------------------------------
def test_compute_score_scores_locally_with_the_default_reranker_as_ares_reward_does():
    configure_default(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n")
    expected = AresReward(make_reranker(), unscorable_value=0.0)(QUESTIONS, RESPONSES)
    got = [compute_score("gsm8k", response, "5", {"question": question, "split": "train"})
           for question, response in zip(QUESTIONS, RESPONSES)]
    assert [g["score"] for g in got] == expected
    assert [g["ares_scored"] for g in got] == [1, 1, 0, 0, 1]
    assert [g["ares_num_steps"] for g in got] == [2, 3, 0, 0, 1]
    for g in got:
        assert set(g) == {"score", *LOG_KEYS} and all(v is not None for v in g.values())
    batch = compute_score_batch(["gsm8k"] * 5, RESPONSES, ["5"] * 5, [{"question": q} for q in QUESTIONS])
    assert batch == got
    penalized = compute_score_batch(["gsm8k"] * 5, RESPONSES, None, [{"question": q} for q in QUESTIONS],
                                    unscorable_value=-1.0)
    assert [p["score"] for p in penalized] == expected[:2] + [-1.0, -1.0] + expected[4:]


def test_compute_score_through_a_server_equals_local_scoring(monkeypatch):
    configure_default(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n")
    local = compute_score_batch(["d"] * 5, RESPONSES, None, [{"question": q} for q in QUESTIONS])
    with RewardServer(make_reranker(), ServeConfig(port=0)) as server:
        by_argument = [compute_score("d", r, None, {"question": q}, server_url=f"{server.url}/get_reward")
                       for q, r in zip(QUESTIONS, RESPONSES)]
        monkeypatch.setenv(SERVER_URL_ENV, server.url)
        by_environment = compute_score_batch(["d"] * 5, RESPONSES, None, [{"question": q} for q in QUESTIONS],
                                             unscorable_value=-1.0)
        assert server.answered == 6
        many = RESPONSES * 120  # 600 responses: sent as 3 requests of at most 256
        chunked = compute_score_batch(["d"] * 600, many, None, [{"question": q} for q in QUESTIONS] * 120)
        assert server.answered == 6 + 3
    assert by_argument == local
    assert chunked == local * 120
    assert [b["score"] for b in by_environment] == [-1.0 if not x["ares_scored"] else x["score"] for x in local]


def _good_answer(reward=0.75, step_scores=(0.9, 0.75), scored=1.0):
    return {"rewards": [reward], "scores": [reward], "step_scores": [list(step_scores)], "step_ends": [[4, 9]],
            "extra_logs": {"ares_scored": [scored], "ares_num_steps": [2.0], "ares_first_error": [-1.0],
                           "ares_flagged_frac": [0.0], "ares_evaluations": [2.0]}}


def _with_log(key, value):
    answer = _good_answer()
    answer["extra_logs"][key] = [value]
    return answer


@pytest.mark.parametrize("answer, problem", [
    (_good_answer(reward=float("nan")), "rewards[0]=nan"),
    (_good_answer(reward=1e308), "rewards[0]=1e+308, outside [0, 1]"),
    (_good_answer(reward=float("inf")), "rewards[0]=inf"),
    (_good_answer(step_scores=(0.9, float("nan"))), "step_scores[0]"),
    (_good_answer(step_scores=(0.9, 2.0)), "step_scores[0]"),
    (_with_log("ares_evaluations", float("nan")), "extra_logs['ares_evaluations'] holding nan"),
    (_good_answer(scored=0.5), "ares_scored[0]=0.5"),
], ids=["nan", "1e308", "inf", "nan step", "step above 1", "nan log", "scored 0.5"])
def test_compute_score_refuses_a_server_answer_that_is_not_a_finite_reward_in_0_1(answer, problem):
    """A server (or a proxy in front of it) answering NaN, inf or 1e308 (JSON as Python writes it): refused naming
    the value, never passed to verl as the reward."""
    import json

    from fake_servers import FakeServer, Reply

    raw = json.dumps(answer).encode()
    with FakeServer(lambda method, path, payload: Reply(raw)) as server:
        with pytest.raises(RuntimeError, match=re.escape(problem)) as err:
            compute_score("d", "So a.", None, {"question": "We have a."}, server_url=server.url)
    assert "nothing was passed on to verl" in str(err.value)


def test_compute_score_passes_a_servers_unscorable_value_on():
    """An unscored response's reward is the server's --unscorable-value: any finite number, not only [0, 1]."""
    from fake_servers import FakeServer, Reply

    answer = _good_answer(reward=-1.0, step_scores=(), scored=0.0)
    answer["step_ends"] = [[]]
    with FakeServer(lambda method, path, payload: Reply(answer)) as server:
        got = compute_score("d", "So a.", None, {"question": "We have a."}, server_url=server.url)
    assert got["score"] == -1.0 and got["ares_scored"] == 0.0


def test_compute_score_names_the_missing_prompt_and_how_to_give_it(caplog):
    with pytest.raises(ValueError, match=r"extra_info has no 'question'.*\['index', 'split'\].*prompt_key"):
        compute_score("gsm8k", "so 5", "5", {"split": "train", "index": 0})
    with pytest.raises(ValueError, match="row 1.*'problem'"):
        compute_score_batch(["d", "d"], ["a", "b"], None, [{"problem": "p"}, {}], prompt_key="problem")
    configure_default(FunctionBackbone(hashed))
    typo = f"sever_url_{uuid.uuid4().hex}"  # warned once per process: a name no other test used
    with caplog.at_level(logging.WARNING, logger="ares_rerank.rewards.verl"):
        compute_score("d", "so a", None, {"question": "q"}, reward_router_address=None, **{typo: "x"})
    assert typo in caplog.text and "reward_router_address" not in caplog.text


# -- the dense reward manager -------------------------------------------------------------------------------------
class DataProtoStandIn:
    """The part of verl's ``DataProto`` a reward manager reads."""

    def __init__(self, batch: dict[str, torch.Tensor], non_tensor_batch: dict[str, np.ndarray]) -> None:
        self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch, {}

    def __len__(self) -> int:
        return len(self.batch["responses"])


def data_proto(tokenizer, questions: list[str], responses: list[list[int]], extra_info: bool = True):
    """verl's layout: prompts left-padded to the longest, responses right-padded (two spare columns)."""
    pad = tokenizer.pad_token_id
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                             tokenize=False) for q in questions]
    prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    width, length = max(map(len, prompt_ids)), max(map(len, responses)) + 2
    prompt_rows = [[pad] * (width - len(ids)) + ids for ids in prompt_ids]
    response_rows = [ids + [pad] * (length - len(ids)) for ids in responses]
    mask = [[0] * (width - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (length - len(r))
            for p, r in zip(prompt_ids, responses)]
    infos = [{"question": q, "index": i} if extra_info else {"index": i} for i, q in enumerate(questions)]
    return DataProtoStandIn(
        {"prompts": torch.tensor(prompt_rows), "responses": torch.tensor(response_rows),
         "attention_mask": torch.tensor(mask)},
        {"data_source": np.array(["test"] * len(questions), dtype=object),
         "reward_model": np.array([{"ground_truth": "5"}] * len(questions), dtype=object),
         "extra_info": np.array(infos, dtype=object)},
    )


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def step_texts(text: str) -> list[str]:
    return [part.strip() for part in text.split("\n\n") if part.strip()]


def prefix_positions(tokenizer, ids: list[int], text: str) -> list[int]:
    """Reference: for each step, the first token after which the decoded prefix holds the whole step."""
    positions, cursor = [], 0
    for step in step_texts(text):
        end = text.index(step, cursor) + len(step)
        cursor = end
        positions.append(next(p for p in range(len(ids))
                              if len(tokenizer.decode(ids[: p + 1], skip_special_tokens=True)) >= end))
    return positions


def expected_rows(reranker, questions, texts, positions, length) -> torch.Tensor:
    """Each step's tau (from the reranker itself) at the reference position of its last token."""
    records = reranker.score_pairs(questions, texts, on_error="none")
    rows = torch.zeros(len(texts), length)
    for i, record in enumerate(records):
        for position, tau in zip(positions[i], record["step_scores"]):
            rows[i, position] += tau
    return rows


def test_dense_rewards_put_each_step_tau_at_the_token_that_ends_the_step(tokenizer):
    eos = tokenizer.eos_token_id
    canonical_text = RESPONSES[1]
    canonical = encode(tokenizer, canonical_text) + [eos]
    # One token per character: a tokenization the re-encoding does not give back (the offsets cannot be used).
    pieces = ["We have garlic.", "\n\n", "so é we can do the step.", "\n\n", "The answer is 5."]
    by_char = [[t for ch in piece for t in encode(tokenizer, ch)] for piece in pieces]
    chars_ids = [t for piece in by_char for t in piece] + [eos]
    chars_text = "".join(pieces)
    ends = np.cumsum([len(piece) for piece in by_char]) - 1
    truncated = encode(tokenizer, RESPONSES[0])[:-3]  # cut inside the last step, no end token
    truncated_text = tokenizer.decode(truncated, skip_special_tokens=True)
    blank = encode(tokenizer, "   ") + [eos]
    questions = QUESTIONS[:4] + ["Empty."]
    rows = [canonical, chars_ids, truncated, blank, []]
    texts = [canonical_text, chars_text, truncated_text, "   ", ""]
    assert tokenizer.decode(chars_ids, skip_special_tokens=True) == chars_text
    assert encode(tokenizer, canonical_text) == canonical[:-1] and encode(tokenizer, chars_text) != chars_ids[:-1]

    reranker = make_reranker()
    data = data_proto(tokenizer, questions, rows)
    got = AresDenseRewardManager(tokenizer=tokenizer, reranker=reranker, unscorable_value=-1.0)(data, return_dict=True)
    reward = got["reward_tensor"]
    assert reward.shape == data.batch["responses"].shape and reward.dtype == torch.float32

    positions = [prefix_positions(tokenizer, canonical, canonical_text), [ends[0], ends[2], ends[4]],
                 prefix_positions(tokenizer, truncated, truncated_text), [], []]
    expected = expected_rows(reranker, questions, texts, positions, reward.shape[1])
    expected[3, len(blank) - 1] = -1.0  # unscorable: its value at the last response token
    assert torch.allclose(reward, expected, atol=1e-6), (reward, expected)
    assert [len(p) for p in positions[:3]] == [3, 3, 2]
    assert (reward[4] == 0).all()  # an empty response has no token to hold a reward
    info = got["reward_extra_info"]
    assert info["score"] == AresReward(reranker, unscorable_value=-1.0)(questions, texts)
    assert info["ares_num_steps"] == [3, 3, 2, 0, 0] and info["ares_scored"] == [1, 1, 1, 0, 0]
    assert all(len(values) == len(rows) for values in info.values())
    for i in range(3):  # each row sums to the sum of its steps' tau
        taus = reranker.score_pairs([questions[i]], [texts[i]])[0]["step_scores"]
        assert reward[i].sum().item() == pytest.approx(sum(taus), abs=1e-5)


def test_dense_rewards_through_a_server_equal_local_ones_and_fall_back_to_the_decoded_prompt(tokenizer):
    rows = [encode(tokenizer, r) + [tokenizer.eos_token_id] for r in RESPONSES]
    data = data_proto(tokenizer, QUESTIONS, rows)
    local = AresDenseRewardManager(tokenizer=tokenizer, reranker=make_reranker())(data)
    with RewardServer(make_reranker(), ServeConfig(port=0)) as server:
        served = AresDenseRewardManager(tokenizer=tokenizer, server_url=server.url)(data, return_dict=True)
        with pytest.raises(ValueError, match="reranker= and a server URL"):
            AresDenseRewardManager(tokenizer=tokenizer, reranker=make_reranker(), server_url=server.url)(data)
    assert torch.equal(served["reward_tensor"], local)
    assert served["reward_extra_info"]["ares_scored"] == [1, 1, 0, 0, 1]

    no_question = data_proto(tokenizer, QUESTIONS, rows, extra_info=False)  # scored against the decoded prompt
    reranker = make_reranker()
    got = AresDenseRewardManager(tokenizer=tokenizer, reranker=reranker)(no_question, return_dict=True)
    width = no_question.batch["prompts"].shape[1]
    prompts = [tokenizer.decode(no_question.batch["prompts"][i, width - int(no_question.batch["attention_mask"]
                                                                           [i, :width].sum()):].tolist(),
                                skip_special_tokens=True) for i in range(len(rows))]
    assert "user" in prompts[0] and QUESTIONS[0] in prompts[0]  # the chat template's text stays in
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in rows]
    assert got["reward_extra_info"]["score"] == AresReward(reranker, unscorable_value=0.0)(prompts, texts)


def test_async_compute_score_equals_compute_score_and_batches_the_calls_waiting_together():
    backbone_calls = []

    def counted(premises, hypotheses):
        backbone_calls.append(len(hypotheses))
        return hashed(premises, hypotheses)

    configure_default(FunctionBackbone(counted, name="hashed"), step_separator="\n\n")

    async def run():
        return await asyncio.gather(*[async_compute_score("gsm8k", r, "5", {"question": q})
                                      for q, r in zip(QUESTIONS, RESPONSES)])

    together = asyncio.run(run())
    calls_together = len(backbone_calls)
    one_by_one = [compute_score("gsm8k", r, "5", {"question": q}) for q, r in zip(QUESTIONS, RESPONSES)]
    assert together == one_by_one
    assert calls_together < len(backbone_calls) - calls_together  # one batch took fewer backbone calls

    async def missing():
        await async_compute_score("gsm8k", "so 5", "5", {"index": 0})

    with pytest.raises(ValueError, match="extra_info has no 'question'"):
        asyncio.run(missing())


def test_async_compute_score_has_compute_scores_signature_written_once():
    """The coroutine's signature is compute_score's (verl and users see the same parameters); keywords by name, a
    missing argument named with the function, and verl's keyword call all bind as they do for a def."""
    import inspect

    assert inspect.signature(async_compute_score) == inspect.signature(compute_score)
    assert inspect.iscoroutinefunction(async_compute_score)
    configure_default(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n")
    by_keyword = asyncio.run(async_compute_score(data_source="gsm8k", solution_str=RESPONSES[0], ground_truth="5",
                                                 extra_info={"q": QUESTIONS[0]}, prompt_key="q"))
    assert by_keyword == compute_score("gsm8k", RESPONSES[0], "5", {"question": QUESTIONS[0]})
    with pytest.raises(TypeError, match=r"async_compute_score\(\): missing a required argument: 'solution_str'"):
        asyncio.run(async_compute_score("gsm8k"))
    with pytest.raises(TypeError, match="multiple values for argument 'solution_str'"):
        asyncio.run(async_compute_score("gsm8k", "so 5", solution_str="so 5"))


def test_compute_score_batch_called_per_response_names_async_compute_score():
    with pytest.raises(TypeError, match="once per response.*async_compute_score"):
        compute_score_batch(data_source="gsm8k", solution_str="so 5", ground_truth="5", extra_info={"question": "q"})


def test_the_dense_manager_takes_verl_07s_form_and_refuses_a_positional_tokenizer(tokenizer):
    with pytest.raises(TypeError, match=r"tokenizer=\.\.\."):
        AresDenseRewardManager(tokenizer)
    config = {"reward": {"reward_kwargs": {"unscorable_value": -2.0, "prompt_key": "problem"}}}
    manager = AresDenseRewardManager(config=config, tokenizer=tokenizer, compute_score=None,
                                     reward_router_address=None, reward_model_tokenizer=None)
    assert (manager.unscorable_value, manager.prompt_key, manager.server_url) == (-2.0, "problem", None)
    with pytest.raises(ValueError, match=r"\['max_resp_len'\]"):
        AresDenseRewardManager(config={"reward": {"reward_kwargs": {"max_resp_len": 8}}}, tokenizer=tokenizer)


def test_step_rewards_is_the_chain_reward_and_survives_pickling():
    reward = StepRewards(0.25, [(3, 0.5), (7, 0.125)])
    assert reward == 0.25 and float(reward) + 1 == 1.25
    back = pickle.loads(pickle.dumps(reward))
    assert back == 0.25 and back.token_rewards == ((3, 0.5), (7, 0.125))


def test_the_documented_module_path_is_the_verl_module_itself():
    """verl configs name ``pkg://ares_rerank.verl``: that path imports the very module, so its functions and the
    manager class are the same objects (and a monkeypatch of one reaches the other)."""
    import importlib

    import ares_rerank.rewards.verl as rewards_verl

    assert importlib.import_module("ares_rerank.verl") is rewards_verl
    assert getattr(importlib.import_module("ares_rerank.verl"), "compute_score") is compute_score
