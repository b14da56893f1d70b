"""Step-level search scored by streaming ARES: early-rejection best-of-N, beam search and DVTS on policies (no
model), a real generation run through transformers with the tiny Qwen2, and the vLLM path against a stand-in."""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass, field

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from ares_rerank import AresConfig, AresReranker, ClaimTreesOracle, FunctionBackbone
from ares_rerank.rerank.answers import answer_matcher
from ares_rerank.evaluation.search import evaluate_search, search_markdown
from ares_rerank.evaluation.simulated import SimulatedPolicy, claimtrees_simulation
from ares_rerank.search import (
    GeneratedStep,
    PolicyStepGenerator,
    TransformersStepGenerator,
    VLLMStepGenerator,
    beam_search,
    dvts,
    step_generator,
    stepwise_best_of_n,
)
from helpers import SamplingParams


def quality(premises, hypotheses):
    """The backbone reads a step's quality off its text (``... q=0.37``): with it, tau of a step is that number."""
    return [float(re.search(r"q=([0-9.]+)", h).group(1)) for h in hypotheses]


class LoggingPolicy:
    """Steps ``s<k> q=<random>`` for ``length`` steps, logging every (prefix, step) it generates."""

    __name__ = "LoggingPolicy"

    def __init__(self, length: int = 4) -> None:
        self.length, self.log = length, []

    def __call__(self, prompt, steps, rng):
        text = f"s{len(steps)} q={rng.random():.3f}"
        self.log.append((tuple(steps), text))
        return GeneratedStep(text, len(text), len(steps) + 1 == self.length)


@pytest.fixture
def quality_reranker():
    return AresReranker(FunctionBackbone(quality), AresConfig(mode="exact"), prompt_split="lines")


@pytest.fixture(scope="module")
def simulated():
    task = claimtrees_simulation(16, p_range=(0.1, 0.4))
    reranker = AresReranker(ClaimTreesOracle(), prompt_split="lines", answer_fn=task.answer_fn)
    return task, reranker, step_generator(task.policy)


def tau(text: str) -> float:
    return float(text.split("q=")[1])


# -- early rejection ----------------------------------------------------------------------------------------------
def test_early_rejection_stops_exactly_the_candidates_whose_step_falls_to_the_threshold(simulated):
    task, reranker, generator = simulated
    prompts = [p.prompt for p in task.problems]
    plain = stepwise_best_of_n(generator, prompts, reranker, 8, rejection="none")
    hard = stepwise_best_of_n(generator, prompts, reranker, 8, rejection="hard")
    matcher, stopped_any = answer_matcher(task.answer_fn), 0
    for full, cut, problem in zip(plain, hard, task.problems):
        assert full.method == "best-of-n" and cut.method == "early-rejection" and not any(full.stopped)
        for i, scores in enumerate(full.step_scores):
            first = next((k for k, s in enumerate(scores) if s <= 0.5), None)
            # the same sample (keyed by candidate), cut right after its first flagged step, or not at all
            assert cut.stopped[i] == (first is not None)
            assert cut.steps[i] == (full.steps[i] if first is None else full.steps[i][: first + 1])
            assert cut.step_scores[i] == scores[: len(cut.steps[i])]
            if matcher.parse(full.completions[i]) == problem.answer:
                assert not cut.stopped[i]  # under the oracle a sound candidate is never stopped
        stopped_any += sum(cut.stopped)
        assert cut.stats.stopped == sum(cut.stopped)
        assert cut.stats.steps == sum(len(s) for s in cut.steps) and full.stats.steps == sum(map(len, full.steps))
        assert cut.stats.tokens == sum(len(s) for steps in cut.steps for s in steps)  # a policy's cost: characters
        assert cut.stats.tokens <= full.stats.tokens and cut.stats.evaluations <= full.stats.evaluations
        right = matcher.parse(full.best) == problem.answer
        assert right == (matcher.parse(cut.best) == problem.answer)  # the same accuracy, fewer tokens
    assert stopped_any > 5


