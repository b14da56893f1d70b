"""Implicit PRMs (``kind="prm-implicit"``, EurusPRM's preset ``"prm-eurus"``) against EurusPRM's model-card code.

The reference below is the usage code of the PRIME-RL/EurusPRM-Stage1 / -Stage2 model cards, re-written here (the
same chat-template calls, the ``len(ids) - 2`` step ends, the label mask, ``coef * (logp - ref_logp)``, the cumulative
sum and the gather), adapted only where transformers 5 changed an API (``apply_chat_template`` returns a dict unless
``return_dict=False``). It does not call the project's renderers. On an offline mirror (tests/implicit_mirrors.py):
the same input ids, and the same rewards and probabilities within 1e-6, on whole chains and on premise subsets
rendered as ARES renders them (the chain made of the subset).
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from ares_rerank import Chain, load_backbone, score_chains
from ares_rerank.backbones.loading import prm_family
from ares_rerank.backbones.prms.eurus import EurusPRM
from ares_rerank.backbones.prms.implicit import ImplicitPRM
from implicit_mirrors import eurus_mirror
from tiny_models import hub_cache_repo


BASE = ["Janet's ducks lay 16 eggs per day.", "She eats three for breakfast every morning."]
STEPS = ["Step 1: 16 - 3 = 13 eggs left.", "Step 2: 13 - 4 = 9.", "Step 3: 9 * 2 = 18.", "The answer is: 18"]
# (included base claims, included earlier steps, judged step): how ARES masks a chain
SUBSETS = [((0, 1), (0, 1, 2), 3), ((0,), (1,), 3), ((), (0, 2), 3), ((1,), (), 1), ((0, 1), (0,), 2)]
CARD_BETA = 0.001  # the card's coef
BETA = 0.1  # spreads the mirror's probabilities away from 0.5 (its log-ratios are a few nats per chain)
ATOL = 1e-6


def question(base: list[str]) -> str:
    return "\n".join(base)  # the families' default question_separator


# -- EurusPRM's model card, re-written ------------------------------------------------------------------------------
def eurus_card(model, ref_model, tokenizer, query: str, answer: list[str], coef: float):
    """The card's usage code for ``d = {'query': query, 'answer': answer}``: ``(input ids, beta_reward per step)``."""
    input_ids = tokenizer.apply_chat_template([
        {"role": "user", "content": query},
        {"role": "assistant", "content": "\n\n".join(answer)},
    ], tokenize=True, add_generation_prompt=False, return_tensors="pt", return_dict=False)
    attention_mask = input_ids != tokenizer.pad_token_id
    step_last_tokens = []
    for step_num in range(0, len(answer) + 1):
        conv = tokenizer.apply_chat_template([
            {"role": "user", "content": query},
            {"role": "assistant", "content": "\n\n".join(answer[:step_num])},
        ], tokenize=False, add_generation_prompt=False)
        conv = conv.strip()
        if step_num != 0 and step_num != len(answer):
            conv += "\n\n"
        currect_ids = tokenizer.encode(conv, add_special_tokens=False)
        step_last_tokens.append(len(currect_ids) - 2)

    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": input_ids}
    label_mask = torch.tensor([[0] * step_last_tokens[0] + [1] * (input_ids.shape[-1] - step_last_tokens[0])])
    step_last_tokens = torch.tensor([step_last_tokens])

    def get_logps(model, inputs):
        logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        labels = inputs["labels"][:, 1:].clone().long()
        logits = logits[:, :-1, :]
        labels[labels == -100] = 0
        per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
        return per_token_logps

    with torch.no_grad():
        per_token_logps = get_logps(model, inputs)
        ref_per_token_logps = get_logps(ref_model, inputs)

    raw_reward = per_token_logps - ref_per_token_logps
    beta_reward = coef * raw_reward * label_mask[:, 1:]
    beta_reward = beta_reward.cumsum(-1)
    beta_reward = beta_reward.gather(dim=-1, index=step_last_tokens[:, 1:])
    return input_ids[0].tolist(), beta_reward[0].tolist()


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    root = tmp_path_factory.mktemp("eurus")
    prm_path, ref_path = eurus_mirror(root)
    tokenizer = AutoTokenizer.from_pretrained(prm_path)
    model = AutoModelForCausalLM.from_pretrained(prm_path, dtype=torch.float32).eval()
    ref = AutoModelForCausalLM.from_pretrained(ref_path, dtype=torch.float32).eval()

    def card(query, answer, coef=BETA):
        return eurus_card(model, ref, tokenizer, query, answer, coef)

    return {"root": root, "prm": prm_path, "ref": ref_path, "card": card, "model": model, "ref_model": ref,
            "tokenizer": tokenizer}


