"""``ares-rerank search``: step-level search from the shell with a tiny Qwen2 (built from a config, with a locally
trained tokenizer) generating through transformers, the vLLM path against a stand-in, resuming a stopped run, and
one clear error line for each bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from ares_rerank.cli import main
from helpers import SamplingParams


TESTS = Path(__file__).resolve().parent
PROMPTS = ["I have AB. Rule: AB -> CD", "Let x = 3.", "We have pepper. We have garlic.", "The quick brown fox"]


def overlap(premises, hypotheses):
    """A deterministic score in [0.05, 0.95]: the share of the step's characters found in its premises."""
    return [0.05 + 0.9 * sum(c in set("".join(p)) for c in h) / max(len(h), 1) for p, h in zip(premises, hypotheses)]


class Overlap:
    """The backbone of these runs (``--backbone test_cli_search:Overlap``); ``broken_on`` makes it fail on a prompt
    (a backbone that goes away in the middle of a run)."""

    broken_on: str | None = None

    def entailment_probs(self, premises, hypotheses):  # noqa: ANN001, ANN201 - the Backbone protocol
        if Overlap.broken_on and any(Overlap.broken_on in " ".join(p) for p in premises):
            raise RuntimeError("the backbone went away")
        return overlap(premises, hypotheses)


class Quality:
    """tau of a step = the number it ends with (``... q=0.8``), for the vLLM stand-in's scripted steps."""

    def entailment_probs(self, premises, hypotheses):  # noqa: ANN001, ANN201
        return [float(re.search(r"q=([0-9.]+)", h).group(1)) for h in hypotheses]


BACKBONE = ["--backbone", "test_cli_search:Overlap"]
TINY_RUN = ["--step-separator", " ", "--max-step-tokens", "5", "--num-iterations", "3", "--no-progress"]


@pytest.fixture
def problems(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p, "answer": "x"}) + "\n"
                            for i, p in enumerate(PROMPTS[:3])))
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_record(row: dict, n: int, separator: str = " ") -> None:
    """What every output line must hold, whatever the method."""
    assert row["answer"] == "x" and row["id"].startswith("p")  # the input fields are kept
    assert 1 <= len(row["completions"]) <= n
    assert [len(s) for s in row["step_scores"]] == [len(s) for s in row["steps"]]
    assert row["completions"] == [separator.join(s) for s in row["steps"]]
    assert all(separator not in step and step for steps in row["steps"] for step in steps)
    assert all(0.0 <= t <= 1.0 for s in row["step_scores"] for t in s)
    assert row["scores"] == [s[-1] if s else None for s in row["step_scores"]]  # --aggregate final
    best = row["best_index"]
    assert row["best"] == row["completions"][best] and row["best_score"] == row["scores"][best]
    stats = row["stats"]
    assert stats["steps"] >= sum(map(len, row["steps"])) and stats["tokens"] >= stats["steps"]
    assert stats["evaluations"] >= 1 and stats["seconds"] > 0


def test_search_runs_as_a_command_with_a_tiny_qwen2(tiny_causal_lm_path, problems, tmp_path):
    """The installed entry point end to end: the tiny Qwen2 writes the steps through transformers, ARES scores them
    as they come, beam search keeps the best, and each problem's line says what it cost."""
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent), str(TESTS.parents[1])]),
           "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "ares_rerank.cli", "search", str(tiny_causal_lm_path), "--problems", str(problems),
            "--approach", "beam-search", "--n", "4", "--beam-width", "2", "--output", str(out), *BACKBONE, *TINY_RUN]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = read(out)
    assert [r["prompt"] for r in rows] == PROMPTS[:3]
    assert sum(len(s) for r in rows for s in r["steps"]) >= 3  # the model wrote steps, and ARES scored them
    for row in rows:
        check_record(row, 4)
        assert row["method"] == "beam-search" and row["selection"] == "best"
        assert all(len(s) <= 3 for s in row["steps"])  # --num-iterations 3
        assert max(s for s in row["scores"] if s is not None) == row["best_score"]
    summary = [line for line in done.stderr.splitlines() if line.startswith("searched ")]
    assert summary == [summary[0]] and "searched 3 problems with method=beam-search, n=4" in summary[0]
    tokens = sum(r["stats"]["tokens"] for r in rows) / 3
    assert f"per problem {tokens:.0f} generated tokens" in summary[0]
    # the same command again: refused before any work, the results untouched
    again = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert again.returncode == 2 and again.stderr.strip().splitlines()[-1].startswith("ares-rerank search: error: ")
    assert "already exists: pass --overwrite" in again.stderr and read(out) == rows


