"""best_of_n: N samples per prompt from a real (tiny) causal LM, scored by the reranker, the best kept."""

from __future__ import annotations

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from ares_rerank import FunctionBackbone
from ares_rerank.generation import BestOfN, best_of_n
from ares_rerank.rerank import AresReranker


def char_overlap(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """Share of the step's characters seen in the premises, in [0.05, 0.95]: varies between random samples."""
    return [0.05 + 0.9 * sum(c in set("".join(p)) for c in h) / max(len(h), 1) for p, h in zip(premises, hypotheses)]


@pytest.fixture(scope="module")
def lm(tiny_causal_lm_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_causal_lm_path)
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_lm_path)
    return model.eval(), tokenizer


@pytest.fixture
def reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(char_overlap), step_separator="\n", aggregate="mean")


PROMPTS = ["I have AB. Rule: AB -> CD", "What is 2 + 3?", "Let x = 3."]


def test_best_of_n_returns_n_scored_candidates_and_the_best(lm, reranker):
    model, tokenizer = lm
    results = best_of_n(model, tokenizer, PROMPTS, reranker, n=4, max_new_tokens=10, batch_size=2, seed=0)
    assert len(results) == 3 and all(isinstance(r, BestOfN) for r in results)
    for prompt, result in zip(PROMPTS, results):
        assert result.prompt == prompt and len(result.candidates) == 4 and len(result.scores) == 4
        # The scores are the reranker's for exactly these candidates, and the best is the top of its ranking.
        assert result.scores == [r["score"] for r in reranker.score(prompt, result.candidates)]
        assert result.best_index == reranker.select(prompt, result.candidates)["index"]
        assert result.best == result.candidates[result.best_index]
        assert result.best_score == max(s for s in result.scores if s is not None)
        assert all(not c.startswith(prompt) for c in result.candidates if c)  # only the new tokens are decoded
    again = best_of_n(model, tokenizer, PROMPTS, reranker, n=4, max_new_tokens=10, batch_size=2, seed=0)
    assert [r.candidates for r in again] == [r.candidates for r in results]  # seeded: reproducible
    assert results[0].to_dict()["best"] == results[0].best


def test_samples_are_grouped_by_prompt_under_left_padding(lm, reranker):
    # top_k=1 makes every sample the greedy continuation: the n samples of a prompt must all equal that prompt's
    # continuation generated alone, which checks both the grouping of num_return_sequences and the padding side.
    model, tokenizer = lm
    batched = best_of_n(model, tokenizer, PROMPTS, reranker, n=3, max_new_tokens=8, top_k=1)
    for prompt, result in zip(PROMPTS, batched):
        (alone,) = best_of_n(model, tokenizer, [prompt], reranker, n=1, max_new_tokens=8, top_k=1)
        assert result.candidates == [alone.candidates[0]] * 3
    assert tokenizer.padding_side == "right"  # restored


def test_conversational_prompts_use_the_chat_template(lm, reranker):
    model, tokenizer = lm
    messages = [[{"role": "user", "content": p}] for p in PROMPTS[:2]]
    results = best_of_n(model, tokenizer, messages, reranker, n=2, max_new_tokens=6, seed=1)
    assert [r.prompt for r in results] == messages and all(len(r.candidates) == 2 for r in results)
    wrapped = best_of_n(model, tokenizer, PROMPTS[:2], reranker, n=2, max_new_tokens=6, seed=1, use_chat_template=True)
    assert [r.candidates for r in wrapped] == [r.candidates for r in results]  # same rendered text, same seed
    with pytest.raises(ValueError, match="mix strings and conversations"):
        best_of_n(model, tokenizer, [PROMPTS[0], messages[0]], reranker, n=2, max_new_tokens=4)


def test_validation(lm, reranker):
    model, tokenizer = lm
    with pytest.raises(ValueError, match="n=0"):
        best_of_n(model, tokenizer, PROMPTS, reranker, n=0)
    with pytest.raises(TypeError, match="got a str: pass a list of prompts"):
        best_of_n(model, tokenizer, "a prompt", reranker)
    with pytest.raises(TypeError, match="must be an AresReranker"):
        best_of_n(model, tokenizer, PROMPTS, FunctionBackbone(char_overlap))
    # each ended deep in transformers / torch, or (a dict of prompts) generated from its keys
    with pytest.raises(TypeError, match="got a dict"):
        best_of_n(model, tokenizer, {"prompt": "a"}, reranker)
    with pytest.raises(TypeError, match=r"model=NoneType, tokenizer=.*needs a transformers causal LM"):
        best_of_n(None, tokenizer, PROMPTS, reranker)
    with pytest.raises(TypeError, match="as n=, not num_return_sequences="):
        best_of_n(model, tokenizer, PROMPTS, reranker, num_return_sequences=2)
    with pytest.raises(ValueError, match=r"prompts\[1\] are empty strings"):
        best_of_n(model, tokenizer, ["I have A", " "], reranker)
    # refused before any generation: a bad aggregate only after every sample was drawn, the others deep inside
    for kwargs, message in (({"aggregate": "maxx"}, "maxx"), ({"seed": "a"}, r"seed='a'\) must be a non-negative int"),
                            ({"use_chat_template": "yes"}, r"use_chat_template='yes'\) must be True, False or None"),
                            ({"do_sample": False}, "greedy decoding gives one answer")):
        with pytest.raises(ValueError, match=message):
            best_of_n(model, tokenizer, PROMPTS, reranker, n=2, **kwargs)


def test_progress_bars_for_long_calls_off_by_flag(lm, reranker, capsys):
    model, tokenizer = lm
    best_of_n(model, tokenizer, PROMPTS, reranker, n=2, max_new_tokens=4, batch_size=1, seed=0)
    assert "generating (n=2)" in capsys.readouterr().err  # three generation batches: a bar
    best_of_n(model, tokenizer, PROMPTS, reranker, n=2, max_new_tokens=4, batch_size=1, seed=0,
              show_progress_bar=False)
    assert capsys.readouterr().err == ""
    best_of_n(model, tokenizer, PROMPTS[:1], reranker, n=2, max_new_tokens=4, seed=0, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "generating (n=2)" in err and "scoring (ares)" in err
