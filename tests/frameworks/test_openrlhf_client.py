"""OpenRLHF 0.11.2's own rollout and remote-reward code against a real :class:`RewardServer` on 127.0.0.1.

OpenRLHF's command line parses ``--reward.remote_url``; its ``PromptDataset``, ``SamplesGenerator``,
``RolloutRayActor.generate_responses`` and ``SingleTurnAgentExecutor`` build the prompts, cut long ones, decode the
queries, POST them with their retries and turn the answers into ``Experience`` tensors (see
``frameworks/openrlhf_harness.py`` for what runs and what is replaced: the vLLM engine answers fixed token ids;
ray, vllm, deepspeed and flash_attn are stand-ins). Each reward must equal ``AresReward`` on the same (question,
response) pair, after OpenRLHF's float32 tensor conversion. Waits are hang guards; nothing asserts a duration.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from pathlib import Path

import pytest
import torch

from ares_rerank import AresReranker, FunctionBackbone
from ares_rerank.rewards import AresReward
from ares_rerank.rewards.server import RewardServer, ServeConfig
from frameworks.openrlhf_harness import load_openrlhf, openrlhf_args, rollout
from tiny_models import build_tokenizer


REPO_ROOT = Path(__file__).resolve().parents[2]
GUARD = 60  # seconds: hang guard for every wait


@pytest.fixture(scope="module")
def openrlhf():
    return load_openrlhf()


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def hashed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """A deterministic 'probability' of each (premises, hypothesis): any change in a premise's text changes it."""
    out = []
    for p, h in zip(premises, hypotheses):
        digest = hashlib.sha256(("\x01".join(p) + "\x02" + h).encode("utf-8", "surrogatepass")).digest()
        out.append(0.05 + 0.9 * int.from_bytes(digest[:4], "big") / 2**32)
    return out


def make_reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n", prompt_split="lines")


QUESTIONS = [
    "We have garlic. We have pepper.\nWhat can we cook?",
    "Let x = 3.\nWhat is 2x + 1?",
    "I have AB.\nRule: AB -> CD\nWhat do I have?",
    "The quick brown fox; 0 1 2 3.\nHow many digits are there?",
    "Der Bär wohnt im Wald; 北京 ist weit.\nWhere is the bear?",
    "We have pepper.\nIs 5 the answer?",
]
RESPONSES = [
    "We have garlic, so we cook.\n\nThe answer is 5.",
    "Then 2x = 6.\n\nSo 2x + 1 = 7.\n\nThe answer is 7.",
    "I have AB, I use rule (AB -> CD) to derive CD, now I have CD",
    "",  # an empty response: unscorable, --unscorable-value
    "Step one.\n\nStep two: 0 1 2 3 are four digits.",
    "   \n\n  ",  # blank: unscorable
    "Der Bär ist im Wald.",
]


def response_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """What the policy 'generates': each response's tokens and the EOS token, as vLLM returns them."""
    return [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for text in texts]


def args_for(url: str, *extra: str, samples: int = 4, prompts: int = len(QUESTIONS), new_tokens: int = 64):
    return openrlhf_args(["--reward.remote_url", url, "--rollout.n_samples_per_prompt", str(samples),
                          "--rollout.batch_size", str(prompts), "--rollout.max_new_tokens", str(new_tokens),
                          "--data.max_len", str(new_tokens + 1024), *extra])


def which_response(experience, ids: list[list[int]]) -> int:
    """The index of the response an experience holds: the longest of ``ids`` its sequence ends with."""
    sequence = experience.sequences[0].tolist()
    matches = [i for i, r in enumerate(ids) if sequence[-len(r):] == r]
    assert matches, "the experience holds none of the fixed responses"
    return max(matches, key=lambda i: len(ids[i]))


