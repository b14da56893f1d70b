"""The causal-LM judge on a tiny Qwen2 loaded through from_pretrained: Yes/No, Likert, and the LLM-Judge baseline."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from ares_rerank import Chain, load_backbone, score_chains
from ares_rerank.backbones.judge import LLMJudge, parse_step_ratings


PREMISES = [["Let x = 3.", "Let y = 4."], []]
HYPOTHESES = ["So x + y = 7.", "The sky is blue."]


@pytest.fixture(scope="module")
def model(tiny_causal_lm_path):
    return AutoModelForCausalLM.from_pretrained(tiny_causal_lm_path).eval()


def continuation_logp(model, prompt_ids, answer_ids):
    """log P(answer | prompt) computed directly, one sequence, no padding."""
    ids = torch.tensor([prompt_ids + answer_ids])
    with torch.inference_mode():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return sum(logp[len(prompt_ids) - 1 + j, t].item() for j, t in enumerate(answer_ids))


def test_causal_lm_needs_a_kind(tiny_causal_lm_path):
    with pytest.raises(ValueError, match=r"kind='judge'\).*kind='prm-causal'"):
        load_backbone(tiny_causal_lm_path)


def test_yes_no_single_token_answers_read_one_forward_pass(tiny_causal_lm_path, model):
    judge = load_backbone(tiny_causal_lm_path, kind="judge", answer_tokens=("Yes", " No"))  # one token each here
    assert isinstance(judge, LLMJudge) and all(len(ids) == 1 for ids, _ in judge.options)
    got = judge.entailment_probs(PREMISES, HYPOTHESES)
    assert judge.stats.forward_passes == 1 and judge.stats.pairs_computed == 2
    for claims, hypothesis, value in zip(PREMISES, HYPOTHESES, got):
        prompt = judge.encode_pair(claims, hypothesis)["input_ids"]
        yes = continuation_logp(model, prompt, judge.options[0][0])
        no = continuation_logp(model, prompt, judge.options[1][0])
        assert value == pytest.approx(math.exp(yes) / (math.exp(yes) + math.exp(no)), abs=1e-5)
    text = judge.tokenizer.decode(judge.encode_pair(PREMISES[0], HYPOTHESES[0])["input_ids"])
    assert "Context:\nLet x = 3.\nLet y = 4.\n\nHypothesis:\nSo x + y = 7." in text
    assert text.endswith("<|im_start|>assistant\n")  # the generation prompt: the answer comes next


def test_multi_token_answers_are_scored_as_sequences(tiny_causal_lm_path, model):
    judge = load_backbone(tiny_causal_lm_path, kind="judge")  # "No" is two tokens for the tiny tokenizer
    assert len(judge.options[1][0]) == 2
    (value,) = judge.entailment_probs(PREMISES[:1], HYPOTHESES[:1])
    prompt = judge.encode_pair(PREMISES[0], HYPOTHESES[0])["input_ids"]
    yes, no = (continuation_logp(model, prompt, ids) for ids, _ in judge.options)
    assert value == pytest.approx(1.0 / (1.0 + math.exp(no - yes)), abs=1e-5)


def test_likert_mode_is_the_expected_value_over_the_seven_labels(tiny_causal_lm_path, model):
    judge = load_backbone(tiny_causal_lm_path, kind="judge", mode="likert")
    assert [v for _, v in judge.options] == [1.0, 0.8, 0.6, 0.5, 0.4, 0.2, 0.0]
    (value,) = judge.entailment_probs(PREMISES[:1], HYPOTHESES[:1])
    prompt = judge.encode_pair(PREMISES[0], HYPOTHESES[0])["input_ids"]
    logps = [continuation_logp(model, prompt, ids) for ids, _ in judge.options]
    weights = [math.exp(lp - max(logps)) for lp in logps]
    expected = sum(w * v for w, (_, v) in zip(weights, judge.options)) / sum(weights)
    assert value == pytest.approx(expected, abs=1e-5)
    assert "Very Likely, Likely, Somewhat Likely, Neutral" in judge.tokenizer.decode(prompt)


def test_same_chain_twice_through_ares_makes_no_new_forward_pass(tiny_causal_lm_path):
    judge = load_backbone(tiny_causal_lm_path, kind="judge", premise_selection="relevant")
    chain = Chain(["Let x = 3.", "The sky is blue.", "Let y = 4."], ["So x + y = 7.", "So 2x = 6."])
    first = score_chains([chain], judge)
    passes = judge.stats.forward_passes
    second = score_chains([chain], judge)
    assert judge.stats.forward_passes == passes and first[0].step_scores == second[0].step_scores


def test_parse_step_ratings_matches_by_number_not_position():
    text = "Step 2: Very Unlikely\nStep 1 - likely\nStep 7: Yes\nStep 2: Very Likely\nstep 4: no"
    assert parse_step_ratings(text, 4) == [0.8, 0.0, None, 0.0]
    assert parse_step_ratings("", 2) == [None, None]


def test_llm_judge_baseline_handles_unrated_steps(tiny_causal_lm_path, monkeypatch):
    judge = load_backbone(tiny_causal_lm_path, kind="judge")
    chain = Chain(["Let x = 3."], ["So 2x = 6.", "So x + 1 = 4.", "The answer is 4."])
    answer = judge.tokenizer.encode("Step 3: Unlikely\nStep 1: Very Likely", add_special_tokens=False)

    def fake_generate(input_ids, **kwargs):  # a deterministic answer that skips step 2
        assert kwargs["do_sample"] is False
        return torch.cat([input_ids, torch.tensor([answer])], dim=1)

    monkeypatch.setattr(judge.model, "generate", fake_generate)
    out = score_chains([chain], judge, method="llm-judge")[0]
    assert out.step_scores == [1.0, 0.5, 0.2] and judge.last_ratings == [1.0, None, 0.2]
    strict = LLMJudge(judge.model, judge.tokenizer, missing_rating=None)
    with pytest.raises(ValueError, match="missing: \\[2\\]"):
        strict.chain_step_probs(chain.base_claims, chain.steps)


def test_llm_judge_baseline_runs_a_real_generation(tiny_causal_lm_path):
    judge = load_backbone(tiny_causal_lm_path, kind="judge", max_new_tokens=8)
    values = judge.chain_step_probs(["Let x = 3."], ["So 2x = 6.", "So x + 1 = 4."])
    assert len(values) == 2 and all(0.0 <= v <= 1.0 for v in values)  # an untrained model rates nothing: 0.5 each
    assert values == [0.5 if r is None else r for r in judge.last_ratings]


def test_bad_judge_settings(tiny_causal_lm_path):
    with pytest.raises(ValueError, match="mode='maybe'"):
        load_backbone(tiny_causal_lm_path, kind="judge", mode="maybe")
    with pytest.raises(ValueError, match="missing_rating"):
        load_backbone(tiny_causal_lm_path, kind="judge", missing_rating=2.0)
    with pytest.raises(ValueError, match="not cut unless asked"):
        load_backbone(tiny_causal_lm_path, kind="judge", max_length=64).entailment_probs([[]], ["long " * 100])
