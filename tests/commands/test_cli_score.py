from __future__ import annotations

import json
from pathlib import Path

from ares_rerank.cli import main


DEMO = Path(__file__).resolve().parents[2] / "examples" / "claimtrees_demo.jsonl"


def test_score_command_flags_match_labels_with_the_oracle(tmp_path, capsys):
    out = tmp_path / "scores.jsonl"
    assert main(["score", str(DEMO), "--backbone", "claimtrees-oracle", "--output", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    gold = [json.loads(line) for line in DEMO.read_text().splitlines()]
    assert [r["id"] for r in records] == [g["id"] for g in gold]
    for record, chain in zip(records, gold):
        assert record["flags"] == [bool(y) for y in chain["labels"]]
        assert record["mode"] == "exact" and record["evaluations"] == len(chain["steps"])
    assert "step accuracy vs gold labels: 30/30 = 1.000" in capsys.readouterr().err


def test_score_command_reads_prompt_completion_and_baselines(tmp_path, capsys):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "a",
                                "prompt": "Rule: A -> B (meaning that if I have A, I can derive B)\nI have A",
                                "completion": "I have A, I use rule (A -> B) to derive B, now I have B"}) + "\n")
    assert main(["score", str(data), "--backbone", "claimtrees-oracle", "--prompt-split", "lines",
                 "--method", "entail-prev"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["step_scores"] == [1.0] and record["method"] == "entail-prev"


def test_score_command_bad_input_is_a_clear_error(tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"prompt": "p"}\n')
    assert main(["score", str(data), "--backbone", "claimtrees-oracle"]) == 2
    assert "bad.jsonl:1 needs 'steps'" in capsys.readouterr().err
    data.write_text("not json\n")
    assert main(["score", str(data), "--backbone", "claimtrees-oracle"]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_score_and_rank_load_a_remote_code_prm_through_backbone_options(tmp_path, capsys):
    from tiny_models import tiny_remote_code_prm

    prm = tiny_remote_code_prm(tmp_path / "prm")
    chains, candidates = tmp_path / "chains.jsonl", tmp_path / "candidates.jsonl"
    completion = "I have AB, I use rule (AB -> CD) to derive CD\nnow I have CD"
    chains.write_text(json.dumps({"id": "c", "prompt": "I have AB", "completion": completion}) + "\n")
    candidates.write_text(json.dumps({"prompt": "I have AB", "candidates": [completion, "now I have CD"]}) + "\n")
    plain = ["--backbone", str(prm), "--step-separator", "\\n", "--no-progress"]
    assert main(["score", str(chains), *plain]) == 2  # remote code runs only when asked for
    assert "trust_remote_code" in capsys.readouterr().err
    opted = [*plain, "--backbone-options", '{"trust_remote_code": true}']
    assert main(["score", str(chains), *opted, "--output", str(tmp_path / "s.jsonl")]) == 0
    assert main(["rank", "--input", str(candidates), *opted, "--output", str(tmp_path / "r.jsonl")]) == 0
    (scored,) = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    (ranked,) = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(scored["step_scores"]) == 2  # '\n' given as two characters splits on a newline in both commands
    assert [len(s) for s in ranked["step_scores"]] == [2, 1]
    assert ranked["step_scores"][0] == scored["step_scores"]  # the same chain, the same seeded estimator


def test_step_separator_has_one_escaping_rule():
    from ares_rerank.commands.options import step_separator

    assert step_separator("\\n\\n") == "\n\n" and step_separator("\\t") == "\t" and step_separator("###") == "###"
    assert step_separator("sentences") is None and step_separator("→\\n") == "→\n"
    assert step_separator("\\\\") == "\\"


def test_step_separator_with_an_unfinished_escape_names_the_flag(tmp_path, capsys):
    """A lone backslash used to end in "'unicodeescape' codec can't decode byte 0x5c ...", naming no flag."""
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"prompt": "I have A", "completion": "I have A"}) + "\n")
    for separator in ("\\", "\\x4"):
        assert main(["score", str(data), "--backbone", "claimtrees-oracle", "--step-separator", separator]) == 2
        err = capsys.readouterr().err.strip()
        assert "--step-separator=" in err and "unfinished escape" in err and len(err.splitlines()) == 1, err


