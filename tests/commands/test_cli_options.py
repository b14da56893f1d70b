"""Every command takes the same estimator and backbone flags (generated once from AresConfig), and every user error
ends as one line on stderr with exit status 2."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from transformers import HfArgumentParser

from ares_rerank import AresConfig
from ares_rerank.cli import build_parser, main
from ares_rerank.rerank.config import RerankConfig


DEMO = Path(__file__).resolve().parents[2] / "examples" / "claimtrees_demo.jsonl"


def _flags(parser) -> dict[str, object]:
    return {opt: action.default for action in parser._actions for opt in action.option_strings}  # argparse internals


def _subparser(name: str):
    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    return sub.choices[name]


def test_estimator_and_backbone_flags_are_the_same_in_every_command():
    from ares_rerank.distributed import _parser as distributed_parser

    parsers = {name: _flags(_subparser(name)) for name in ("score", "rank", "eval")}
    parsers["distributed"] = _flags(distributed_parser())
    for field in dataclasses.fields(AresConfig):
        flag = "--" + field.name.replace("_", "-")
        for name, flags in parsers.items():
            if name == "eval" and field.name == "threshold":
                assert flag not in flags  # eval picks thresholds by cross-validation
                continue
            # --threshold is RerankConfig's (AresConfig.threshold is deprecated), offered with the estimator's flags
            default = RerankConfig.threshold if field.name == "threshold" else field.default
            assert flags.get(flag, "missing") == default, (name, flag)
    for flag in ("--backbone", "--kind", "--backbone-options", "--batch-size"):
        assert all(flag in flags for flags in parsers.values()), flag
    # one set of defaults: the same backbone (and, where the text is split, the same prompt split) everywhere,
    # serve and search included (eval defaulted to the rule oracle, which reads ClaimTrees only)
    parsers.update(serve=_flags(_subparser("serve")), search=_flags(_subparser("search")))
    assert {name: flags["--backbone"] for name, flags in parsers.items()} == dict.fromkeys(parsers, "default")
    assert {name: flags["--prompt-split"] for name, flags in parsers.items() if "--prompt-split" in flags} == \
        dict.fromkeys(("score", "rank", "distributed", "serve", "search"), RerankConfig.prompt_split)
    for flag in ("--step-separator", "--prompt-split"):  # eval's tasks give chains, not text
        assert all(flag in parsers[name] for name in ("score", "rank", "distributed")), flag
    for flag in ("--input", "--output", "--no-progress"):
        assert flag in parsers["score"] and flag in parsers["rank"], flag


def test_config_from_the_command_line_equals_the_dataclass():
    from ares_rerank.commands.options import config_from_args

    args = _subparser("score").parse_args(["x.jsonl", "--prior", "0.95", "--mode", "exact", "--max-masks", "8",
                                           "--base-priors", "0.9", "1", "--prune-mass", "0"])
    assert config_from_args(args) == AresConfig(prior=0.95, mode="exact", max_masks=8, base_priors=[0.9, 1.0],
                                                prune_mass=0.0)
    assert config_from_args(_subparser("rank").parse_args(["x.jsonl"])) == AresConfig()


def test_aresconfig_works_with_hf_argument_parser():
    (config,) = HfArgumentParser(AresConfig).parse_args_into_dataclasses(
        ["--prior", "0.95", "--eps", "0.05", "--base_priors", "0.9", "0.8", "--mode", "sample"])
    assert config == AresConfig(prior=0.95, eps=0.05, base_priors=[0.9, 0.8], mode="sample")
    with pytest.raises(SystemExit):
        HfArgumentParser(AresConfig).parse_args_into_dataclasses(["--mode", "magic"])


@pytest.mark.parametrize("argv, message", [
    (["score", "missing.jsonl", "--backbone", "claimtrees-oracle"], "input file 'missing.jsonl' does not exist"),
    (["score", "{data}", "--backbone", "claimtrees-oracle", "--eps", "2"], "AresConfig(eps=2.0) must be"),
    (["score", "{data}", "--backbone", "claimtrees-oracle", "--backbone-options", "{{"], "is not JSON"),
    (["score", "{data}", "--backbone", "no/such/model-folder"], "no/such/model-folder"),
    (["score", "{data}", "--input", "other.jsonl", "--backbone", "claimtrees-oracle"], "give one"),
    (["rank", "--input", "{data}", "--backbone", "claimtrees-oracle", "--batch-size", "0"], "--batch-size=0"),
    (["eval", "--backbone", "claimtrees-oracle", "--task", "nope", "--no-progress"], "task='nope' is unknown"),
    (["calibrate", "default", "--pairs", "{data}"], "never modifies"),
    (["calibrate", "default", "--pairs", "{data}", "--output-dir", "{package}/calibrated"],
     "--output-dir: '{package}/calibrated' is inside the installed ares_rerank package"),
    # found by an audit of bad inputs (2026-11-27): each ended in a traceback line, a late failure or a silent run
    (["calibrate", "default", "--pairs", "{data}", "--dry-run", "--bins", "99999999999"],
     "--bins=99999999999 must be an integer in [1, 1000]"),
    (["calibrate", "default", "--pairs", "{data}", "--output-dir", "{file}/copy"], "--output-dir: cannot create"),
    (["eval", "--backbone", "claimtrees-oracle",
      "--task", "claimtrees", "--n", "10", "--cache-dir", "{package}/cache", "--no-progress"],
     "--cache-dir: '{package}/cache' is inside the installed ares_rerank package"),
    (["eval", "--backbone", "claimtrees-oracle",
      "--task", "processbench", "--n", "5", "--no-progress"], "task='processbench' needs ['path']"),
    (["eval", "--backbone", "claimtrees-oracle",
      "--task", "claimtrees", "--n", "99999999999", "--no-cache", "--no-progress"],
     "n=99,999,999,999 examples are more than one call builds"),
    (["score", "{data}", "--backbone", "{data}"], "is a file, not a model"),
    (["score", "{data}", "--backbone", "claimtrees-oracle", "--kind", "judge"], "not kind='judge'"),
    (["score", "{data}", "--backbone", "claimtrees-oracle", "--step-separator", "re:\\s*"],
     "matches the empty string"),
    (["train", "head", "missing.yaml"], "config 'missing.yaml' cannot be read"),
    (["train", "head", "--output_dir", "{file}/run"], "output_dir: cannot create the folder"),
])
def test_user_errors_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"base_claims": ["I have A"], "steps": ["I have A"]}) + "\n")
    package = Path(__import__("ares_rerank").__file__).resolve().parent
    argv = [a.format(data=data, package=package, file=data) for a in argv]
    message = message.format(package=package)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1, err
