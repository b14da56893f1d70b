"""``ares-rerank --version`` and every subcommand's usage line naming the subcommand (not just ``ares-rerank``)."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from ares_rerank.cli import SUBCOMMANDS, main


def test_version_prints_the_installed_distributions_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ares-rerank {version('ares-rerank')}"


@pytest.mark.parametrize("argv", [[name, "--help"] for name in SUBCOMMANDS] + [
    ["adapt", "default", "--help"], ["train", "head", "--help"], ["train", "prm", "--help"]])
def test_each_subcommands_usage_line_names_it(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    usage = capsys.readouterr().out.splitlines()[0]
    named = " ".join(a for a in argv if a != "--help")
    assert usage.startswith(f"usage: ares-rerank {named} "), usage


def test_eval_takes_data_dir_in_both_spellings_as_adapt_does():
    from test_cli_options import _subparser

    parser = _subparser("eval")
    for flag in ("--data-dir", "--data_dir"):
        assert parser.parse_args(["--task", "prmbench", flag, "/data"]).data_dir == "/data"