@pytest.fixture(scope="module")
def eurus(mirror):
    """The preset loaded as users load it: the PRM folder with kind='prm-eurus' and ref_model= the reference's."""
    prm = load_backbone(mirror["prm"], kind="prm-eurus", ref_model=mirror["ref"], device="cpu", dtype="float32",
                        beta=BETA)
    assert type(prm) is EurusPRM
    return prm


@torch.inference_mode()
def test_whole_chain_matches_the_card(mirror, eurus):
    ids, expected = mirror["card"](question(BASE), STEPS)
    assert eurus.encode_chain(BASE, STEPS)["input_ids"] == ids
    assert eurus.step_rewards(BASE, STEPS) == pytest.approx(expected, abs=ATOL)
    probs = [sigmoid(r) for r in expected]
    assert max(abs(p - 0.5) for p in probs) > 0.05  # the check reads the positions, not a constant 0.5
    (whole,) = score_chains([Chain(BASE, STEPS)], eurus, method="prm-chain")
    assert whole.step_scores == pytest.approx(probs, abs=ATOL)
    # the card's own beta: the raw rewards it prints
    card_prm = EurusPRM(mirror["model"], mirror["tokenizer"], mirror["ref_model"])
    _, card_rewards = mirror["card"](question(BASE), STEPS, coef=CARD_BETA)
    assert card_prm.beta == CARD_BETA
    assert card_prm.step_rewards(BASE, STEPS) == pytest.approx(card_rewards, rel=1e-4, abs=1e-9)


@torch.inference_mode()
def test_premise_subsets_match_the_card_on_the_subset_chain(mirror, eurus):
    premises, hypotheses, num_base, wanted = [], [], [], []
    for base_idx, step_idx, judged in SUBSETS:
        base, earlier = [BASE[i] for i in base_idx], [STEPS[i] for i in step_idx]
        ids, rewards = mirror["card"](question(base), earlier + [STEPS[judged]])
        assert eurus.encode_pair(base + earlier, STEPS[judged], num_base=len(base))["input_ids"] == ids
        premises.append(base + earlier)
        hypotheses.append(STEPS[judged])
        num_base.append(len(base))
        wanted.append(sigmoid(rewards[-1]))
    eurus.clear_caches()
    got = eurus.entailment_probs(premises, hypotheses, num_base=num_base)  # one batch per model
    assert got == pytest.approx(wanted, abs=ATOL)


@torch.inference_mode()
def test_step_reward_is_the_difference_of_the_cards_values(mirror):
    prm = ImplicitPRM(mirror["model"], mirror["tokenizer"], mirror["ref_model"], beta=BETA, reward="step")
    _, cumulative = mirror["card"](question(BASE), STEPS)
    own = [b - a for a, b in zip([0.0] + cumulative[:-1], cumulative)]
    assert prm.step_rewards(BASE, STEPS) == pytest.approx(own, abs=ATOL)
    assert prm.chain_step_probs(BASE, STEPS) == pytest.approx([sigmoid(r) for r in own], abs=ATOL)