def check_rewards(experiences, questions_of: dict[str, str], ids: list[list[int]], texts: list[str]) -> int:
    """Every experience's reward, score and ARES logs equal AresReward's on its own (question, response), as the
    float32 tensors OpenRLHF makes of them; returns how many were scorable."""
    pairs = [(questions_of[e.prompts[0]], texts[which_response(e, ids)]) for e in experiences]
    logged: dict = {}
    expected = AresReward(make_reranker(), unscorable_value=0.0)(
        [q for q, _ in pairs], [r for _, r in pairs], log_extra=lambda key, values: logged.update({key: values}))
    scorable = [n is not None for n in logged["ares_final/num_steps"]]
    for experience, reward, ok in zip(experiences, expected, scorable):
        assert experience.rewards is not None, "OpenRLHF got no reward for this sample"
        want = torch.tensor([reward])  # OpenRLHF's own conversion of the float
        for tensor in (experience.rewards, experience.scores, experience.info["reward"]):
            assert torch.equal(tensor.reshape(-1), want)
        assert experience.info["ares_scored"].reshape(-1).tolist() == [float(ok)]
        for key in ("ares_num_steps", "ares_first_error", "ares_flagged_frac"):
            assert experience.info[key].numel() == 1
    return sum(scorable)


# -- the command line ---------------------------------------------------------------------------------------------
def test_openrlhf_reads_reward_remote_url_and_has_no_remote_rm_url(openrlhf, capsys):
    args = openrlhf_args(["--reward.remote_url", "http://127.0.0.1:5000/get_reward,http://10.0.0.2:5000/get_reward"])
    assert args.reward.remote_url == ["http://127.0.0.1:5000/get_reward", "http://10.0.0.2:5000/get_reward"]
    with pytest.raises(SystemExit):
        openrlhf_args(["--remote_rm_url", "http://127.0.0.1:5000/get_reward"])
    assert "--remote_rm_url" in capsys.readouterr().err  # argparse: unrecognized arguments
    # what we tell users to pass (serve --help, README, docs, docstrings) is the flag OpenRLHF 0.11 has
    from ares_rerank.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    documented = [capsys.readouterr().out, (REPO_ROOT / "README.md").read_text(),
                  (REPO_ROOT / "docs" / "CONVENTIONS.md").read_text()]
    assert "--reward.remote_url" in documented[0]
    for module in ("rewards/server.py", "rewards/openrlhf.py", "commands/serve.py"):
        documented.append((REPO_ROOT / "ares_rerank" / module).read_text())
    assert all("--remote_rm_url" not in text for text in documented)


# -- rollouts -----------------------------------------------------------------------------------------------------
def test_each_rollout_sample_gets_the_reward_ares_reward_gives_it(openrlhf, tokenizer, caplog):
    ids = response_ids(tokenizer, RESPONSES)
    with RewardServer(make_reranker(), ServeConfig(port=0, max_wait_ms=5)) as server:
        args = args_for(server.url + "/get_reward")
        with caplog.at_level(logging.WARNING, logger="ares_rerank.rewards.server"):
            experiences = rollout(openrlhf, args, tokenizer, [{"input": q} for q in QUESTIONS], ids, engines=2)
        answered = server.answered
    assert len(experiences) == len(QUESTIONS) * 4 == answered  # one request per sample, as the executor sends them
    scorable = check_rewards(experiences, {q: q for q in QUESTIONS}, ids, RESPONSES)
    assert 0 < scorable < len(experiences)  # both kinds exercised
    assert not [r for r in caplog.records if "refused" in r.getMessage()]


@pytest.mark.parametrize("size, servers", [(1, 1), (7, 1), (64, 1), (7, 2), (64, 3)])
def test_batches_come_back_in_order_through_the_client(openrlhf, size, servers):
    """OpenRLHF's HTTP client with a batch of queries (split into one shard per URL when given several)."""
    prompts = [QUESTIONS[i % len(QUESTIONS)] for i in range(size)]
    texts = [RESPONSES[(3 * i) % len(RESPONSES)] for i in range(size)]
    queries = [p + r + "<|im_end|>" for p, r in zip(prompts, texts)]
    expected = AresReward(make_reranker(), unscorable_value=0.0)(prompts, texts)
    with RewardServer(make_reranker(), ServeConfig(port=0)) as server:
        urls = [server.url + "/get_reward"] * servers
        executor = openrlhf.agent.SingleTurnAgentExecutor(urls if servers > 1 else urls[0])
        answers = asyncio.run(executor._fetch_rewards_via_http(queries, prompts, [None] * size))
        assert server.answered == min(servers, size)
    assert len(answers) == min(servers, size)
    assert [r for a in answers for r in a["rewards"]] == expected
    assert [s for a in answers for s in a["scores"]] == expected
    assert [f for a in answers for f in a["extra_logs"]["ares_scored"]] == [float(t.strip() != "") for t in texts]


