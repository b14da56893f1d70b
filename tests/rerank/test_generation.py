"""best_of_n: N samples per prompt from a real (tiny) causal LM, scored by the reranker, the best kept; and the same
from a vLLM ``LLM`` (a stand-in ``vllm`` module with vLLM 0.33's interface: vLLM cannot run here)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from ares_rerank import FunctionBackbone
from ares_rerank.rerank.best_of_n import BestOfN, best_of_n
from ares_rerank.rerank.reranker import AresReranker


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


# -- vLLM: a stand-in module with vLLM 0.33's LLM.generate / LLM.chat / SamplingParams / RequestOutput interface ------
@dataclass
class SamplingParams:
    """A subset of vllm.SamplingParams' fields, with vLLM 0.33's names and defaults."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: str | list[str] | None = None
    max_tokens: int | None = 16
    min_tokens: int = 0


class LLM:
    """Records each call and answers with the texts given per prompt (a string, or a conversation's last message),
    as RequestOutput-like objects: ``.outputs[i].text``, ``params.n`` of them."""

    def __init__(self, texts: dict[str, list[str]], defaults: SamplingParams | None = None) -> None:
        self.texts, self.defaults, self.calls = texts, defaults, []

    def get_tokenizer(self):
        raise AssertionError("best_of_n has no use for the LLM's tokenizer")

    def get_default_sampling_params(self) -> SamplingParams:
        return self.defaults or SamplingParams()

    def _outputs(self, keys, params):
        return [types.SimpleNamespace(outputs=[types.SimpleNamespace(index=i, text=t)
                                               for i, t in enumerate(self.texts[key][: params.n])]) for key in keys]

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None, priority=None):
        self.calls.append({"method": "generate", "prompts": prompts, "params": sampling_params, "use_tqdm": use_tqdm})
        return self._outputs(prompts, sampling_params)

    def chat(self, messages, sampling_params=None, use_tqdm=True, lora_request=None, priority=None,
             chat_template=None, add_generation_prompt=True):
        self.calls.append({"method": "chat", "messages": messages, "params": sampling_params, "use_tqdm": use_tqdm,
                           "chat_template": chat_template})
        return self._outputs([conversation[-1]["content"] for conversation in messages], sampling_params)


LLM.__module__ = SamplingParams.__module__ = "vllm.entrypoints.llm"  # where vllm.LLM is defined


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_vllm_llm_samples_in_one_generate_call_and_selects_as_the_transformers_path(lm, reranker, fake_vllm):
    model, tokenizer = lm
    expected = best_of_n(model, tokenizer, PROMPTS, reranker, n=4, max_new_tokens=10, seed=0)
    llm = LLM({prompt: result.candidates for prompt, result in zip(PROMPTS, expected)})
    results = best_of_n(llm, None, PROMPTS, reranker, n=4, max_new_tokens=10, seed=0, temperature=0.7, top_p=0.9,
                        show_progress_bar=False)
    for result, same in zip(results, expected):
        assert result.to_dict() == same.to_dict()  # candidates, scores, records, best index / text / score
    (call,) = llm.calls
    assert call["method"] == "generate" and call["prompts"] == PROMPTS and call["use_tqdm"] is False
    assert call["params"] == SamplingParams(n=4, max_tokens=10, seed=0, temperature=0.7, top_p=0.9)


def test_vllm_conversations_go_through_chat_and_progress_follows_show_progress_bar(reranker, fake_vllm):
    texts = {p: [f"so {p}", "so x", "so y"] for p in PROMPTS}
    messages = [[{"role": "user", "content": p}] for p in PROMPTS]
    llm = LLM(texts, defaults=SamplingParams(temperature=0.6, top_p=0.95, top_k=20))
    results = best_of_n(llm, None, messages, reranker, n=3, max_new_tokens=32, batch_size=2, top_p=0.5)
    assert [r.prompt for r in results] == messages and [r.candidates for r in results] == [texts[p] for p in PROMPTS]
    call = llm.calls[-1]
    assert call["method"] == "chat" and call["messages"] == messages and call["chat_template"] is None
    # the model's default sampling (its generation_config), then the caller's arguments
    assert call["params"] == SamplingParams(n=3, max_tokens=32, temperature=0.6, top_p=0.5, top_k=20)
    assert call["use_tqdm"] is True  # show_progress_bar=None: 3 prompts are more than one batch of 2
    template = types.SimpleNamespace(chat_template="{{ messages }}")
    best_of_n(llm, template, PROMPTS[:2], reranker, n=2, use_chat_template=True, show_progress_bar=None)
    call = llm.calls[-1]
    assert call["messages"] == messages[:2] and call["chat_template"] == "{{ messages }}"
    assert call["use_tqdm"] is False  # one batch
    best_of_n(llm, None, PROMPTS[:1], reranker, n=1, show_progress_bar=True, do_sample=False, min_new_tokens=2,
              stop_strings=["\n\n"])
    call = llm.calls[-1]
    assert call["method"] == "generate" and call["use_tqdm"] is True
    assert call["params"] == SamplingParams(n=1, max_tokens=256, temperature=0.0, top_p=0.95, top_k=20,
                                            min_tokens=2, stop=["\n\n"])