def test_best_of_n_with_early_rejection_and_dvts(tiny_causal_lm_path, problems, tmp_path, capsys):
    plain, hard = tmp_path / "plain.jsonl", tmp_path / "hard.jsonl"
    common = [str(tiny_causal_lm_path), "--problems", str(problems), "--approach", "best-of-n", "--n", "3",
              *BACKBONE, *TINY_RUN]
    assert main(["search", *common, "--output", str(plain)]) == 0
    # every step of this backbone scores at most 0.95: with threshold 0.99 each candidate stops at its first step
    assert main(["search", *common, "--rejection", "hard", "--threshold", "0.99", "--output", str(hard)]) == 0
    assert "candidates stopped" in capsys.readouterr().err
    assert sum(sum(r["stopped"]) for r in read(hard)) >= 3  # real steps were written, scored and stopped
    for full, cut in zip(read(plain), read(hard)):
        check_record(full, 3)
        check_record(cut, 3)
        assert full["method"] == "best-of-n" and not any(full["stopped"])
        assert cut["method"] == "early-rejection" and len(cut["completions"]) == 3
        assert all(len(s) <= 1 for s in cut["steps"])
        assert cut["stopped"] == [bool(s) for s in cut["steps"]] and cut["stats"]["stopped"] == sum(cut["stopped"])
        assert cut["stats"]["steps"] == sum(map(len, cut["steps"])) <= full["stats"]["steps"]
    out = tmp_path / "dvts.jsonl"
    assert main(["search", *common[:3], "--approach", "dvts", "--n", "4", "--beam-width", "2", "--lookahead", "1",
                 "--output", str(out), *BACKBONE, *TINY_RUN]) == 0
    for row in read(out):
        check_record(row, 4)
        assert row["method"] == "dvts" and len(row["completions"]) == 4  # two subtrees' last two expansions
        # a lookahead rollout's steps are generated and counted, then dropped from the candidates
        assert row["stats"]["steps"] >= sum(map(len, row["steps"]))


def test_a_stopped_search_resumes_with_the_same_samples(tiny_causal_lm_path, problems, tmp_path, capsys):
    common = ["search", str(tiny_causal_lm_path), "--problems", str(problems), "--n", "4", "--beam-width", "2",
              "--batch-size", "1", *BACKBONE, *TINY_RUN]
    whole = tmp_path / "whole.jsonl"
    assert main([*common, "--output", str(whole)]) == 0
    out = tmp_path / "out.jsonl"
    Overlap.broken_on = "pepper"  # the third problem's prompt
    try:
        assert main([*common, "--output", str(out)]) == 2
    finally:
        Overlap.broken_on = None
    err = capsys.readouterr().err
    assert "2 results so far are kept" in err and "the backbone went away" in err.strip().splitlines()[-1]
    assert not out.exists() and len((tmp_path / ".out.jsonl.partial").read_text().splitlines()) == 3  # header + 2
    assert main([*common, "--output", str(out)]) == 0
    assert "resumed: 2 problems were already searched" in capsys.readouterr().err
    assert read(out) == [{**r, "stats": {**r["stats"], "seconds": o["stats"]["seconds"]}}
                         for r, o in zip(read(whole), read(out))]  # the same samples, steps and scores