def test_a_left_truncated_prompt_gets_the_reward_of_its_whole_prompt(openrlhf, tokenizer, caplog):
    """OpenRLHF cuts a prompt longer than max_len - max_new_tokens tokens to its last tokens and decodes the query
    from those (a cut inside a multi-byte character decodes to U+FFFD), while it sends the whole prompt: the server
    finds the prompt's end in the query, scores the response against the whole prompt, and logs it."""
    # each cut lands elsewhere in the characters of three bytes: between two (i = 0, 1) or inside one (i = 2, 3)
    long_questions = ["We have garlic. " + "北京上海广州深圳" * 12 + f"\nQuestion {i}: where is the" + " bear" * i + "?"
                      for i in range(4)]
    ids = response_ids(tokenizer, RESPONSES)
    prompt_tokens = [len(tokenizer(q, add_special_tokens=False)["input_ids"]) for q in long_questions]
    max_len = 64 + 60  # prompts keep their last 60 tokens
    assert min(prompt_tokens) > 60
    with RewardServer(make_reranker(), ServeConfig(port=0, log_interval=3600)) as server:
        args = openrlhf_args(["--reward.remote_url", server.url + "/get_reward", "--rollout.n_samples_per_prompt",
                              "3", "--rollout.batch_size", "4", "--rollout.max_new_tokens", "64", "--data.max_len",
                              str(max_len)])
        with caplog.at_level(logging.WARNING, logger="ares_rerank.rewards.server"):
            experiences = rollout(openrlhf, args, tokenizer, [{"input": q} for q in long_questions], ids)
    queries = [tokenizer.decode(e.sequences[0].tolist(), skip_special_tokens=False) for e in experiences]
    assert not any(q.startswith(e.prompts[0]) for q, e in zip(queries, experiences))  # every prompt was cut
    assert any(q.startswith("\ufffd") for q in queries)  # and some inside a character
    check_rewards(experiences, {q: q for q in long_questions}, ids, RESPONSES)
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "refused" in m]
    truncated = [m for m in messages if m.startswith("ares-rerank serve: query[0]")]
    assert len(truncated) == 1 and "scored against the whole prompt" in truncated[0]  # rate-limited: one line,
    assert "11 more of: query does not start with its prompt" in messages[-1]  # and the rest counted at the stop


# -- a restart ----------------------------------------------------------------------------------------------------
def test_a_server_restart_while_openrlhf_retries_loses_no_reward(openrlhf, tokenizer):
    """The server goes away, and its replacement listens at once but takes its time to load: OpenRLHF's client
    (5 tries, 1 s apart) reaches the new server while it loads, which holds every request and answers it when
    ready. With a server that listened only once loaded, these requests would find nothing listening."""
    ids = response_ids(tokenizer, RESPONSES)
    old = RewardServer(make_reranker(), ServeConfig(port=0)).start()
    port = old.port
    old.stop()  # down: the rollout's first tries are refused
    loaded, started = threading.Event(), threading.Event()
    box: dict = {}

    def slow_build() -> AresReranker:
        started.set()
        assert loaded.wait(GUARD), "the test never let the reranker load"
        return make_reranker()

    def run_rollout() -> None:
        args = args_for(f"http://127.0.0.1:{port}/get_reward", samples=3, prompts=4)
        box["experiences"] = rollout(openrlhf, args, tokenizer, [{"input": q} for q in QUESTIONS[:4]], ids)

    client = threading.Thread(target=run_rollout)
    client.start()
    try:
        threading.Event().wait(1.0)  # the clients' first tries meet a closed port
        new = RewardServer(slow_build, ServeConfig(port=port)).start()
        try:
            assert started.wait(GUARD)
            for _ in range(GUARD * 20):  # every sample's request held by the loading server
                if new.health()["in_flight"] >= 12 or not client.is_alive():
                    break
                threading.Event().wait(0.05)
            health = new.health()
            assert health["status"] == "loading" and health["in_flight"] >= 12, health
            loaded.set()
            client.join(GUARD)
            assert not client.is_alive(), "hang guard: the rollout did not finish"
            assert new.health()["status"] == "ok"
        finally:
            loaded.set()
            new.stop()
    finally:
        loaded.set()
        client.join(GUARD)
    experiences = box["experiences"]
    assert len(experiences) == 12
    assert all(e.rewards is not None for e in experiences)  # none lost
    check_rewards(experiences, {q: q for q in QUESTIONS}, ids, RESPONSES)


