"""``ares-rerank rank``: JSONL of {prompt, candidates} in, JSONL with scores and rankings out, progress on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ares_rerank.cli import main
from test_rerank import claimtrees_reranking_problem


REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def claimtrees_jsonl(tmp_path) -> tuple[Path, list[int]]:
    path = tmp_path / "in.jsonl"
    gold = []
    with path.open("w") as f:
        for idx in range(5):
            prompt, candidates, sound = claimtrees_reranking_problem(idx)
            f.write(json.dumps({"id": f"q{idx}", "prompt": prompt, "candidates": candidates}) + "\n")
            gold.append(sound)
        f.write("\n")  # blank lines are skipped
    return path, gold


ORACLE_ARGS = ["--backbone", "claimtrees-oracle", "--step-separator", "\\n", "--prompt-split", "lines"]


def test_rank_writes_scores_rankings_and_best(claimtrees_jsonl, tmp_path, capsys):
    path, gold = claimtrees_jsonl
    out = tmp_path / "out.jsonl"
    assert main(["rank", "--input", str(path), "--output", str(out), "--top-k", "2", "--batch-size", "2",
                 *ORACLE_ARGS]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(5)]  # input fields kept, order kept
    for row, sound in zip(rows, gold):
        assert row["best_index"] == sound
        assert row["scores"][sound] == 1.0 and sorted(row["scores"]) == [0.0, 0.0, 0.0, 1.0]
        assert len(row["ranking"]) == 2 and row["ranking"][0] == {"corpus_id": sound, "index": sound, "score": 1.0}
        assert len(row["step_scores"]) == 4 and len(row["step_scores"][sound]) == 9
        assert row["first_errors"][sound] == -1 and all(e >= 0 for i, e in enumerate(row["first_errors"]) if i != sound)
    err = capsys.readouterr().err
    assert "ranking" in err and "5/5" in err  # the tqdm bar, on stderr
    assert "ranked 5 prompts (20 candidates)" in err


def test_rank_to_stdout_with_a_baseline(claimtrees_jsonl, capsys):
    path, gold = claimtrees_jsonl
    assert main(["rank", "--input", str(path), "--method", "entail-prev", "--no-progress", *ORACLE_ARGS]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert len(rows) == 5 and "5/5" not in captured.err  # --no-progress: no bar
    # Entail-Prev: the final step of a chain that skipped an early step is still entailed -> ties at 1.0.
    assert sum(r["scores"].count(1.0) > 1 for r in rows) >= 4


def test_rank_empty_candidate_and_bad_input(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "I have A1", "candidates": ["", "I have A1, I use rule (A1 -> B1) to "
                                                                       "derive B1, now I have B1"]}) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["rank", "--input", str(path), "--output", str(out), "--no-progress", *ORACLE_ARGS]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["scores"] == [None, 0.0]
    assert row["ranking"] == [{"corpus_id": 1, "index": 1, "score": 0.0}, {"corpus_id": 0, "index": 0, "score": None}]
    assert row["best_index"] == 1
    path.write_text(json.dumps({"prompt": "I have A1", "candidates": ["", " \u200b "]}) + "\n")
    assert main(["rank", "--input", str(path), "--output", str(out), "--overwrite", "--no-progress",
                 *ORACLE_ARGS]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["scores"] == [None, None] and row["best_index"] is None  # no candidate scored: none is best
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "candidates": ["a"]}\n{"prompt": "p"}\n')
    assert main(["rank", "--input", str(bad), *ORACLE_ARGS]) == 2
    assert "bad.jsonl:2 has no 'candidates' (--candidates-key names the key of the candidates)" in \
        capsys.readouterr().err
    # a candidate or prompt that is neither text nor a conversation: the line and the candidate, before any scoring
    bad.write_text('{"prompt": "p", "candidates": ["a"]}\n{"prompt": "p", "candidates": ["a", 42]}\n')
    out_bad = tmp_path / "never.jsonl"
    assert main(["rank", "--input", str(bad), "--output", str(out_bad), *ORACLE_ARGS]) == 2
    assert "bad.jsonl:2: candidates[1] is int: pass a string or a list of" in capsys.readouterr().err
    assert not out_bad.exists()
    bad.write_text('{"prompt": [{"role": "user", "content": null}], "candidates": ["a"]}\n')
    assert main(["rank", "--input", str(bad), *ORACLE_ARGS]) == 2
    assert "bad.jsonl:1: prompt has a 'user' message whose content is NoneType" in capsys.readouterr().err
    bad.write_text("{not json\n")
    assert main(["rank", "--input", str(bad), *ORACLE_ARGS]) == 2
    assert "bad.jsonl:1 is not valid JSON" in capsys.readouterr().err
    assert main(["rank", "--input", str(path), "--top-k", "0", *ORACLE_ARGS]) == 2
    assert "--top-k=0 must be a positive integer" in capsys.readouterr().err


def test_rank_runs_as_a_command(claimtrees_jsonl, tmp_path):
    path, gold = claimtrees_jsonl
    out = tmp_path / "out.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "ares_rerank.cli", "rank", "--input", str(path), "--output", str(out), *ORACLE_ARGS],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["best_index"] for line in out.read_text().splitlines()] == gold
