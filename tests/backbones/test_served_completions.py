"""A causal PRM family served over vLLM's ``/v1/completions`` (``kind="vllm-completions"``): a fake server on 127.0.0.1
runs the Math-Shepherd / RLHFlow mirror and answers ``prompt_logprobs`` in vLLM's response schema (``null`` for the
first token, then per position an object keyed by the token id as a string); the served scores equal the local
family's."""

from __future__ import annotations

import pytest
import torch

from ares_rerank import AresConfig, Chain, load_backbone, score_chains
from ares_rerank.backbones.served import ServerResponseError
from fake_servers import FakeServer, Reply, vllm_prompt_logprobs
from prm_mirrors import math_shepherd_mirror, rlhflow_mirror, versaprm_mirror


BASE = ["Janet's ducks lay 16 eggs per day.", "She eats three for breakfast."]
STEPS = ["Step 1: 16 - 3 = 13 eggs left.", "Step 2: 13 - 4 = 9.", "The answer is: 18"]


def completions_server(path, calls):
    """vLLM's /v1/completions with prompt_logprobs=0 on the mirror's causal LM (tests/fake_servers.py)."""
    from transformers import AutoModelForCausalLM

    return vllm_prompt_logprobs(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval(), calls=calls)


@pytest.mark.parametrize(("family", "mirror"), [("prm-math-shepherd", math_shepherd_mirror),
                                                ("prm-rlhflow", rlhflow_mirror),
                                                ("prm-versaprm", versaprm_mirror)])
def test_served_family_scores_equal_the_local_family(tmp_path, family, mirror):
    path = mirror(tmp_path / "m")
    local = load_backbone(path, kind=family, device="cpu", dtype="float32")
    calls = []
    with FakeServer(completions_server(path, calls)) as server:
        served = load_backbone(server.url, kind="vllm-completions", tokenizer=str(path), family=family,
                               batch_size=2, concurrency=2, max_retries=0)
        premises = [BASE + STEPS[:2], BASE[:1] + STEPS[1:2], []]
        num_base = [2, 1, 0]
        got = served.entailment_probs(premises, [STEPS[2]] * 3, num_base=num_base)
        whole = served.chain_step_probs(BASE, STEPS)
        ares = score_chains([Chain(BASE, STEPS)], served, config=AresConfig(prior=1.0, seed=0))[0]
    with torch.inference_mode():
        assert got == pytest.approx(local.entailment_probs(premises, [STEPS[2]] * 3, num_base=num_base), abs=1e-5)
        assert whole == pytest.approx(local.chain_step_probs(BASE, STEPS), abs=1e-5)
        want = score_chains([Chain(BASE, STEPS)], local, config=AresConfig(prior=1.0, seed=0))[0]
    assert ares.step_scores == pytest.approx(want.step_scores, abs=1e-5)
    assert served.max_length == 2048  # the server's max_model_len: the window policy fits inputs to it
    assert served.served_model == "prm" and sorted(calls[:2]) == [2, 4]  # 2 prompts a read: 2 + 1 items, batches of 2


def test_a_family_that_is_not_read_from_next_tokens_is_refused(tmp_path):
    with pytest.raises(ValueError, match="family='prm-qwen' is not a causal PRM.*vllm-pooling"):
        load_backbone("http://127.0.0.1:9", kind="vllm-completions", tokenizer=str(math_shepherd_mirror(tmp_path)),
                      family="prm-qwen")
    with pytest.raises(ValueError, match="needs tokenizer="):
        load_backbone("http://127.0.0.1:9", kind="vllm-completions")


@pytest.mark.parametrize(("answer", "match"), [
    ({"choices": []}, "0 choices for 2 prompts"),
    ({"choices": [{"index": 0, "prompt_logprobs": None}, {"index": 1, "prompt_logprobs": None}]},
     "no usable prompt log-probability"),
    ({"choices": [{"index": i, "prompt_logprobs": [None, {"1": {"logprob": 0.5}}]} for i in range(2)]},
     "no usable prompt log-probability"),
])
def test_answers_that_do_not_fit_are_clear_errors(tmp_path, answer, match):
    path = math_shepherd_mirror(tmp_path / "m")
    with FakeServer(lambda m, p, b: Reply(answer)) as server:
        served = load_backbone(server.url, kind="vllm-completions", tokenizer=str(path), model="m", max_length=512,
                               max_retries=0)
        with pytest.raises(ServerResponseError, match=match):
            served.entailment_probs([["What is 2 + 3?"]], ["2 + 3 = 5."])


def test_math_psa_served_merged_equals_the_local_adapter_on_its_base(tmp_path):
    """Math-psa is a LoRA adapter: served, vLLM runs the adapter merged into its base (or as a LoRA module); the
    served scores equal the local family's adapter loaded with peft on its base."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from prm_mirrors import math_psa_mirror

    adapter, base = math_psa_mirror(tmp_path / "psa")
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                                       adapter).merge_and_unload()
    merged.save_pretrained(tmp_path / "merged")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "merged")
    local = load_backbone(adapter, kind="prm-math-psa", base_model=base, device="cpu", dtype="float32")
    with FakeServer(completions_server(tmp_path / "merged", [])) as server:
        served = load_backbone(server.url, kind="vllm-completions", tokenizer=str(base), family="prm-math-psa",
                               max_retries=0)
        whole = served.chain_step_probs(BASE, STEPS)
    with torch.inference_mode():
        assert whole == pytest.approx(local.chain_step_probs(BASE, STEPS), abs=1e-5)