@torch.inference_mode()
def test_ares_reuses_prefixes_in_both_models(mirror, eurus):
    """ARES's inputs share their heads: both models run them once (shared heads / stored prefixes), and the scores
    equal those of full passes."""
    eurus.clear_caches()
    eurus.reset_stats()
    assert len(eurus.prefix_store) == len(eurus.reference.prefix_store) == 0
    assert eurus.reference.token_stats.tokens == 0
    chains = [Chain(BASE, STEPS), Chain(BASE[:1], STEPS[:3])]
    reused = score_chains(chains, eurus)
    assert eurus.token_stats.reused > 0 and eurus.reference.token_stats.reused > 0
    assert len(eurus.prefix_store) > 0 and len(eurus.reference.prefix_store) > 0  # inputs kept to be extended
    assert eurus.reference.token_stats.tokens == eurus.token_stats.tokens  # the same ids through both models
    plain = EurusPRM(mirror["model"], mirror["tokenizer"], mirror["ref_model"], beta=BETA, prefix_cache=False)
    assert plain.reference.prefix_cache is False
    full = score_chains(chains, plain)
    assert plain.token_stats.reused == 0 and plain.reference.token_stats.reused == 0
    for a, b in zip(reused, full):
        assert a.step_scores == pytest.approx(b.step_scores, abs=1e-5)
    _, first = mirror["card"](question(BASE), STEPS[:1])  # at prior 1, ARES's first input is the first step alone
    assert reused[0].step_scores[0] == pytest.approx(sigmoid(first[0]), abs=ATOL)


@torch.inference_mode()
def test_a_longer_chain_runs_only_its_new_tokens_in_both_models(mirror, eurus):
    """One row per call, so no shared head: what is reused comes from the prefix stores (kv_store)."""
    eurus.clear_caches()
    eurus.chain_step_probs(BASE, STEPS[:2])
    eurus.reset_stats()
    probs = eurus.chain_step_probs(BASE, STEPS)
    head = len(eurus.encode_chain(BASE, STEPS[:2])["input_ids"]) - 2  # up to the end of step 2 (then "<|im_end|>")
    assert eurus.token_stats.reused >= head - 1 and eurus.reference.token_stats.reused >= head - 1
    assert eurus.token_stats.tokens < len(eurus.encode_chain(BASE, STEPS)["input_ids"]) - head + 2
    _, rewards = mirror["card"](question(BASE), STEPS)
    assert probs == pytest.approx([sigmoid(r) for r in rewards], abs=ATOL)