def test_soft_rejection_keeps_the_best_few(simulated):
    task, reranker, generator = simulated
    prompts = [p.prompt for p in task.problems]
    hard = stepwise_best_of_n(generator, prompts, reranker, 4, rejection="hard")
    soft = stepwise_best_of_n(generator, prompts, reranker, 4, rejection="soft", keep=2)
    assert any(all(r.stopped) for r in hard)  # hard rejection can stop every candidate of a problem
    for h, s in zip(hard, soft):
        assert sum(not x for x in s.stopped) >= 2
        assert sum(s.stopped) == max(0, min(sum(h.stopped), 4 - 2)) or sum(s.stopped) <= sum(h.stopped)
    with pytest.raises(ValueError, match=r"rejection='maybe'\) must be one of"):
        stepwise_best_of_n(generator, prompts, reranker, 4, rejection="maybe")
    with pytest.raises(ValueError, match=r"threshold=2\) must be a number in \[0, 1\]"):
        stepwise_best_of_n(generator, prompts, reranker, 4, threshold=2)


# -- beam search / DVTS -------------------------------------------------------------------------------------------
def test_beam_search_keeps_the_best_beams_by_ares_score(quality_reranker):
    policy = LoggingPolicy(length=4)
    (result,) = beam_search(PolicyStepGenerator(policy), ["a prompt"], quality_reranker, 8, beam_width=4)
    for depth in range(1, 4):
        generated = [prefix + (text,) for prefix, text in policy.log if len(prefix) == depth - 1]
        continued = {prefix for prefix, _ in policy.log if len(prefix) == depth}
        assert len(generated) == 8 and len(continued) == 2  # n partial solutions, n // m beams kept
        best = sorted(generated, key=lambda steps: -tau(steps[-1]))[:2]
        assert continued == set(best)
    assert len(result.completions) == 8 and all(result.finished) and all(len(s) == 4 for s in result.steps)
    assert result.step_scores == [pytest.approx([tau(s) for s in steps]) for steps in result.steps]  # tau = quality
    assert result.best_score == max(result.scores) and result.stats.steps == len(policy.log) == 32


def test_beam_search_filter_duplicates_and_sort_completed(quality_reranker):
    def continued(filter_duplicates):
        seen, first_steps = [], iter("AAAB")

        def policy(prompt, steps, rng):
            seen.append(tuple(steps))
            if not steps:
                letter = next(first_steps)
                return f"{letter} q={0.9 if letter == 'A' else 0.5}"
            return GeneratedStep(f"end q={rng.random():.2f}", 5, True)

        beam_search(PolicyStepGenerator(policy), ["p"], quality_reranker, 4, beam_width=2,
                    filter_duplicates=filter_duplicates)
        return {s for s in seen if s}

    assert continued(False) == {("A q=0.9",)}  # the two kept beams are both "A"
    assert continued(True) == {("A q=0.9",), ("B q=0.5",)}  # one "A", then the next best distinct beam
    policy_ = LoggingPolicy(length=3)
    (plain,) = beam_search(PolicyStepGenerator(policy_), ["p"], quality_reranker, 4, beam_width=2)
    (ranked,) = beam_search(PolicyStepGenerator(policy_), ["p"], quality_reranker, 4, beam_width=2,
                            sort_completed=True)
    assert ranked.scores == sorted(ranked.scores, reverse=True) and ranked.best_score == plain.best_score


def test_dvts_splits_into_independent_subtrees_each_greedy_on_ares(quality_reranker):
    policy = LoggingPolicy(length=3)
    (result,) = dvts(PolicyStepGenerator(policy), ["p"], quality_reranker, 8, beam_width=4)
    assert len(result.completions) == 8  # 2 subtrees x their last 4 expansions
    for t, tree in enumerate((result.steps[:4], result.steps[4:])):
        assert len({tuple(s[:-1]) for s in tree}) == 1  # one subtree's expansions share its path
        path = tree[0][:-1]
        for depth in range(len(path)):  # every step of the path was the best of its subtree's 4 candidates
            siblings = [text for prefix, text in policy.log if prefix == tuple(path[:depth])]
            siblings = siblings[4 * t : 4 * t + 4] if depth == 0 else siblings  # both trees start from the prompt
            assert len(siblings) == 4 and path[depth] == max(siblings, key=tau)
    assert result.steps[0][0] != result.steps[4][0]  # the subtrees sample independently
    with pytest.raises(ValueError, match="n must be a multiple of beam_width"):
        dvts(PolicyStepGenerator(policy), ["p"], quality_reranker, 6, beam_width=4)


