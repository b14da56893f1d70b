"""``SearchConfig``: the one home of ``ares-rerank search``'s search flags. The generated flags are the hand-written
ones they replaced (spellings, defaults, choices; ``--method`` still warns and maps), the checks name the flag from
Python as from the shell, and a Python user who builds a SearchConfig runs the search the command runs."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from ares_rerank import AresConfig, AresReranker
from ares_rerank.cli import build_parser, main
from ares_rerank.search import step_generator
from ares_rerank.search.config import SearchConfig
from test_cli_search import PROMPTS, Overlap


#: The search flags as ``commands/search.py`` wrote them by hand before SearchConfig (at dc2730b): flag -> (dest,
#: parsed default, choices, takes a value). ``--approach`` parses to None so that ``--method`` can tell when both are
#: given; beam-search is the default once resolved.
HAND_WRITTEN = {
    "--approach": ("approach", None, ["best-of-n", "beam-search", "dvts"], True),
    "--method": ("method", None, ["best-of-n", "beam", "dvts"], True),
    "--n": ("n", 8, None, True),
    "--beam-width": ("beam_width", 4, None, True),
    "--num-iterations": ("num_iterations", 40, None, True),
    "--lookahead": ("lookahead", 0, None, True),
    "--filter-duplicates": ("filter_duplicates", False, None, False),
    "--sort-completed": ("sort_completed", False, None, False),
    "--rejection": ("rejection", None, ["none", "hard", "soft"], True),
    "--keep": ("keep", 1, None, True),
    "--generation-seed": ("generation_seed", 0, None, True),
}


def search_parser() -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    return commands.choices["search"]


def test_the_generated_flags_are_the_hand_written_ones():
    actions = {s: a for a in search_parser()._actions for s in a.option_strings}
    for flag, (dest, default, choices, takes_value) in HAND_WRITTEN.items():
        action = actions[flag]
        assert (action.dest, action.default, action.nargs != 0) == (dest, default, takes_value), flag
        assert (list(action.choices) if action.choices else None) == choices, flag
    # every SearchConfig field has its flag, and nothing else of the search group is left hand-written
    assert {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(SearchConfig)} == set(HAND_WRITTEN) - {
        "--method"}


@pytest.mark.parametrize("argv, expected", [
    ([], {}),
    (["--approach", "dvts", "--n", "6", "--beam-width", "3"], {"approach": "dvts", "n": 6, "beam_width": 3}),
    (["--method", "dvts"], {"approach": "dvts"}),
    (["--approach", "best-of-n", "--rejection", "soft", "--keep", "2"],
     {"approach": "best-of-n", "rejection": "soft", "keep": 2}),
    (["--filter-duplicates", "--sort-completed", "--lookahead", "3", "--num-iterations", "9", "--generation-seed",
      "5"], {"filter_duplicates": True, "sort_completed": True, "lookahead": 3, "num_iterations": 9,
             "generation_seed": 5}),
])
def test_parsed_flags_build_the_config_a_python_user_would(argv, expected, capsys):
    from ares_rerank.commands.search import _search_config

    args = search_parser().parse_args(["MODEL", *argv])
    args.command = "search"
    assert _search_config(args, AresConfig()) == SearchConfig(**expected)
    assert ("--method is deprecated: use --approach dvts" in capsys.readouterr().err) == ("--method" in argv)


@pytest.mark.parametrize("kwargs, message", [
    ({"n": 0}, "--n=0 must be a positive integer"),
    ({"approach": "dvts", "n": 6}, "--n=6 must be a multiple of --beam-width=4"),
    ({"approach": "beam"}, "--approach 'beam' is not one of ['best-of-n', 'beam-search', 'dvts']"),
    ({"rejection": "hard"}, "--rejection hard applies to --approach best-of-n"),
    ({"approach": "best-of-n", "sort_completed": True}, "--sort-completed applies to --approach beam-search"),
    ({"lookahead": -1}, "--lookahead=-1 must be 0 (no rollout) or more"),
    ({"keep": 3, "approach": "best-of-n"}, "--keep=3 applies to --rejection soft"),
])
def test_a_config_python_cannot_search_is_refused_naming_the_setting(kwargs, message):
    with pytest.raises(ValueError) as err:
        SearchConfig(**kwargs)
    assert message in str(err.value)


def test_the_horizon_is_checked_against_ares_max_steps():
    SearchConfig(num_iterations=8, lookahead=2).check_max_steps(10)
    with pytest.raises(ValueError, match=r"--num-iterations=8 \+ --lookahead=3 = 11 steps exceeds --max-steps=10"):
        SearchConfig(num_iterations=8, lookahead=3).check_max_steps(10)
    assert SearchConfig(approach="best-of-n", num_iterations=8).horizon == 8  # no rollout outside the beams


@pytest.mark.parametrize("approach, flags", [
    ("dvts", {"n": 4, "beam_width": 2, "lookahead": 1}),
    ("best-of-n", {"n": 3, "rejection": "soft", "keep": 2}),
])
def test_a_python_user_runs_the_search_the_command_runs(tiny_causal_lm_path, tmp_path, capsys, approach, flags):
    from ares_rerank.backbones.hub import load_model_and_tokenizer

    problems = tmp_path / "problems.jsonl"
    problems.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS[:3]))
    out = tmp_path / "out.jsonl"
    argv = [f"--{k.replace('_', '-')}={v}" for k, v in flags.items()]
    assert main(["search", str(tiny_causal_lm_path), "--problems", str(problems), "--approach", approach, *argv,
                 "--num-iterations", "3", "--step-separator", " ", "--max-step-tokens", "5", "--no-progress",
                 "--backbone", "test_cli_search:Overlap", "--output", str(out)]) == 0
    shell = [json.loads(line) for line in out.read_text().splitlines()]

    model, tokenizer, _ = load_model_and_tokenizer(tiny_causal_lm_path, "AutoModelForCausalLM", calibrated=False)
    # the command's generator: --generation-batch-size 16 (contexts per model.generate call: another size samples
    # other continuations)
    generator = step_generator(model, tokenizer, separator=" ", max_step_tokens=5, batch_size=16)
    reranker = AresReranker(Overlap(), AresConfig(), step_separator=" ")
    config = SearchConfig(approach=approach, num_iterations=3, **flags)
    found = config.search(generator, PROMPTS[:3], reranker)  # one batch of 3 (--batch-size 4): seed 0
    assert [r.steps for r in found] == [row["steps"] for row in shell]
    assert [r.step_scores for r in found] == [row["step_scores"] for row in shell]
    assert [r.best_index for r in found] == [row["best_index"] for row in shell]
    assert [r.method for r in found] == [row["method"] for row in shell]