def test_eurus_is_picked_from_its_hub_ids_with_the_cards_reference(mirror, tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    hub_cache_repo(cache, "PRIME-RL/EurusPRM-Stage2", mirror["prm"])
    hub_cache_repo(cache, "Qwen/Qwen2.5-Math-7B-Instruct", mirror["ref"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert prm_family("prime-rl/eurusprm-stage1") == "prm-eurus"
    assert prm_family("PRIME-RL/EurusPRM-Stage2") == "prm-eurus"
    prm = load_backbone("PRIME-RL/EurusPRM-Stage2", cache_dir=cache, device="cpu", dtype="float32")
    assert type(prm) is EurusPRM and prm.beta == CARD_BETA and prm.reward == "cumulative"
    assert "Qwen2.5-Math-7B-Instruct" in prm.ref_model.config._name_or_path  # the card's default reference
    expected = mirror["ref_model"].lm_head.weight
    assert torch.equal(prm.ref_model.lm_head.weight, expected)
    with torch.inference_mode():
        _, rewards = mirror["card"](question(BASE), STEPS, coef=CARD_BETA)
        assert prm.step_rewards(BASE, STEPS) == pytest.approx(rewards, rel=1e-4, abs=1e-9)


def test_bad_options_name_the_parameter(mirror):
    model, tokenizer, ref = mirror["model"], mirror["tokenizer"], mirror["ref_model"]
    with pytest.raises(ValueError, match="needs ref_model="):
        load_backbone(mirror["prm"], kind="prm-implicit", device="cpu")
    with pytest.raises(TypeError, match="ref_model='Qwen"):
        ImplicitPRM(model, tokenizer, "Qwen/Qwen2.5-Math-7B-Instruct")
    with pytest.raises(ValueError, match="beta=0"):
        ImplicitPRM(model, tokenizer, ref, beta=0)
    with pytest.raises(ValueError, match="reward='token'"):
        ImplicitPRM(model, tokenizer, ref, reward="token")
    other = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer) + 8, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
    with pytest.raises(ValueError, match="vocabulary"):
        ImplicitPRM(model, tokenizer, other)
    prm = ImplicitPRM(model, tokenizer, ref, read_offset=40)
    with pytest.raises(ValueError, match="read_offset=40"):
        prm.encode_chain(BASE, STEPS)


# -- served: the PRM and the reference on two vLLM /v1/completions servers --------------------------------------------
@torch.inference_mode()
def test_served_eurus_on_two_servers_matches_the_card(mirror):
    from fake_servers import FakeServer, vllm_prompt_logprobs
    from prm_checks import subset_pairs

    prm_calls, ref_calls = [], []
    with FakeServer(vllm_prompt_logprobs(mirror["model"], "eurus", 4096, prm_calls)) as prm_server, \
            FakeServer(vllm_prompt_logprobs(mirror["ref_model"], "qwen-math", 2048, ref_calls)) as ref_server:
        served = load_backbone(prm_server.url, kind="vllm-completions", family="prm-eurus", ref_url=ref_server.url,
                               tokenizer=mirror["prm"], beta=BETA, max_retries=0)
        assert type(served).__name__ == "ServedEurusPRM"
        (whole,) = score_chains([Chain(BASE, STEPS)], served, method="prm-chain")
        premises, hypotheses, num_base, _, rewards = subset_pairs(mirror["card"], SUBSETS[:3])
        got = served.entailment_probs(premises, hypotheses, num_base=num_base)
        wanted = [sigmoid(r) for r in rewards]
    ids, expected = mirror["card"](question(BASE), STEPS)
    assert whole.step_scores == pytest.approx([sigmoid(r) for r in expected], abs=1e-5)
    assert got == pytest.approx(wanted, abs=1e-5)
    prm_bodies = [b for _, p, b in prm_server.requests if p == "/v1/completions"]
    ref_bodies = [b for _, p, b in ref_server.requests if p == "/v1/completions"]
    (sent,) = prm_bodies[0]["prompt"]  # the whole chain: the card's ids up to the last step's read, to both models
    assert sent == ids[: len(sent)] and ref_bodies[0]["prompt"] == [sent] and len(sent) >= len(ids) - 3
    assert prm_calls == ref_calls  # one request per batch on each server, the same prompts
    assert (served.served_model, served.ref_served_model) == ("eurus", "qwen-math")
    assert served.max_length <= 2048  # the smaller window of the two servers


def test_a_served_implicit_prm_needs_the_reference_server(mirror):
    from ares_rerank.backbones.served import ServerError
    from fake_servers import FakeServer, Reply, vllm_prompt_logprobs

    with pytest.raises(TypeError, match=r"model=None: pass the loaded PRM.*kind='vllm-completions'"):
        ImplicitPRM(None, mirror["tokenizer"])
    reference = vllm_prompt_logprobs(mirror["ref_model"], "qwen-math")
    failed = []

    def down_once(method, path, payload):  # the reference's first /v1/models fails, then it answers
        if path == "/v1/models" and not failed:
            failed.append(path)
            return Reply({"error": {"message": "starting", "code": 503}}, status=503)
        return reference(method, path, payload)

    with FakeServer(vllm_prompt_logprobs(mirror["model"], "eurus")) as prm_server, FakeServer(down_once) as ref:
        served = load_backbone(prm_server.url, kind="vllm-completions", family="prm-eurus", tokenizer=mirror["prm"],
                               ref_url=ref.url, max_retries=0, beta=BETA)
        with pytest.raises(ServerError):
            served.entailment_probs([BASE], [STEPS[0]], num_base=[2])
        got = served.entailment_probs([BASE], [STEPS[0]], num_base=[2])  # asked again, not sent unnamed
    assert served.ref_served_model == "qwen-math"
    assert [b["model"] for _, p, b in ref.requests if p == "/v1/completions"] == ["qwen-math"]
    assert got == pytest.approx([sigmoid(mirror["card"](question(BASE), STEPS[:1])[1][-1])], abs=1e-5)
    with pytest.raises(ValueError, match=r"ref_url=None.*reference LM's server"):
        load_backbone("http://127.0.0.1:9", kind="vllm-completions", family="prm-eurus", tokenizer=mirror["prm"])