def test_lookahead_rolls_out_on_a_fork_and_counts_its_steps(quality_reranker):
    policy = LoggingPolicy(length=3)
    (result,) = beam_search(PolicyStepGenerator(policy), ["p"], quality_reranker, 4, beam_width=2, lookahead=1)
    rollout = [entry for entry in policy.log if len(entry[0]) >= 1 and entry[0] not in
               {tuple(s[:k]) for s in result.steps for k in range(len(s))}]
    assert result.stats.steps == len(policy.log) > 4 * 3 - len(rollout)  # rollouts are generated and counted
    assert all(len(s) == 3 for s in result.steps)  # ... but not kept


def test_counters_split_backbone_evaluations_by_problem():
    seen = set()

    def recording(premises, hypotheses):
        seen.update((tuple(p), h) for p, h in zip(premises, hypotheses))
        return quality(premises, hypotheses)

    reranker = AresReranker(FunctionBackbone(recording), prompt_split="lines")
    results = beam_search(PolicyStepGenerator(LoggingPolicy(3)), ["p", "q\nr"], reranker, 4, beam_width=2)
    assert sum(r.stats.evaluations for r in results) == len(seen) > 0
    assert all(r.stats.seconds >= 0 and r.stats.tokens > 0 for r in results)


def test_the_search_refuses_what_it_cannot_do(quality_reranker):
    generator = PolicyStepGenerator(LoggingPolicy())
    with pytest.raises(ValueError, match=r"beam_width \(expansions per beam\) must be at most n"):
        beam_search(generator, ["p"], quality_reranker, 2, beam_width=4)
    with pytest.raises(TypeError, match="must be an AresReranker with method='ares'"):
        beam_search(generator, ["p"], AresReranker(FunctionBackbone(quality), method="entail-prev"), 4)
    with pytest.raises(TypeError, match="must be a StepGenerator"):
        beam_search(LoggingPolicy(), ["p"], quality_reranker, 4)
    with pytest.raises(ValueError, match="not a regex"):
        step_generator(LoggingPolicy(), separator="re:\n+")
    with pytest.raises(TypeError, match="step policy returned int"):
        stepwise_best_of_n(step_generator(lambda p, s, r: 3), ["p"], quality_reranker, 2)
    with pytest.raises(ValueError, match="no path of problem"):
        task = claimtrees_simulation(1)
        SimulatedPolicy(task.problems)(task.problems[0].prompt, ["not a step"], None)


def test_evaluate_search_on_the_simulated_generator(simulated):
    task, _, _ = simulated
    results = evaluate_search(task, ClaimTreesOracle(), max_n=4, backbone_name="claimtrees-oracle")
    rows = results["rows"]
    assert results["n_values"] == [1, 2, 4]
    for n in ("1", "2", "4"):
        plain, cut = rows["ARES best-of-N | best"][n], rows["ARES best-of-N, early rejection | best"][n]
        assert plain == cut  # the oracle stops only wrong samples: the same accuracy ...
        assert results["savings"][n]["tokens_saved"] > 0.1  # ... for fewer tokens
        assert plain[0] <= rows["pass@N"][n][0]
    assert rows["ARES beam search | best"]["4"][0] > rows["majority"]["4"][0]
    text = search_markdown(results)
    assert "| ARES DVTS | best |" in text and "tokens saved" in text


# -- a real causal LM through transformers ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lm(tiny_causal_lm_path):
    return AutoModelForCausalLM.from_pretrained(tiny_causal_lm_path).eval(), AutoTokenizer.from_pretrained(
        tiny_causal_lm_path)


def overlap(premises, hypotheses):
    return [0.05 + 0.9 * sum(c in set("".join(p)) for c in h) / max(len(h), 1) for p, h in zip(premises, hypotheses)]


def test_transformers_generation_stops_each_row_at_the_separator(lm):
    model, tokenizer = lm
    generator = step_generator(model, tokenizer, separator=" ", max_step_tokens=6, batch_size=2)
    assert isinstance(generator, TransformersStepGenerator)
    contexts = generator.render(["I have AB. Rule: AB -> CD", "Let x = 3."])
    out = generator.next_steps(contexts, [[], ["so"]], 3, ["a", "b"])
    assert [len(steps) for steps in out] == [3, 3]
    for steps in out:
        for step in steps:
            assert " " not in step.text and 1 <= step.tokens <= 6
            if not step.finished:  # stopped by the separator, which is cut off
                assert step.text and step.tokens < 6 or step.tokens == 6
    greedy = generator.next_steps(contexts[:1], [[]], 1, ["a"], greedy=True)
    assert greedy == generator.next_steps(contexts[:1], [[]], 1, ["b"], greedy=True)  # greedy: deterministic
    with pytest.raises(ValueError, match="greedy rollout has one continuation"):
        generator.next_steps(contexts, [[], []], 2, ["a", "b"], greedy=True)
    assert tokenizer.padding_side == "right"


