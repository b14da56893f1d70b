"""Data-parallel scoring: shards cover every row once, and `accelerate launch --multi_gpu --num_processes 2` gives
exactly the single-process scores, in data order (a real two-process run over gloo on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from ares_rerank import AresConfig, Chain, score_chains
from ares_rerank.backbones import ClaimTreesOracle
from ares_rerank.data.claimtrees import load_claimtrees
from ares_rerank.distributed import chains_from_rows, score_dataset, shard_indices
from fake_servers import free_port


def claimtrees_rows(n: int, length: int) -> list[dict]:
    return [{"id": c.id, "base_claims": list(c.base_claims), "steps": list(c.steps), "labels": list(c.labels)}
            for c in load_claimtrees(n, length=length)]


@pytest.mark.parametrize(("rows", "procs"), [(7, 2), (5, 3), (2, 4), (0, 2)])
def test_shards_cover_every_row_once(rows, procs):
    shards = [shard_indices(rows, procs, p) for p in range(procs)]
    assert sorted(i for shard in shards for i in shard) == list(range(rows))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    with pytest.raises(ValueError, match="process_index=2"):
        shard_indices(rows, 2, 2)


def test_chains_from_rows_both_layouts():
    rows = {"id": ["a"], "base_claims": [["B."]], "steps": [["s1", "s2"]], "labels": [[0, 1]]}
    assert chains_from_rows(rows) == [Chain(["B."], ["s1", "s2"], labels=[0, 1], id="a")]
    text = {"prompt": ["Q?"], "completion": ["one\n\ntwo"]}
    assert chains_from_rows(text)[0].steps == ("one", "two")
    with pytest.raises(ValueError, match="needs 'steps'"):
        chains_from_rows({"question": ["x"]})
    # found by an audit (2026-11-27): each was a bare IndexError / TypeError / AttributeError
    with pytest.raises(ValueError, match=r"different lengths \{'base_claims': 1, 'steps': 2\}"):
        chains_from_rows({"base_claims": [["B."]], "steps": [["s"], ["t"]]})
    with pytest.raises(TypeError, match=r"shard_indices\(num_processes=2.0\) must be an int"):
        shard_indices(10, 2.0, 0)
    with pytest.raises(TypeError, match="score_dataset.* is a list: pass a datasets.Dataset"):
        score_dataset(claimtrees_rows(2, 4), ClaimTreesOracle())


def test_single_process_equals_score_chains():
    dataset = datasets.Dataset.from_list(claimtrees_rows(5, 5))
    config = AresConfig(mode="sample", prior=0.95)
    got = score_dataset(dataset, ClaimTreesOracle(), config=config, batch_size=2, progress=False)
    want = score_chains(load_claimtrees(5, length=5), ClaimTreesOracle(), config=config)
    assert [s.to_dict() for s in got] == [s.to_dict() for s in want]
    with pytest.raises(ValueError, match="method='bogus'"):
        score_dataset(dataset, ClaimTreesOracle(), method="bogus")


def launch(tmp_path, flags: list[str], rows: list[dict], prior: float) -> subprocess.CompletedProcess:
    data = tmp_path / "chains.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", *flags, "--num_processes", "2", "--num_machines", "1",
        "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
        "-m", "ares_rerank.distributed", "--data", str(data), "--output", str(tmp_path / "scores.jsonl"),
        "--backbone", "claimtrees-oracle", "--mode", "sample", "--prior", str(prior), "--batch-size", "2",
    ]
    root = str(Path(__file__).resolve().parents[2])  # importable from a checkout that is not pip-installed
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf-cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=280, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def read_and_compare(tmp_path, rows: list[dict], prior: float) -> list[dict]:
    """The launched run's scores must equal single-process score_chains exactly, in data order."""
    records = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    chains = [Chain(r["base_claims"], r["steps"], id=r["id"]) for r in rows]
    want = score_chains(chains, ClaimTreesOracle(), config=AresConfig(mode="sample", prior=prior))
    assert [r["index"] for r in records] == list(range(len(rows)))
    assert [r["chain_id"] for r in records] == [r["id"] for r in rows]
    assert [r["step_scores"] for r in records] == [s.step_scores for s in want]  # exactly, in order
    assert [r["evaluations"] for r in records] == [s.evaluations for s in want]
    assert len({tuple(r["step_scores"]) for r in records}) > 2  # sampled, varied scores: the check has teeth
    return records


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_cpu_processes_give_the_single_process_scores(tmp_path):
    """Two real processes (torchrun through accelerate, a gloo group on the CPU), each scoring a shard."""
    rows = claimtrees_rows(7, 6)  # an odd count: the shards differ in size
    done = launch(tmp_path, ["--multi_gpu"], rows, prior=0.95)
    assert "scored 7 chains on 2 process(es)" in done.stdout
    records = read_and_compare(tmp_path, rows, prior=0.95)
    assert [r["process"] for r in records] == [0, 1, 0, 1, 0, 1, 0]  # strided shards, gathered back in order


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_accelerate_launch_cpu_flag_runs_one_process_and_says_so(tmp_path):
    """`accelerate launch --num_processes 2 --cpu` starts one process without MPI: same scores, and a warning."""
    rows = claimtrees_rows(5, 6)
    done = launch(tmp_path, ["--cpu"], rows, prior=0.95)
    assert "scored 5 chains on 1 process(es)" in done.stdout
    assert "started a single process" in done.stderr and "--multi_gpu" in done.stderr
    records = read_and_compare(tmp_path, rows, prior=0.95)
    assert {r["process"] for r in records} == {0}


def test_command_line_bad_input_is_one_line_naming_the_flag(tmp_path, capsys):
    from ares_rerank.distributed import main

    data = tmp_path / "chains.jsonl"
    chain = load_claimtrees(1, length=4)[0]
    data.write_text(json.dumps({"base_claims": list(chain.base_claims), "steps": list(chain.steps)}) + "\n")
    bad_step = tmp_path / "bad.jsonl"
    bad_step.write_text(json.dumps({"base_claims": ["Rule: A -> B"], "steps": ["B follows, somehow"]}) + "\n")
    (tmp_path / "not_a_dataset").mkdir()
    base = ["--backbone", "claimtrees-oracle"]
    cases = [
        (["--data", str(data), "--output", str(tmp_path / "o.jsonl"), "--limit", "-1"],
         "--limit=-1 must be a positive"),
        (["--data", str(tmp_path / "not_a_dataset"), "--output", str(tmp_path / "o.jsonl")],
         "is a folder but not one written by Dataset.save_to_disk"),
        (["--data", str(data), "--output", str(tmp_path)], "is a folder: name a file inside it"),
        (["--data", str(bad_step), "--output", str(tmp_path / "o.jsonl")], "ClaimTreesOracle cannot parse"),
    ]
    for argv, message in cases:
        assert main(argv + base) == 2
        err = capsys.readouterr().err
        assert "ares_rerank.distributed: error: " in err and message in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()  # nothing written for a run that failed
    assert main(["--data", str(data), "--output", str(tmp_path / "o.jsonl"), "--limit", "1"] + base) == 0
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 1