def test_a_resume_with_another_batch_size_is_refused_naming_it(tiny_causal_lm_path, problems, tmp_path, capsys):
    """--batch-size seeds each batch (its first problem's index): resuming with another would sample other steps
    for the rest without a word, so the partial file records it and a resume that differs is refused."""
    common = ["search", str(tiny_causal_lm_path), "--problems", str(problems), "--n", "4", "--beam-width", "2",
              *BACKBONE, *TINY_RUN]
    out = tmp_path / "out.jsonl"
    Overlap.broken_on = "pepper"  # the third problem's prompt: the run stops after two
    try:
        assert main([*common, "--batch-size", "1", "--output", str(out)]) == 2
    finally:
        Overlap.broken_on = None
    capsys.readouterr()
    partial = tmp_path / ".out.jsonl.partial"
    assert json.loads(partial.read_text().splitlines()[0])["settings"]["batch_size"] == 1
    kept = partial.read_text()
    assert main([*common, "--batch-size", "2", "--output", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert "holds partial results of a run with other settings (batch_size: 1 then, 2 now)" in line
    assert "--no-resume" in line and partial.read_text() == kept and not out.exists()
    assert main([*common, "--batch-size", "1", "--output", str(out)]) == 0  # the original command finishes it


@pytest.mark.timeout(120)
@pytest.mark.parametrize("words", [300, 1200, 2500, 50_000], ids=["1k tokens", "4k tokens", "8k tokens", "200k chars"])
def test_a_prompt_past_the_models_window_is_refused_before_anything_is_generated(tiny_causal_lm_path, tmp_path,
                                                                                 capsys, words):
    """The tiny Qwen2 has 512 positions: a prompt of thousands of tokens (or 200,000 characters, which would keep
    generate busy for hours) is one error line naming the line, the tokens, the window and the fixes."""
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"prompt": "Let x = 3."}) + "\n" + json.dumps({"prompt": "We have a. " * words}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["search", str(tiny_causal_lm_path), "--problems", str(path), "--output", str(out), *BACKBONE,
                 *TINY_RUN]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith("ares-rerank search: error: --problems: ") and f"{path}:2 is " in line
    assert "window of 512 positions" in line and "--max-step-tokens" in line and "Shorten the prompt" in line
    assert not out.exists() and not (tmp_path / ".out.jsonl.partial").exists()  # nothing was searched


def test_steps_that_would_run_past_the_window_are_refused_and_the_fix_is_named(tiny_causal_lm_path, tmp_path,
                                                                               capsys):
    """A short prompt, but --max-step-tokens x --num-iterations past 512 positions."""
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "Let x = 3."}) + "\n")
    assert main(["search", str(tiny_causal_lm_path), "--problems", str(path), *BACKBONE, "--step-separator", " ",
                 "--max-step-tokens", "64", "--num-iterations", "10", "--no-progress"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "10 steps of at most max_step_tokens=64" in line and "may add 640 more" in line
    assert "at most 5" in line and "tokens a step for this prompt" in line


def test_the_search_functions_check_the_window_too(tiny_causal_lm_path):
    from ares_rerank import AresReranker
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ares_rerank.search import beam_search, step_generator

    model = AutoModelForCausalLM.from_pretrained(tiny_causal_lm_path)
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_lm_path)
    generator = step_generator(model, tokenizer, separator=" ", max_step_tokens=8)
    reranker = AresReranker(Overlap(), step_separator=" ")
    with pytest.raises(ValueError, match=r"beam_search: prompts\[1\] is \d[\d,]* tokens.*window of 512 positions"):
        beam_search(generator, ["Let x = 3.", "We have a. " * 400], reranker, 2, beam_width=1, num_iterations=3)


def test_conversational_prompts_go_through_the_chat_template(tiny_causal_lm_path, tmp_path):
    path, out = tmp_path / "chat.jsonl", tmp_path / "out.jsonl"
    messages = [{"role": "user", "content": p} for p in PROMPTS[:2]]
    path.write_text("".join(json.dumps({"id": f"p{i}", "messages": [m], "answer": "x"}) + "\n"
                            for i, m in enumerate(messages)))
    assert main(["search", str(tiny_causal_lm_path), "--problems", str(path), "--prompt-key", "messages",
                 "--approach", "best-of-n", "--n", "2", "--output", str(out), *BACKBONE, *TINY_RUN]) == 0
    rows = read(out)
    assert [r["messages"] for r in rows] == [[m] for m in messages] and "prompt" not in rows[0]
    for row in rows:
        check_record(row, 2)
        assert len(row["completions"]) == 2 and row["method"] == "best-of-n"


# -- vLLM: a stand-in module with vllm.LLM(model=..., **options) and SamplingParams ------------------------------------
class LLM:
    """Writes ``s<k> q=0.<d>`` steps (d from the request's seed, so the candidates differ), ending the solution with
    its third step (end of sequence)."""

    made: list = []
    requests: list = []

    def __init__(self, model, **options):
        LLM.made.append((model, options))

    def get_tokenizer(self):
        raise AssertionError("string prompts need no tokenizer")

    def chat(self, *args, **kwargs):
        raise AssertionError("the search continues rendered text with generate")

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True):
        outputs = []
        for prompt, params in zip(prompts, sampling_params):
            LLM.requests.append(params)
            k = prompt.count(params.stop[0])  # the steps so far
            samples = [types.SimpleNamespace(text=f"s{k} q=0.{(params.seed + j) % 9 + 1}", token_ids=[1, 2, 3],
                                             finish_reason="stop", stop_reason=None if k == 2 else params.stop[0])
                       for j in range(params.n)]
            outputs.append(types.SimpleNamespace(outputs=samples))
        return outputs


LLM.__module__ = "vllm.entrypoints.llm"


def test_search_with_vllm(problems, tmp_path, monkeypatch, capsys):
    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    out = tmp_path / "out.jsonl"
    assert main(["search", "org/served-model", "--problems", str(problems), "--engine", "vllm",
                 "--approach", "beam-search",
                 "--n", "4", "--beam-width", "2", "--temperature", "0.7", "--max-step-tokens", "32",
                 "--model-options", '{"gpu_memory_utilization": 0.5}', "--backbone", "test_cli_search:Quality",
                 "--mode", "exact", "--output", str(out), "--no-progress"]) == 0
    assert LLM.made == [("org/served-model", {"dtype": "auto", "gpu_memory_utilization": 0.5})]
    assert all(r.stop == ["\n\n"] and r.n == 1 and r.max_tokens == 32 and r.temperature == 0.7
               for r in LLM.requests)
    assert len({r.seed for r in LLM.requests}) > len(LLM.requests) // 2  # each continuation seeded apart
    for row in read(out):
        assert all(len(s) == 3 and s[0].startswith("s0 ") for s in row["steps"]) and all(row["finished"])
        # exact mode: a step's tau is the quality the backbone reads off it
        assert row["step_scores"] == [[pytest.approx(float(t.split("q=")[1])) for t in s] for s in row["steps"]]
        assert row["best_score"] == max(row["scores"])
        assert row["stats"]["tokens"] == 3 * 4 * 3 and row["stats"]["steps"] == 12
    assert "per problem 36 generated tokens, 12.0 steps" in capsys.readouterr().err