def test_vllm_arguments_that_do_not_map_to_sampling_params_are_named(reranker, fake_vllm):
    llm = LLM({p: ["so a"] for p in PROMPTS})
    with pytest.raises(TypeError, match=r"best_of_n\(num_beams=2\): vLLM's SamplingParams has no 'num_beams'"):
        best_of_n(llm, None, PROMPTS, reranker, n=2, num_beams=2)
    with pytest.raises(TypeError, match="as max_new_tokens=, not max_tokens="):
        best_of_n(llm, None, PROMPTS, reranker, n=2, max_tokens=8)
    with pytest.raises(ValueError, match="mix strings and conversations"):
        best_of_n(llm, None, [PROMPTS[0], [{"role": "user", "content": "hi"}]], reranker, n=2)
    with pytest.raises(TypeError, match=r"show_progress_bar='yes'\) must be True, False or None"):
        best_of_n(llm, None, PROMPTS, reranker, show_progress_bar="yes")
    assert llm.calls == []  # each refused before sampling


def test_a_vllm_llm_is_told_by_its_class_not_by_its_method_names(reranker, fake_vllm):
    class MyLLM(LLM):  # a subclass defined elsewhere is still a vllm.LLM
        pass

    assert MyLLM.__module__ == __name__
    llm = MyLLM({p: ["so a", "so b"] for p in PROMPTS})
    assert [r.candidates for r in best_of_n(llm, None, PROMPTS, reranker, n=2)] == [["so a", "so b"]] * 3

    class LookAlike:  # the same methods, not vLLM's class: still read as a transformers model, which needs a tokenizer
        generate = chat = get_tokenizer = LLM.generate

    with pytest.raises(TypeError, match=r"model=LookAlike, tokenizer=NoneType\) needs a transformers causal LM"):
        best_of_n(LookAlike(), None, PROMPTS, reranker)


def test_best_of_n_with_an_answer_vote_picks_the_winning_answer_and_reports_the_groups(fake_vllm):
    keyword = FunctionBackbone(lambda premises, hypotheses: [0.9 if "check" in h else 0.3 for h in hypotheses])
    reranker = AresReranker(keyword, step_separator="\n")
    samples = ["guess\nso \\boxed{7}", "guess\nso \\boxed{7}", "check\ncheck \\boxed{5}", "no answer at all"]
    llm = LLM({"q": samples})
    majority = best_of_n(llm, None, ["q"], reranker, n=4, selection="majority")[0]
    assert majority.selection == "majority" and majority.best_index == 0 and majority.answers == ["7", "7", "5", None]
    assert [(g["answer"], g["size"]) for g in majority.groups] == [("7", 2), ("5", 1)]
    weighted = best_of_n(llm, None, ["q"], reranker, n=4, selection="weighted")[0]
    assert weighted.best_index == 2 and weighted.groups[0]["answer"] == "5"  # 0.9 beats 0.3 + 0.3
    plain = best_of_n(llm, None, ["q"], reranker, n=4)[0]
    assert plain.selection == "best" and plain.answers is None and plain.groups == []
    last_word = best_of_n(llm, None, ["q"], reranker, n=4, selection="majority",
                          answer_fn=lambda text: text.split()[-1])[0]
    assert last_word.answers == ["\\boxed{7}", "\\boxed{7}", "\\boxed{5}", "all"]
    with pytest.raises(ValueError, match="best_of_n\\(selection\\)='vote'"):
        best_of_n(llm, None, ["q"], reranker, n=4, selection="vote")
    assert len(llm.calls) == 4  # the bad selection was refused before sampling
