"""Property-based tests of the command line: whatever JSON lines and flags a user gives, ``score`` and ``rank`` end
with exit 0 and a result per input, or exit 2 and one line naming the problem; never a traceback, never an internal
error type, never a NaN in the output."""

from __future__ import annotations

import json
import math
import re

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ares_rerank.cli import main


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
CLAIM = st.text(st.characters(codec="utf-8"), max_size=20) | st.sampled_from(["I have A", "x = 3", " ", "", "\udcff"])
CHAIN_KEYS = st.fixed_dictionaries({}, optional={
    "base_claims": st.lists(CLAIM, max_size=3) | JSON,
    "steps": st.lists(CLAIM, max_size=3) | JSON,
    "labels": st.lists(st.integers(0, 1), max_size=3) | JSON,
    "id": JSON,
    "prompt": CLAIM | JSON,
    "completion": CLAIM | JSON,
})
RANK_KEYS = st.fixed_dictionaries({}, optional={
    "prompt": CLAIM | JSON,
    "candidates": st.lists(CLAIM | JSON, max_size=3) | JSON,
})
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=20).filter(str.strip)
VALID_CHAIN = st.fixed_dictionaries({"base_claims": st.lists(TEXT, max_size=3),
                                     "steps": st.lists(TEXT, min_size=1, max_size=3)})
VALID_RANK = st.fixed_dictionaries({"prompt": TEXT, "candidates": st.lists(TEXT | st.just(""), max_size=3)})
UNEXPECTED = "ARES_DEBUG=1 shows the traceback"  # describe_error marks every error that is not a user error


def _check(code: int, out: str, err: str, lines: int) -> None:
    event(f"exit {code}")
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err and UNEXPECTED not in err, err
    if code == 2:
        assert len([line for line in err.splitlines() if "error:" in line]) == 1, err
        return
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == lines
    for record in records:
        scores = record.get("step_scores") or []
        flat = [s for row in scores for s in (row if isinstance(row, list) else [row])] if scores else []
        assert all(s is None or (math.isfinite(s) and 0.0 <= s <= 1.0) for s in flat), record


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(VALID_CHAIN, min_size=1, max_size=3) | st.lists(CHAIN_KEYS | JSON, min_size=1, max_size=3),
       separator=st.sampled_from(["\\n", "\\n\\n", ".",
                                                                                                "sentences", "\\"]))
def test_score_ends_in_results_or_one_line(tmp_path_factory, capsys, records, separator):
    path = tmp_path_factory.mktemp("score") / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8", errors="surrogatepass")
    code = main(["score", str(path), "--backbone", "slow_backbone:HashBackbone", "--no-progress",
                 "--step-separator", separator, "--mode", "sample", "--eps", "0.3", "--delta", "0.3"])
    captured = capsys.readouterr()
    _check(code, captured.out, captured.err, len(records))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(VALID_RANK, min_size=1, max_size=3) | st.lists(RANK_KEYS | JSON, min_size=1, max_size=3))
def test_rank_ends_in_results_or_one_line(tmp_path_factory, capsys, records):
    path = tmp_path_factory.mktemp("rank") / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8", errors="surrogatepass")
    code = main(["rank", "--input", str(path), "--backbone", "slow_backbone:HashBackbone", "--no-progress",
                 "--step-separator", "\\n", "--mode", "sample", "--eps", "0.3", "--delta", "0.3"])
    captured = capsys.readouterr()
    _check(code, captured.out, captured.err, len(records))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flags=st.lists(st.sampled_from(["--eps", "--delta", "--prior", "--max-masks", "--prune-mass", "--threshold",
                                       "--seed", "--batch-size"]), min_size=1, max_size=3),
       values=st.lists(st.sampled_from(["0", "-1", "nan", "inf", "1e-9", "0.5", "2", "1e9", "x"]), min_size=3,
                       max_size=3))
def test_estimator_flags_end_in_results_or_one_line(tmp_path_factory, capsys, flags, values):
    path = tmp_path_factory.mktemp("flags") / "in.jsonl"
    path.write_text(json.dumps({"base_claims": ["I have A"], "steps": ["so B", "so C"]}) + "\n")
    argv = ["score", str(path), "--backbone", "slow_backbone:HashBackbone", "--no-progress"]
    for flag, value in zip(flags, values):
        argv += [flag, value]
    try:
        code = main(argv)
    except SystemExit as done:  # argparse rejects a value of the wrong type itself: usage + one error line, exit 2
        code = done.code
    captured = capsys.readouterr()
    _check(code, captured.out, captured.err, 1)


def test_help_of_every_command_prints_and_exits_zero(capsys):
    """``--help`` formats every option's help text through argparse's %-formatting: a literal "%" in a help string
    (a field's metadata such as "25% fewer") used to end ``score --help`` in a TypeError traceback."""
    import pytest

    from ares_rerank.cli import SUBCOMMANDS

    commands = [[name] for name in SUBCOMMANDS if name != "train"] + [["train", "head"], ["train", "prm"], []]
    for command in commands:
        with pytest.raises(SystemExit) as done:
            main([*command, "--help"])
        assert done.value.code == 0, command
        out = capsys.readouterr().out
        assert out.startswith("usage:") and "--help" in out, command
    with pytest.raises(SystemExit):
        main(["score", "--help"])
    out = capsys.readouterr().out
    assert re.search(r"\d+% fewer", out) and "%%" not in out  # printed as written, not doubled