def test_score_input_that_is_not_utf8_is_a_clear_error(tmp_path, capsys):
    """A non-UTF-8 input file used to end in the codec's bare message ("'utf-8' codec can't decode byte 0xff..."),
    naming neither the file nor the fix."""
    data = tmp_path / "latin1.jsonl"
    data.write_bytes(b'{"base_claims": ["caf\xe9"], "steps": ["I have A"]}\n')
    assert main(["score", str(data), "--backbone", "claimtrees-oracle", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "latin1.jsonl" in err and "not UTF-8" in err and "save it as UTF-8" in err, err
    assert len(err.splitlines()) == 1


def test_score_reads_a_byte_order_mark_and_says_when_there_is_nothing_to_score(tmp_path, capsys):
    """A JSONL saved by a Windows editor starts with a BOM, which json refused ("decode using utf-8-sig"); an empty
    input exited 0 without a word."""
    src = tmp_path / "bom.jsonl"
    src.write_bytes(b"\xef\xbb\xbf" + DEMO.read_bytes())
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--backbone", "claimtrees-oracle", "--output", str(out), "--no-progress"]) == 0
    assert len(out.read_text().splitlines()) == len(DEMO.read_text().splitlines())
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    capsys.readouterr()
    assert main(["score", str(empty), "--backbone", "claimtrees-oracle", "--no-progress"]) == 0
    assert f"input {str(empty)!r} holds no chains: nothing to score." in capsys.readouterr().err


def test_chain_ids_are_strings_or_integers_and_null_means_the_line_number(tmp_path, capsys):
    from ares_rerank.chain import read_chains

    src = tmp_path / "ids.jsonl"
    rows = [{"id": None, "base_claims": [], "steps": ["a"]}, {"id": 7, "base_claims": [], "steps": ["b"]}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [c.id for c in read_chains(src)] == ["1", "7"]  # null was the string "None"
    src.write_text(json.dumps({"id": {"x": 1}, "base_claims": [], "steps": ["a"]}) + "\n")
    assert main(["score", str(src), "--backbone", "claimtrees-oracle", "--no-progress"]) == 2
    assert "ids.jsonl:1 id={'x': 1} must be a string or an integer" in capsys.readouterr().err


def test_score_says_when_the_backbone_window_dropped_premises(tmp_path, capsys, tiny_nli_path):
    """30 long premises behind a 64-token window: the summary read "[exact, bound 0]" with 28 premises unseen."""
    claims = [f"Claim {i}: " + " ".join(f"word{i}x{j}" for j in range(20)) for i in range(30)]
    data = tmp_path / "wide.jsonl"
    data.write_text(json.dumps({"base_claims": claims, "steps": ["Claim 3 holds, so it follows."]}) + "\n")
    argv = ["score", str(data), "--backbone", str(tiny_nli_path), "--kind", "nli", "--no-progress",
            "--backbone-options", json.dumps({"premise_selection": "all", "max_length": 64})]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "note: the backbone's input window dropped" in err and "from 1 inputs" in err
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"base_claims": ["A b."], "steps": ["C d."]}) + "\n")
    assert main([*argv[:1], str(small), *argv[2:]]) == 0
    assert "input window" not in capsys.readouterr().err  # nothing left out, nothing said


def test_output_dash_is_standard_output_and_a_missing_input_creates_nothing(tmp_path, capsys, monkeypatch):
    """'--output -' wrote a file named '-' (an input of '-' is stdin); a missing input failed only after --output's
    folder had been created."""
    monkeypatch.chdir(tmp_path)
    assert main(["score", str(DEMO), "--backbone", "claimtrees-oracle", "--output", "-", "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all("step_scores" in json.loads(line) for line in lines)
    assert not (tmp_path / "-").exists()
    assert main(["score", str(tmp_path / "missing.jsonl"), "--output", str(tmp_path / "new" / "x.jsonl")]) == 2
    assert "input file" in capsys.readouterr().err and not (tmp_path / "new").exists()