# -- chat templates -----------------------------------------------------------------------------------------------
TEMPLATED = ["qwen2.5", "llama3.1", "deepseek-r1"]


def as_generated(family: str, steps: list[str]) -> str:
    """A response as the family's policy writes it after the generation prompt: DeepSeek-R1's opens with <think>, so
    its reasoning ends with </think> before the last step (the answer)."""
    if family == "deepseek-r1" and len(steps) > 1:
        return "\n\n".join(steps[:-1]) + "\n</think>\n\n" + steps[-1]
    return "\n\n".join(steps)


def claimtrees_pairs() -> tuple[list[str], list[list[str]]]:
    from ares_rerank.data.claimtrees import claimtrees_example

    chains = [claimtrees_example(i, 5, variant="vanilla" if i % 2 else "insertion", valid=4) for i in range(6)]
    return ["\n".join(c.base_claims) for c in chains], [list(c.steps) for c in chains]


def templated_rollout(openrlhf, family: str, reranker: AresReranker, questions: list[str], steps: list[list[str]]):
    """Rollouts of ``questions`` through OpenRLHF with --data.apply_chat_template and the family's tokenizer, each
    question's policy answering one fixed response per sample; the experiences and, per experience, the plain
    (question, response) AresReward should be given."""
    from chat_mirrors import policy_tokenizer

    tokenizer = policy_tokenizer(family)
    generated = [as_generated(family, s) for s in steps]
    ids = response_ids(tokenizer, generated)
    with RewardServer(reranker, ServeConfig(port=0, max_wait_ms=5)) as server:
        args = args_for(server.url + "/get_reward", "--data.apply_chat_template", samples=2, prompts=len(questions),
                        new_tokens=max(len(r) for r in ids))
        experiences = rollout(openrlhf, args, tokenizer, [{"input": q} for q in questions], ids)
    rendered = {tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False,
                                              add_generation_prompt=True): q for q in questions}
    assert set(rendered) == {e.prompts[0] for e in experiences}  # OpenRLHF's own prompts, templated
    pairs = [(rendered[e.prompts[0]], "\n\n".join(steps[which_response(e, ids)])) for e in experiences]
    return experiences, pairs


def assert_plain_rewards(experiences, pairs, reranker: AresReranker) -> list[float]:
    expected = AresReward(reranker, unscorable_value=0.0)([q for q, _ in pairs], [r for _, r in pairs])
    got = [e.rewards.reshape(-1).tolist()[0] for e in experiences]
    assert got == torch.tensor(expected).tolist()  # exactly, after OpenRLHF's float32 tensors
    return expected


@pytest.mark.parametrize("family", TEMPLATED)
def test_chat_templated_prompts_get_the_rewards_of_the_plain_question(openrlhf, family):
    """A backbone whose output moves with any character (equal rewards: equal premises and steps), then the rule
    oracle on ClaimTrees chains, sound and unsound; DeepSeek-R1's answers close their <think> and end with
    <｜end▁of▁sentence｜>."""
    hashed_reranker = AresReranker(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n",
                                   prompt_split="lines")
    questions = QUESTIONS[:4]
    steps = [[s for s in text.split("\n\n") if s.strip()] or ["A step."] for text in RESPONSES[:4]]
    experiences, pairs = templated_rollout(openrlhf, family, hashed_reranker, questions, steps)
    assert_plain_rewards(experiences, pairs, hashed_reranker)

    from ares_rerank import ClaimTreesOracle

    oracle = AresReranker(ClaimTreesOracle(), prompt_split="lines")
    questions, steps = claimtrees_pairs()
    experiences, pairs = templated_rollout(openrlhf, family, oracle, questions, steps)
    expected = assert_plain_rewards(experiences, pairs, oracle)
    assert min(expected) < 0.5 < max(expected)  # sound and unsound chains both present


@pytest.fixture(scope="module")
def shipped_head():
    from ares_rerank import load_backbone

    return load_backbone("default")


@pytest.mark.parametrize("family", TEMPLATED)
def test_chat_templated_prompts_get_the_shipped_heads_rewards_of_the_plain_question(openrlhf, shipped_head, family):
    reranker = AresReranker(shipped_head)  # serve's defaults: --prompt-split none
    questions, steps = claimtrees_pairs()
    experiences, pairs = templated_rollout(openrlhf, family, reranker, questions, steps)
    assert_plain_rewards(experiences, pairs, reranker)