def test_a_real_search_run_with_the_tiny_qwen2(lm):
    model, tokenizer = lm
    reranker = AresReranker(FunctionBackbone(overlap), step_separator=" ")
    generator = step_generator(model, tokenizer, separator=" ", max_step_tokens=5, batch_size=4)
    prompts = ["I have AB. Rule: AB -> CD", "Let x = 3."]
    results = beam_search(generator, prompts, reranker, 4, beam_width=2, num_iterations=3, seed=0)
    again = beam_search(generator, prompts, reranker, 4, beam_width=2, num_iterations=3, seed=0)
    assert [r.completions for r in again] == [r.completions for r in results]  # seeded: reproducible
    for result in results:
        assert 1 <= len(result.completions) <= 4 and all(len(s) <= 3 for s in result.steps)
        assert all(" " not in step for steps in result.steps for step in steps)
        assert result.stats.tokens >= result.stats.steps and result.stats.evaluations >= 1
        assert result.best == " ".join(result.steps[result.best_index])
    rejected = stepwise_best_of_n(generator, prompts, reranker, 3, num_iterations=3, threshold=0.99)
    for result in rejected:  # every step of this model scores below 0.99: each candidate stops at its first
        assert all(len(s) <= 1 for s in result.steps)
        assert result.stats.stopped == sum(result.stopped) == sum(1 for s in result.steps if s)


# -- vLLM: a stand-in with vLLM's LLM.generate(prompts, [SamplingParams]) and CompletionOutput fields ------------------
@dataclass
class LLM:
    """Continues a text with its next scripted steps: ``script[text]``, ``(text, finish_reason, stop_reason)``."""

    script: dict[str, list[tuple[str, str, str | None]]]
    calls: list = field(default_factory=list)
    served: dict = field(default_factory=dict)

    def get_tokenizer(self):
        raise AssertionError("string prompts need no tokenizer")

    def chat(self, *args, **kwargs):
        raise AssertionError("the search continues rendered text with generate")

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True):
        self.calls.append((list(prompts), sampling_params))
        outputs = []
        for prompt, params in zip(prompts, sampling_params):
            start = self.served.get(prompt, 0)  # each request takes the prompt's next scripted continuations
            self.served[prompt] = start + params.n
            scripted = self.script[prompt][start : start + params.n]
            samples = [types.SimpleNamespace(text=t, token_ids=list(range(len(t.split()) + 1)), finish_reason=f,
                                             stop_reason=s) for t, f, s in scripted]
            outputs.append(types.SimpleNamespace(outputs=samples))
        return outputs


LLM.__module__ = "vllm.entrypoints.llm"


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def test_vllm_steps_stop_at_the_separator_and_read_why_they_ended(fake_vllm):
    sep = "\n\n"
    llm = LLM({"Q: ": [("a q=0.9", "stop", sep), ("b q=0.2", "stop", sep)],
               "Q: a q=0.9" + sep: [("done q=0.8", "stop", None), ("more q=0.7 and", "length", None)],
               "Q: b q=0.2" + sep: [("x q=0.1", "stop", None), ("y q=0.3", "stop", None)]})
    generator = step_generator(llm, separator=sep, max_step_tokens=32, temperature=0.7)
    assert isinstance(generator, VLLMStepGenerator)
    reranker = AresReranker(FunctionBackbone(quality), prompt_split="lines")
    (result,) = beam_search(generator, ["Q: "], reranker, 2, beam_width=2, num_iterations=4, seed=3)
    first, second = llm.calls
    assert first[0] == ["Q: ", "Q: "]  # n = 2 partial solutions from the prompt, one continuation each
    assert all(p.stop == [sep] and p.n == 1 and p.max_tokens == 32 and p.temperature == 0.7 for p in first[1])
    assert first[1][0].seed != first[1][1].seed  # identical contexts, seeded apart
    assert second[0] == ["Q: a q=0.9" + sep] * 2  # the best beam (n // m = 1) expanded to n
    assert result.steps == [["a q=0.9", "done q=0.8"], ["a q=0.9", "more q=0.7 and"]]
    assert result.finished == [True, True] and result.best_index == 0  # EOS and the length limit end a solution
    assert result.stats.tokens == 3 + 3 + 3 + 4  # token_ids of each continuation
