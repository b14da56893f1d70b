"""Generative verifiers against their authors' published code, on offline mirrors (tests/verifier_mirrors.py).

Each family's reference below is re-written from its published code (GenPRM's ``genprm_inference.py`` and demo,
ThinkPRM's ``thinkprm_api.py`` / ``helper.py`` with sglang's ``RuntimeEndpoint.select``, R-PRM's ``inference.py``
and ``evaluate-PRM-CoT.py``), independent of the project's renderers: it builds its own prompts and reads its own
verdicts with its own forward passes of the mirror model. With the sampler seeded, the project's verifier samples
through a recording engine; the reference then replays the same generated text (and token ids) and must ask for the
same prompts and read the same verdicts (texts equal, probabilities within 1e-6). Scripted generations reach the
parsers' other branches (a verdict found or not, the marker present or not).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from ares_rerank import AresConfig, Chain, load_backbone
from ares_rerank.backbones.base import is_sampled
from ares_rerank.backbones.generative import Generation, GenerativeVerifier, LocalEngine, Sampling, cut_at_stop
from ares_rerank.backbones.loading import GENERATIVE_FAMILIES, prm_family
from ares_rerank.estimator import ares_scores
from verifier_mirrors import genprm_mirror, rprm_mirror, thinkprm_mirror


QUESTION = ["Janet's ducks lay 16 eggs per day.", "She eats three for breakfast. How many are left?"]
STEPS = ["Step 1: 16 - 3 = 13 eggs left.", "Step 2: 13 * 2 = 26.", "The answer is 26."]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only contend (the machine is shared)
    yield
    torch.set_num_threads(threads)


class Recording:
    """Wraps an engine: every generate call (prompt, n, sampling, generations) and logprob query, in order; with
    ``script``, generate returns the scripted texts instead of sampling (ids: the text's tokens)."""

    def __init__(self, inner, script=None):
        self.inner, self.tokenizer, self.script = inner, inner.tokenizer, list(script or [])
        self.generated, self.queries = [], []

    @property
    def calls(self):
        return self.inner.calls

    def encode(self, text):
        return self.inner.encode(text)

    def generate(self, prompt, n, sampling):
        if self.script:
            texts = [self.script.pop(0) for _ in range(n)]
            gens = [Generation(t, self.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
        else:
            gens = self.inner.generate(prompt, n, sampling)
        self.generated.append((prompt, n, sampling, gens))
        return gens

    def logprobs(self, queries, top=20):
        self.queries += list(queries)
        return self.inner.logprobs(queries, top)


def logsoftmax_rows(model, ids):
    """Per position i of ``ids``, the log-softmax of the logits there (the next token's distribution)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory):
    root = tmp_path_factory.mktemp("verifiers")
    return {"prm-genprm": genprm_mirror(root / "genprm"), "prm-thinkprm": thinkprm_mirror(root / "thinkprm"),
            "prm-rprm": rprm_mirror(root / "rprm")}


def verifier(mirrors, kind, script=None, **kwargs):
    v = load_backbone(mirrors[kind], kind=kind, seed=3, device="cpu", **kwargs)
    v.engine = Recording(v.engine, script)
    return v


# -- GenPRM -----------------------------------------------------------------------------------------------------------
GENPRM_SYSTEM = "You are a math teacher. Your task is to review and critique the paragraphs in solution step by step."


def ref_genprm_prompt(tokenizer, question, steps):
    """The demo's messages (earlier critiques empty) and ``build_prompt``."""
    messages = [{"content": GENPRM_SYSTEM, "role": "system"},
                {"role": "user", "content": "Question: " + question + "\n\n" + steps[0]}]
    for step in steps[1:]:
        messages += [{"role": "assistant", "content": ""}, {"role": "user", "content": step}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    if prompt.endswith(f"{tokenizer.eos_token}\n"):
        prompt = prompt[:-len(f"{tokenizer.eos_token}\n")]
    elif prompt.endswith(tokenizer.eos_token):
        prompt = prompt[:-len(tokenizer.eos_token)]
    return prompt


def ref_genprm_reward(tokenizer, text, tokens, logprobs):
    """``GenPRM.get_reward_score``; ``logprobs[i]``: {token id: logprob} of generated position i (top 20 and the
    sampled token, as vLLM returns them)."""
    boxed_match = re.search(r'(Yes|No)\}', text, re.IGNORECASE)
    yes_token = tokenizer.encode('Yes')[-1]
    no_token = tokenizer.encode('No')[-1]
    if not boxed_match:
        return 0.5
    decision = boxed_match.group(1).capitalize()
    own, other = (yes_token, no_token) if decision == "Yes" else (no_token, yes_token)
    index = len(tokens) - 1 - tokens[::-1].index(own)
    own_prob = math.exp(logprobs[index][own])
    try:
        other_prob = math.exp(logprobs[index][other])
    except KeyError:
        other_prob = math.exp(min(v for k, v in logprobs[index].items()))
    yes_prob, no_prob = (own_prob, other_prob) if decision == "Yes" else (other_prob, own_prob)
    return 0.5 if yes_prob + no_prob == 0 else yes_prob / (yes_prob + no_prob)


def vllm_logprobs(model, prompt_ids, generated):
    """What vLLM returns with ``logprobs=20`` for generated ids: per position the top 20 and the sampled token."""
    rows = logsoftmax_rows(model, prompt_ids + generated)
    out = []
    for i, token in enumerate(generated):
        row = rows[len(prompt_ids) + i - 1]
        values, index = torch.topk(row, 20)
        table = dict(zip(index.tolist(), values.tolist()))
        table[token] = float(row[token])
        out.append(table)
    return out


def replay_genprm(v, question, steps, n, max_tokens, time_limit=3):
    """The published ``inference`` (analyze, verify=False, execute=False) on the recorded generations: asserts it asks
    the recorded prompts with the recorded budgets, and returns the rewards and decisions it reads."""
    tok, model, calls = v.tokenizer, v.engine.inner.model, list(v.engine.generated)
    prompt = ref_genprm_prompt(tok, question, steps)
    analyze_start = f"<analyze>\nLet's analyze the Paragraph {len(steps)} step by step: "
    output_start = "<output>\n**Judgement**: $\\boxed"
    asked, _, sampling, firsts = calls.pop(0)
    assert asked == prompt + analyze_start and sampling.stop == ("</analyze>\n",) and sampling.include_stop
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_tokens) == (0.6, 0.95, 20, max_tokens)
    rewards, decisions = [], []
    for first in firsts:
        cur, cur_time = analyze_start + first.text + output_start, 0
        while True:
            left = max_tokens - len(tok.tokenize(cur))
            last = not (left > 0 and cur_time < time_limit)
            if last:
                cur, left = analyze_start + first.text.split('</analyze>')[0] + '</analyze>\n' + output_start, 20
            asked, _, sampling, (out,) = calls.pop(0)
            assert asked == prompt + cur and sampling.max_tokens == left and sampling.stop == ("</output>\n",)
            cur_time += 1
            if out.text.endswith('</output>\n') or last:
                break
            cur = cur + out.text + '[Code Output]\n\n```\n'
        text = cur + out.text
        ids = tok.encode(prompt + cur)
        match = re.search(r'(Yes|No)\}', text, re.IGNORECASE)
        decisions.append(match.group(1).capitalize() if match else "")
        try:
            rewards.append(ref_genprm_reward(tok, text, out.token_ids, vllm_logprobs(model, ids, out.token_ids)))
        except ValueError:  # the published code raises (the decision's token was not generated): ours says 0.5
            rewards.append(0.5)
    assert not calls
    return rewards, decisions


def test_genprm_samples_and_reads_as_its_published_code(mirrors):
    v = verifier(mirrors, "prm-genprm", max_tokens=40)
    verdicts = v.verify(QUESTION, STEPS, n=4)
    rewards, decisions = replay_genprm(v, "\n".join(QUESTION), STEPS, 4, 40)
    assert [x.verdict_text for x in verdicts] == decisions
    assert [x.prob for x in verdicts] == pytest.approx(rewards, abs=1e-6)
    assert any(d for d in decisions)  # the steered mirror writes verdicts: the read path ran
    assert all(x.generated_tokens > 0 for x in verdicts)


@pytest.mark.parametrize("script", [
    ["the step is fine</analyze>\n", "Yes}$\n</output>\n"],  # a Yes verdict, ended as published
    ["wrong</analyze>\n", "no}$\n</output>\n"],  # lower case: capitalized, its token not generated: 0.5
    ["hmm</analyze>\n", "maybe", "still", "none", "No}$"],  # never ends: continued, then the fallback
])
def test_genprm_branches_match_the_reference_on_scripted_text(mirrors, script):
    v = verifier(mirrors, "prm-genprm", script=script, max_tokens=60)
    tok = v.tokenizer
    (verdict,) = v.verify(QUESTION[:1], STEPS[:2], n=1)
    calls = v.engine.generated
    prompt = ref_genprm_prompt(tok, QUESTION[0], STEPS[:2])
    assert calls[0][0] == prompt + "<analyze>\nLet's analyze the Paragraph 2 step by step: "
    out = calls[-1][3][0]
    text = verdict.rationale
    assert text.endswith(out.text)
    match = re.search(r'(Yes|No)\}', text, re.IGNORECASE)
    decision = match.group(1).capitalize() if match else ""
    assert verdict.verdict_text == decision
    own = tok.encode(decision)[-1] if decision else None
    if own is None or own not in out.token_ids:
        assert verdict.prob == 0.5  # no verdict (published), or the published code would raise: neutral
    else:
        ids = tok.encode(calls[-1][0])
        expected = ref_genprm_reward(tok, text, out.token_ids, vllm_logprobs(v.engine.inner.model, ids, out.token_ids))
        assert verdict.prob == pytest.approx(expected, abs=1e-6)
    if len(script) > 2:  # the continuation and the fallback were asked as published
        assert "[Code Output]\n\n```\n" in calls[2][0] and calls[-1][2].max_tokens == 20


def test_genprm_refuses_to_run_model_code(mirrors):
    with pytest.raises(ValueError, match="never runs model-written"):
        load_backbone(mirrors["prm-genprm"], kind="prm-genprm", execute=True)


# -- ThinkPRM ---------------------------------------------------------------------------------------------------------
def ref_thinkprm_prompt(tokenizer, problem, prefix_steps):
    """``process_example`` (process_verifier=True) and ``format_verification_cot_for_thinkprm`` (inference)."""
    if len(prefix_steps) == 0:
        prefix_steps = [""]
    new_prefix_steps = []
    for i, step in enumerate(prefix_steps):
        step = re.sub(r'Step \d+:', '', step).strip()
        new_prefix_steps.append("Step {i}: ".format(i=i + 1) + step)
    solution = '\n'.join(new_prefix_steps)
    _instruction = ("Review and critique each step in the proposed solution to determine whether each step is "
                    "correct. If the solution is incomplete, only verify the provided steps.")
    instruction_template = """You are given a math problem and a proposed step-by-step solution:

[Math Problem]

{problem}

[Solution]

{solution}

{_instruction}
""".strip()
    content = (instruction_template.replace('{problem}', problem).replace('{solution}', solution)
               .replace('{_instruction}', _instruction))
    return tokenizer.apply_chat_template([{'role': "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True) + "\nLet's verify step by step:"


def ref_thinkprm_stops(tokenizer, prompt):
    stop_patterns = ["Is the solution correct?", tokenizer.eos_token, "</think>"]
    step_matches = re.findall(r'Step (\d+):', prompt)
    max_step = int(max(step_matches)) if step_matches else 1
    stop_patterns.append(f"Step {max_step + 1}:")
    return stop_patterns


def ref_sglang_select(tokenizer, model, text, choices, decision_temperature=1.0, score_label_idx=0):
    """sglang's ``RuntimeEndpoint.select`` (its server's input logprobs from ``logprob_start_len``, the first of
    them without a value) and ThinkPRM's softmax over the normalized logprobs."""
    prompt_len = len(tokenizer.encode(text))
    logprob_start_len = max(prompt_len - 2, 0)
    normalized = []
    for c in choices:
        ids = tokenizer.encode(text + c)
        rows = logsoftmax_rows(model, ids)
        entries = [(None if j == logprob_start_len else float(rows[j - 1, ids[j]]), ids[j],
                    tokenizer.decode([ids[j]])) for j in range(logprob_start_len, len(ids))]
        values = [x[0] for x in entries if x[0]]
        value = sum(values) / len(values)
        if text.endswith(entries[0][-1]):
            raise AssertionError("sglang's healing branch (subtracting a None logprob) would raise here")
        normalized.append(value)
    scores = np.exp(np.array(normalized) / decision_temperature)
    scores /= np.sum(scores)
    return float(scores[score_label_idx]), choices[int(np.argmax(normalized))]


def test_thinkprm_samples_and_reads_as_its_published_code(mirrors):
    v = verifier(mirrors, "prm-thinkprm", max_length=60)
    verdicts = v.verify(QUESTION, STEPS, n=3)
    tok, model = v.tokenizer, v.engine.inner.model
    ((asked, n, sampling, gens),) = v.engine.generated
    prompt = ref_thinkprm_prompt(tok, "\n".join(QUESTION), STEPS)
    assert asked == prompt and n == 3
    assert list(sampling.stop) == ref_thinkprm_stops(tok, prompt) and not sampling.include_stop
    assert (sampling.temperature, sampling.max_tokens, sampling.top_p, sampling.top_k) == (0.7, 40, 1.0, 0)
    for verdict, gen in zip(verdicts, gens):
        text = prompt + gen.text + "\nIs the solution correct? "
        expected, chosen = ref_sglang_select(tok, model, text, ["yes", "no"])
        assert verdict.rationale == gen.text + "\nIs the solution correct? "
        assert verdict.prob == pytest.approx(expected, abs=1e-6) and verdict.verdict_text == chosen


def test_thinkprm_stop_number_is_compared_as_text_as_published(mirrors):
    v = verifier(mirrors, "prm-thinkprm")
    steps = [f"s{i}" for i in range(10)]  # "Step 10:" is the largest number, "Step 9:" the largest string
    prompt = v.render(["q"], steps)
    assert v.stops(prompt)[-1] == ref_thinkprm_stops(v.tokenizer, prompt)[-1] == "Step 10:"


# -- R-PRM ------------------------------------------------------------------------------------------------------------
RPRM_FILE = (  # src/prompts/GenPRM/GenPRM-evaluate-new3-qwen.txt, as published (its last line: literal backslash-n)
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nYou are an excellent math teacher. "
    "Please verify the correctness of the Now Step.\n\nYou first need to analyze the Now Step and the Previous Steps "
    "and then summarize based on your analysis.\nAnalysis:\nYou need to analyze the following aspects.\n"
    "**Previous Steps Analysis**: You need to analyze the Previous Steps step by step. For each step, you need to "
    "first explain what the current step is doing, then you try to find any error in the current step.\n"
    "**Now Step Analysis**: You first need to explain what the Now Step is doing, and then point out which part of "
    "the Question it is trying to solve or which part of the information it states.\n**Data Source Analysis**: First "
    "you need to find out what data are used in the Now Step, and then you need to determine whether the source of "
    "the data is reasonable and correct. When you judge whether the source of a data is reasonable and correct, you "
    "need to specify the specific source of this data: such as which part of the question, or which content of the "
    "previous step; and then determine the source and current use is consistent, the Now Step is used correctly.\n"
    "**Consistency Analysis**: You need to check that the Now Step is consistent with the contents of the Previous "
    "Steps, and then you need to check that all the information inside the Now Step is consistent.\n**Calculation "
    "Analysis**: If the Now Step involves any calculations, such as addition, subtraction, multiplication, "
    "division, equations, modulo operations, etc., you will first need to perform a check on the calculation, such "
    "as a reverse operation, to see if the calculation was done correctly, and then analyze the results of your "
    "check to see if there was an error in the calculation.\nConclusion: \nPlease verify the correctness of the Now "
    "Step based on your analysis, if there is any error in the Now Step then the Now Step is wrong and vice versa "
    "the Now Step is correct. At the end of the Conclusion, when you give your final answer, write it in the form "
    "\"Verification: Is the step correct (Yes/No)? X\", where X is either Yes or No.\n\nQuestion: {}\n"
    "Previous Steps: {}\nNow Step: {}\nPlease carefully analyze the correctness of the Now Step.\n"
    "Reply: <|im_end|>\\n<|im_start|>assistant\\n"
)


def ref_split_text(text):
    text = text.split("\n")
    text = [item.split("\\n") for item in text]
    text = [item.strip() for sublist in text for item in sublist]
    return "\n".join(text)


def ref_rprm_reward(tokenizer, model, question, previous_steps, now_step, raw):
    """``inference.py``'s post-processing of a sampled analysis, then ``evaluate-PRM-CoT.py``'s read of it."""
    response = ref_split_text(raw.strip().strip("\\").strip("\\n").strip())
    previous_step = "\n".join(previous_steps) if len(previous_steps) > 0 else (
        "Since the Now Step is the first step, there are no Previous Steps.")
    if "Is the step correct (Yes/No)?" in response:
        response = response.split("Is the step correct (Yes/No)?")[0] + "Is the step correct (Yes/No)?"
    else:
        response = response + "\nBased on your analysis. Is the answer correct (Yes/No)?"
    formatted_prompt = RPRM_FILE.format(question, previous_step, now_step) + response
    input_ids = tokenizer.encode(formatted_prompt)
    with torch.no_grad():
        logits = model(torch.tensor([input_ids])).logits
    last_token_logits = logits[0, -1, :]
    yes_token_id = tokenizer.encode(" Yes", add_special_tokens=False)[0]
    no_token_id = tokenizer.encode(" No", add_special_tokens=False)[0]
    probabilities = torch.softmax(last_token_logits[[yes_token_id, no_token_id]].float(), dim=-1).tolist()
    return probabilities[0], response


@pytest.mark.parametrize("script", [None, ["\\nThe step is right.\nVerification: Is the step correct (Yes/No)? Yes",
                                           "  n  no marker here  \\"]])
def test_rprm_samples_and_reads_as_its_published_code(mirrors, script):
    v = verifier(mirrors, "prm-rprm", script=script, max_tokens=24)
    verdicts = v.verify(QUESTION, STEPS, n=2)
    ((asked, n, sampling, gens),) = v.engine.generated
    question = "\n".join(QUESTION)
    expected_prompt = RPRM_FILE.format(question, "\n".join(STEPS[:-1]), STEPS[-1])
    expected_prompt = expected_prompt.replace("left-brackets", "{").replace("right-brackets", "}")
    assert asked == expected_prompt and n == 2
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens, sampling.stop) == (0.95, 1.0, 24, ())
    for verdict, gen in zip(verdicts, gens):
        prob, response = ref_rprm_reward(v.tokenizer, v.engine.inner.model, question, STEPS[:-1], STEPS[-1],
                                         gen.text)
        assert verdict.rationale == response and verdict.prob == pytest.approx(prob, abs=1e-6)
    if script:
        assert [x.verdict_text for x in verdicts] == ["Yes", ""]


def test_rprm_first_step_says_there_are_no_previous_steps(mirrors):
    v = verifier(mirrors, "prm-rprm")
    assert "Previous Steps: Since the Now Step is the first step, there are no Previous Steps.\nNow Step: s" in (
        v.render(["q"], ["s"]))


# -- the sampled-backbone protocol, on every family ----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["prm-genprm", "prm-thinkprm", "prm-rprm"])
def test_families_are_sampled_backbones_picked_from_their_hub_ids(mirrors, kind):
    v = verifier(mirrors, kind, **({"max_tokens": 16} if kind != "prm-thinkprm" else {"max_length": 36}))
    assert is_sampled(v) and kind in GENERATIVE_FAMILIES
    for hub_id in type(v).hub_ids:
        assert prm_family(hub_id) == kind and prm_family(hub_id.upper()) == kind
    # premise subsets: the included base claims are the question, the included steps the previous steps
    verdicts = v.sample_verdicts([[QUESTION[0], STEPS[0]], [QUESTION[0], QUESTION[1]]], [STEPS[1], STEPS[1]], [2, 3],
                                 num_base=[1, 2])
    assert [len(p) for p in verdicts.probs] == [2, 3]
    assert all(0.0 <= x <= 1.0 for p in verdicts.probs for x in p)
    assert all(t > 0 for t in verdicts.generated_tokens) and verdicts.requests[0] >= 2
    prompts = [call[0] for call in v.engine.generated]
    assert any(STEPS[0] in p for p in prompts[:1]) and QUESTION[1] not in prompts[0]
    assert any(QUESTION[1] in p and STEPS[0] not in p for p in prompts[1:])


def test_ares_scores_a_generative_verifier_in_sample_mode_with_its_costs(mirrors):
    engine = load_backbone(mirrors["prm-rprm"], kind="prm-rprm", seed=2, device="cpu").engine
    v = GenerativeVerifier(engine, prompt="{question} | {previous_steps} | {step}", use_chat_template=False,
                           sampling=Sampling(temperature=1.0, max_tokens=4))
    v.engine = Recording(engine)
    chain = Chain(QUESTION[:1], STEPS[:2], id="c")
    (scores,) = ares_scores([chain], v, AresConfig(mode="sample", eps=0.3, delta=0.3))
    assert scores.stopping == "betting" and scores.verdicts == scores.num_samples * 2
    assert scores.generated_tokens == sum(len(g.token_ids) for call in v.engine.generated for g in call[3])
    assert scores.requests >= len(v.engine.generated) and all(0.0 <= s <= 1.0 for s in scores.step_scores)
    # one generate call per distinct input and wave, asking as many samples as trajectories reached it
    assert sum(call[1] for call in v.engine.generated) == scores.verdicts
    with pytest.raises(ValueError, match="mode='sample'"):
        ares_scores([chain], v, AresConfig())


# -- the configurable verifier -----------------------------------------------------------------------------------
def test_sampling_from_backbone_options_json_keeps_the_verifiers_defaults(mirrors):
    engine = load_backbone(mirrors["prm-rprm"], kind="prm-rprm", seed=1, device="cpu").engine
    v = GenerativeVerifier(engine, sampling={"max_tokens": 5, "stop": ["</s>"]}, use_chat_template=False)
    assert v.sampling == Sampling(max_tokens=5, stop=("</s>",))  # JSON's list becomes the tuple a Sampling holds
    assert GenerativeVerifier(engine, sampling={"temperature": 1.0}).sampling.max_tokens == 1024  # the default's
    with pytest.raises(ValueError, match=r"sampling= has the unknown field\(s\) \['max_token'\]"):
        GenerativeVerifier(engine, sampling={"max_token": 5})
    with pytest.raises(TypeError, match="sampling=8 must be a Sampling or a dict of its fields"):
        GenerativeVerifier(engine, sampling=8)
    with pytest.raises(ValueError, match=r"Sampling\(temperature=-1\)"):
        GenerativeVerifier(engine, sampling={"temperature": -1})


def test_the_command_line_scores_with_a_sampling_given_as_json(mirrors, tmp_path, capsys):
    import json

    from ares_rerank.cli import main

    chains = tmp_path / "chains.jsonl"
    chains.write_text(json.dumps({"id": "c", "base_claims": QUESTION[:1], "steps": STEPS[:2]}) + "\n")
    options = {"sampling": {"max_tokens": 3, "temperature": 1.0}, "use_chat_template": False,
               "prompt": "{question} | {previous_steps} | {step}"}
    out = tmp_path / "scores.jsonl"
    args = ["score", str(chains), "--backbone", str(mirrors["prm-rprm"]), "--kind", "generative", "--mode", "sample",
            "--eps", "0.3", "--delta", "0.3", "--output", str(out), "--backbone-options"]
    assert main(args + [json.dumps(options)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["verdicts"] > 0 and 0 < row["generated_tokens"] <= 3 * row["verdicts"]  # the budget given held
    capsys.readouterr()
    assert main(args + ['{"sampling": {"max_token": 3}}', "--overwrite"]) == 2
    assert "sampling= has the unknown field(s) ['max_token']" in capsys.readouterr().err


def test_configurable_verifier_with_your_prompt_and_verdict_parser(mirrors):
    engine = load_backbone(mirrors["prm-rprm"], kind="prm-rprm", seed=1, device="cpu").engine
    parsed = []

    def parser(rationale):
        parsed.append(rationale)
        return rationale.split("No")[0] + "\nVerdict:"

    v = GenerativeVerifier(engine, prompt="Q: {question}\nBefore: {previous_steps}\nCheck: {step}\n",
                           sampling=Sampling(temperature=1.0, max_tokens=8), verdict_parser=parser,
                           use_chat_template=False)
    v.engine = Recording(engine)
    verdicts = v.verify(["q"], ["a", "b"], n=2)
    ((asked, n, _, gens),) = v.engine.generated
    assert asked == "Q: q\nBefore: a\nCheck: b\n" and n == 2 and parsed == [g.text for g in gens]
    model, tok = engine.model, engine.tokenizer
    yes, no = tok.encode(" Yes", add_special_tokens=False)[0], tok.encode(" No", add_special_tokens=False)[0]
    for verdict, gen in zip(verdicts, gens):
        row = logsoftmax_rows(model, tok.encode(asked + gen.text.split("No")[0] + "\nVerdict:"))[-1]
        assert verdict.prob == pytest.approx(float(torch.softmax(row[[yes, no]], -1)[0]), abs=1e-6)
    with pytest.raises(ValueError, match="question"):
        GenerativeVerifier(engine, prompt="no fields")
    with pytest.raises(ValueError, match="one token"):
        GenerativeVerifier(engine, answers=(" Yes indeed", " No"))


def test_sampler_is_seeded_and_never_repeats_a_call():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from verifier_mirrors import qwen25_tokenizer

    tok = qwen25_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)).eval()
    sampling = Sampling(temperature=1.0, max_tokens=6)
    a, b = LocalEngine(model, tok, seed=5), LocalEngine(model, tok, seed=5)
    first = [g.token_ids for g in a.generate("Question", 3, sampling)]
    assert first == [g.token_ids for g in b.generate("Question", 3, sampling)]  # seeded: reproducible
    assert first != [g.token_ids for g in a.generate("Question", 3, sampling)]  # the next call draws anew
    assert cut_at_stop("a</b>\nc", ["</b>\n", "c"], True) == ("a</b>\n", True)
    assert cut_at_stop("abc", ["x"], False) == ("abc", False)


# -- several inputs at once: first stages batched, verdicts unchanged ----------------------------------------------
class Keyed:
    """An engine whose generations are a function of (prompt, sample index, stage): the same text whichever way the
    inputs are asked, so the batched path (``generate_many``) can be compared with one input at a time. Reads go to
    the mirror's own engine. ``many=False`` hides ``generate_many``."""

    def __init__(self, inner, many):
        self.inner, self.tokenizer, self.calls, self.batches, self.outputs = inner, inner.tokenizer, 0, [], []
        if many:
            self.generate_many = self._generate_many

    def encode(self, text):
        return self.inner.encode(text)

    def _texts(self, prompt, n, sampling):
        out = []
        for i in range(n):
            yes = (sum(map(ord, prompt)) + i) % 2 == 0
            if "</analyze>\n" in sampling.stop:  # GenPRM's analysis
                text = f"the step reads {'right' if yes else 'wrong'}</analyze>\n"
            elif "</output>\n" in sampling.stop:  # GenPRM's output
                text = ("Yes" if yes else "No") + "}$\n</output>\n"
            else:  # ThinkPRM's chain, R-PRM's analysis
                text = f"It checks out. Verification: Is the step correct (Yes/No)? {'Yes' if yes else 'No'}"
            out.append(Generation(text, self.tokenizer.encode(text, add_special_tokens=False)))
        return out

    def generate(self, prompt, n, sampling):
        self.calls += 1
        return self._texts(prompt, n, sampling)

    def _generate_many(self, requests, sampling, max_tokens=None):
        self.calls += 1
        if "</output>\n" in sampling.stop:  # GenPRM's output stage, each request with its own budget
            assert max_tokens is not None and len(max_tokens) == len(requests) and all(b > 0 for b in max_tokens)
            self.outputs.append(len(requests))
        else:
            self.batches.append((len(requests), sampling))
        return [self._texts(prompt, n, sampling) for prompt, n in requests]

    def logprobs(self, queries, top=20):
        return self.inner.logprobs(queries, top)


@pytest.mark.parametrize("kind", ["prm-genprm", "prm-thinkprm", "prm-rprm"])
def test_families_sample_several_inputs_together_with_the_same_verdicts(mirrors, kind):
    options = {"max_tokens": 40} if kind != "prm-thinkprm" else {"max_length": 60}
    premises = [[QUESTION[0]], [QUESTION[0], STEPS[0]], [QUESTION[0], QUESTION[1], STEPS[0]], [QUESTION[1]]]
    hypotheses = [STEPS[0], STEPS[1], STEPS[2], STEPS[1]]
    got = {}
    for many in (False, True):
        v = load_backbone(mirrors[kind], kind=kind, seed=3, device="cpu", **options)
        v.engine = Keyed(v.engine, many)
        got[many] = (v.sample_verdicts(premises, hypotheses, [2, 3, 2, 1], num_base=[1, 1, 2, 1]), v.engine)
    (alone, _), (together, engine) = got[False], got[True]
    batches = engine.batches
    for a, b in zip(alone.probs, together.probs):
        assert list(b) == pytest.approx(list(a), abs=1e-9)
    assert together.generated_tokens == alone.generated_tokens
    # one generate_many per distinct first-stage sampling (ThinkPRM's stops follow the step's number), holding all
    # four inputs between them; fewer requests than one call per input
    assert sum(size for size, _ in batches) == 4 and len(batches) == len({s for _, s in batches}) < 4
    # GenPRM's outputs (one round: every keyed output ends the loop) are asked together too, all 8 samples at once
    saved = 8 - 1 if kind == "prm-genprm" else 0
    assert engine.outputs == ([8] if kind == "prm-genprm" else [])
    assert sum(together.requests) == sum(alone.requests) - (4 - len(batches)) - saved