# -- bad input: one line naming the parameter, the value and the fix; exit status 2 ------------------------------------
@pytest.mark.parametrize("extra, message", [
    (["--n", "0"], "--n=0 must be a positive integer"),
    (["--beam-width", "16"], "--beam-width=16 must be at most --n=8"),
    (["--approach", "dvts", "--n", "6"],
     "--n=6 must be a multiple of --beam-width=4 (n // m subtrees of m expansions), "
                                       "e.g. --n 4"),
    (["--rejection", "hard"], "--rejection hard applies to --approach best-of-n"),
    (["--approach", "best-of-n", "--lookahead", "2"],
     "--lookahead applies to --approach beam-search or dvts, not best-of-n"),
    (["--method", "beam", "--approach", "dvts"], "--method beam and --approach dvts are both given"),
    (["--keep", "2"], "--keep=2 applies to --rejection soft"),
    (["--step-separator", "sentences"], "--step-separator='sentences': generation stops each step at a literal"),
    (["--temperature", "0"], "--temperature=0.0 must be > 0"),
    (["--top-p", "1.5"], "--top-p=1.5 must be in (0, 1]"),
    (["--model-options", "[1]"], "--model-options must be a JSON object, not a JSON array"),
    (["--num-iterations", "80", "--max-steps", "50"], "--num-iterations=80 + --lookahead=0 = 80 steps exceeds "
                                                      "--max-steps=50"),
    (["--engine", "vllm"], "--engine vllm needs the package 'vllm'"),
    (["--model-options", '{"no_such_option": 1}'], "--model-options ['no_such_option']: load_model_and_tokenizer "
                                                   "does not take them"),
    (["--problems", "{tmp}/missing.jsonl"], "input file '{tmp}/missing.jsonl' does not exist"),
    (["--problems", "{tmp}/bad.jsonl"], "bad.jsonl:2 needs the key 'prompt'"),
    (["--problems", "{tmp}/mixed.jsonl"], "mixed.jsonl: line 1 has a string prompt and line 2 a list of messages"),
    (["--problems", "{tmp}/mixed.jsonl", "--chat-template", "never"], "mixed.jsonl:2: the prompt is a list of "
                                                                      "messages, which --chat-template never cannot"),
    (["--prompt-key", "question"], "problems.jsonl:1 needs the key 'question'"),
])
def test_bad_input_is_one_error_line(tiny_causal_lm_path, problems, tmp_path, monkeypatch, capsys, extra, message):
    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed, wherever the tests run
    (tmp_path / "bad.jsonl").write_text('{"prompt": "p"}\n{"question": "p"}\n')
    (tmp_path / "mixed.jsonl").write_text('{"prompt": "p"}\n{"prompt": [{"role": "user", "content": "p"}]}\n')
    extra = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    argv = ["search", str(tiny_causal_lm_path), "--problems", str(problems), *BACKBONE, "--no-progress", *extra]
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [lines[-1]] and lines[0].startswith("ares-rerank search: error: ")
    assert message.replace("{tmp}", str(tmp_path)) in lines[0]


def test_a_model_that_is_not_there(problems, tmp_path, capsys):
    assert main(["search", str(tmp_path / "no-such-model"), "--problems", str(problems), *BACKBONE,
                 "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("ares-rerank search: error: MODEL ") and "no-such-model" in line
    assert main(["search", "MODEL", *BACKBONE]) == 2
    assert "no problems: give --problems FILE.jsonl" in capsys.readouterr().err


def test_the_old_method_flag_still_works_with_a_deprecation_warning(tiny_causal_lm_path, tmp_path, capsys):
    """``--method beam`` (the spelling before ``--approach``) runs beam search and says what to write instead."""
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps({"prompt": "Let x = 3."}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["search", str(tiny_causal_lm_path), "--problems", str(problems), "--method", "beam", "--n", "2",
                 "--beam-width", "2", "--output", str(out), *BACKBONE, *TINY_RUN]) == 0
    assert "--method is deprecated: use --approach beam-search" in capsys.readouterr().err
    assert json.loads(out.read_text().splitlines()[0])["method"] == "beam-search"
