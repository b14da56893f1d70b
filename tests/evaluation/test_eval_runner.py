"""The runner end to end on small oracle runs, the score cache, the CLI entry points, plots and the perf script."""

from __future__ import annotations

import argparse
import json

import pytest

from helpers import shared_data

from ares_rerank.backbones.base import FunctionBackbone
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.cli import main as cli_main
from ares_rerank.estimator.config import AresConfig
from ares_rerank.evaluation import ScoreCache, evaluate, load_task, method_key, score_cached
from ares_rerank.scoring import score_chains
from eval.bench_perf import benchmark, perf_markdown


class CountingOracle:
    """The rule oracle, counting the pairs it judges."""

    def __init__(self) -> None:
        self.oracle, self.pairs = ClaimTreesOracle(), 0

    def entailment_probs(self, premises, hypotheses):
        self.pairs += len(hypotheses)
        return self.oracle.entailment_probs(premises, hypotheses)


def test_runner_end_to_end_writes_json_and_markdown(tmp_path, capsys):
    argv = ["--task", "claimtrees", "--length", "5", "--n", "10", "--backbone", "claimtrees-oracle",
            "--methods", "ares,entail-prev", "--output-dir", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache"),
            "--name", "run", "--no-progress"]
    assert cli_main(["eval", *argv]) == 0
    results = json.loads((tmp_path / "out" / "run.json").read_text())
    ares, prev = results["methods"]["ares"], results["methods"]["entail-prev"]
    assert ares["macro"]["f1"] == 1.0 and len(ares["macro"]["folds"]) == 5  # perfect oracle + ARES p=1: exact
    assert prev["macro"]["f1"] < 0.9  # propagation: later steps entailed by earlier unsound ones
    assert ares["efficiency"]["ratio_per_chain"] == pytest.approx(1 / 220)  # one evaluation per step, N(4) = 220
    assert results["task"]["num_chains"] == 10 and len(results["fold_prevalence"]) == 5
    table = (tmp_path / "out" / "run.md").read_text()
    assert "| ARES | 1.000 ± 0.000 |" in table and "Entail-Prev" in table
    assert "| ARES |" in capsys.readouterr().out
    # The cache now holds both methods; a second run scores nothing.
    assert cli_main(["eval", *argv]) == 0
    again = json.loads((tmp_path / "out" / "run.json").read_text())
    assert again["methods"]["ares"]["stats"]["scored"] == 0 and again["methods"]["ares"]["stats"]["cached"] == 10
    assert again["methods"]["ares"]["macro"] == results["methods"]["ares"]["macro"]


def test_cache_reuses_chains_and_scores_only_new_ones(tmp_path):
    cache, backbone, config = ScoreCache(tmp_path), CountingOracle(), AresConfig()
    chains = load_task("claimtrees", n=6, length=5).chains
    first, stats = score_cached(chains[:4], backbone, "ares", config, cache=cache, progress=False)
    assert stats["scored"] == 4 and backbone.pairs == 16
    again, stats = score_cached(chains, backbone, "ares", config, cache=cache, progress=False)
    assert stats == {**stats, "cached": 4, "scored": 2} and backbone.pairs == 16 + 8
    assert [s.step_scores for s in again[:4]] == [s.step_scores for s in first]
    assert [s.chain_id for s in again] == [c.id for c in chains]
    # Another method or other ARES settings get their own file; refresh re-scores.
    _, stats = score_cached(chains, backbone, "ares", AresConfig(prior=0.95), cache=cache, progress=False)
    assert stats["scored"] == 6
    _, stats = score_cached(chains, backbone, "ares", config, cache=cache, refresh=True, progress=False)
    assert stats["scored"] == 6 and stats["cached"] == 0
    assert cache.path("task", "backbone", method_key("ares", config)).is_file()
    assert method_key("ares", AresConfig(prior=0.95)) != method_key("ares", config)


def test_best_of_2_and_processbench_through_evaluate():
    shared_data("prmbench"), shared_data("bigbench_mistake")
    # 0.5 is exact in binary: equal means
    constant = FunctionBackbone(lambda premises, hypotheses: [0.5] * len(hypotheses), name="constant")
    prm = load_task("prmbench", n=6)
    res = evaluate(prm, constant, ["entail-prev"], backbone_name="constant", progress=False)
    bo2 = res["methods"]["entail-prev"]["best_of_2"]
    assert bo2["step_avg"]["accuracy"] == 0.0 and bo2["step_avg"]["ties"] == 6  # ties count as wrong
    assert "processbench" not in res["methods"]["entail-prev"]  # every modified chain has an error
    bbm = load_task("bbm", tasks=["multistep_arithmetic"], n=40)
    assert -1 in bbm.first_errors
    res = evaluate(bbm, constant, ["entail-base"], backbone_name="constant", progress=False)
    pb = res["methods"]["entail-base"]["processbench"]
    assert pb["correct_acc"] == 0.0 and pb["f1"] == 0.0  # a constant score flags step 0 of every chain


def test_evaluate_rejects_unknown_methods():
    task = load_task("claimtrees", n=5, length=5)
    with pytest.raises(ValueError, match="unknown"):
        evaluate(task, ClaimTreesOracle(), ["ares", "magic"], progress=False)


def test_evaluate_checks_its_arguments_and_a_cache_needs_a_backbone_name(tmp_path):
    from pathlib import Path

    from ares_rerank.evaluation import write_results

    task = load_task("claimtrees", n=5, length=5)
    cache = ScoreCache(tmp_path / "cache")
    with pytest.raises(ValueError, match="keys its scores by backbone_name"):  # it handed the oracle's scores on
        evaluate(task, FunctionBackbone(lambda P, H: [0.5] * len(H)), ["ares"], cache=cache, progress=False)
    with pytest.raises(TypeError, match=r"methods='ares'\) must be a list"):
        evaluate(task, ClaimTreesOracle(), "ares", progress=False)
    with pytest.raises(TypeError, match="must be an AresConfig, got dict"):
        evaluate(task, ClaimTreesOracle(), ["ares"], {"eps": 0.1}, progress=False)
    with pytest.raises(ValueError, match="batch_size=0"):
        evaluate(task, ClaimTreesOracle(), ["ares"], batch_size=0, progress=False)
    package = Path(__import__("ares_rerank").__file__).resolve().parent
    with pytest.raises(ValueError, match="inside the installed ares_rerank package"):
        ScoreCache(package / "cache")
    results = evaluate(task, ClaimTreesOracle(), ["ares"], progress=False)
    with pytest.raises(ValueError, match="inside the installed ares_rerank package"):
        write_results(results, package / "results", "x")
    assert not (package / "results").exists() and not (package / "cache").exists()


def test_ares_rerank_eval_subcommand(tmp_path, capsys):
    code = cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "5", "--n", "5", "--methods", "ares",
                     "--output-dir", str(tmp_path), "--no-cache", "--name", "cli", "--no-progress"])
    assert code == 0 and (tmp_path / "cli.json").is_file()
    assert "ClaimTrees-5" in capsys.readouterr().out


def test_eval_subcommand_sample(tmp_path, capsys):
    code = cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "5", "--n", "20", "--sample", "6", "--sample-seed",
                     "1", "--methods", "ares", "--output-dir", str(tmp_path), "--no-cache", "--name", "s",
                     "--no-progress"])
    results = json.loads((tmp_path / "s.json").read_text())
    assert code == 0 and results["task"]["info"]["sample"] == {"k": 6, "seed": 1, "of": 20}
    assert "sample 6/20" in capsys.readouterr().out


def test_eval_keeps_results_of_other_settings_unless_overwrite(tmp_path, capsys):
    """Every run of a task and backbone writes one file name; a run with another --n, --eps or --methods replaced
    the earlier results without a word."""
    base = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "claimtrees", "--length", "4", "--methods", "ares", "--output-dir", str(tmp_path),
            "--no-cache", "--no-progress"]
    assert cli_main([*base, "--n", "5"]) == 0
    path = next(tmp_path.glob("*.json"))
    assert cli_main([*base, "--n", "5"]) == 0  # the same settings: a rerun replaces it
    first = path.read_bytes()
    for other in (["--n", "6"], ["--n", "5", "--eps", "0.2"], ["--n", "5", "--methods", "ares,entail-prev"]):
        capsys.readouterr()
        assert cli_main([*base, *other]) == 2, other
        assert "holds the results of a run with other settings" in capsys.readouterr().err
        assert path.read_bytes() == first
    assert cli_main([*base, "--n", "6", "--overwrite"]) == 0
    assert json.loads(path.read_text())["task"]["num_chains"] == 6


def test_eval_length_beyond_the_names_names_the_flag(tmp_path, capsys):
    """--length 3000 was refused as "num_states=3000 ... use fewer states or longer names": no flag, no usable fix."""
    from ares_rerank.data.claimtrees import name_capacity

    assert name_capacity(2) == 936 and name_capacity(1) == 26
    assert cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "3000", "--output-dir", str(tmp_path),
                     "--no-progress"]) == 2
    assert "length=3000 is more states than the paper's two-character names give (936)" in capsys.readouterr().err


def test_eval_writes_under_the_working_directory_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "4", "--n", "5", "--methods", "ares", "--name", "w",
                     "--no-progress"])
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "ares-eval").iterdir()) == ["cache", "w.json", "w.md"]


def test_eval_name_and_cache_dir_are_checked_before_any_work(tmp_path, capsys):
    """``--name ../../x`` wrote its results two folders above --out, and ``--cache-dir`` naming a file failed only after
    the task and backbone were loaded, with "Not a directory: <file>/<task>/<backbone>" naming no flag."""
    out, blocker = tmp_path / "out", tmp_path / "file"
    blocker.write_text("x")
    base = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "claimtrees", "--length", "4", "--n", "5", "--methods", "ares", "--output-dir", str(out),
            "--no-progress"]
    for name in ("../../x", "a/b", "", ".."):
        assert cli_main([*base, "--name", name]) == 2
        assert f"--name={name!r} must be a file stem inside --out" in capsys.readouterr().err
    assert cli_main([*base, "--cache-dir", str(blocker)]) == 2
    assert f"--cache-dir={str(blocker)!r} is a file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "out"] and not any(out.iterdir())


@pytest.mark.parametrize("suffix", [".json", ".md"])
def test_a_folder_in_place_of_a_results_file_is_refused_before_any_work(tmp_path, capsys, suffix):
    """A folder named <out>/<name>.json failed after the work with "Is a directory: <out>/.r.json.xxxx.tmp"."""
    out = tmp_path / "out"
    (out / f"r{suffix}").mkdir(parents=True)
    code = cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "4", "--n", "5", "--methods", "ares", "--output-dir",
                     str(out), "--name", "r", "--no-progress"])
    assert code == 2
    assert f"--out: {str(out / f'r{suffix}')!r} is a folder where the results file is" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [f"r{suffix}"]  # no cache: nothing was scored


def test_backbone_names(tmp_path):
    from ares_rerank import load_backbone
    from ares_rerank.evaluation.backbones import backbone_key

    assert isinstance(load_backbone("claimtrees-oracle"), ClaimTreesOracle)
    assert isinstance(load_backbone("ares_rerank.backbones.oracle:ClaimTreesOracle"), ClaimTreesOracle)
    with pytest.raises(ValueError, match="cannot import"):
        load_backbone("ares_rerank.nothing:Here")
    assert backbone_key("some/model path", "nli") == "some_model_path-nli"


def test_cache_key_follows_the_files_of_a_local_head(tmp_path):
    from ares_rerank.evaluation.backbones import backbone_cache_key

    head = tmp_path / "head"
    head.mkdir()
    (head / "ares_calibration.json").write_text('{"temperature": 1.0}')
    first = backbone_cache_key(str(head), "nli")
    assert first == backbone_cache_key(str(head), "nli") and first.endswith(tuple("0123456789abcdef"))
    (head / "ares_calibration.json").write_text('{"temperature": 1.5}')  # a retrained head behind the same path
    assert backbone_cache_key(str(head), "nli") != first
    assert backbone_cache_key(str(head), "judge") != backbone_cache_key(str(head), "nli")
    assert backbone_cache_key("default") != "default"  # the shipped head's files are fingerprinted too
    assert backbone_cache_key("claimtrees-oracle") == "claimtrees-oracle"


def test_plots_write_pngs(tmp_path):
    from ares_rerank.evaluation.plots import plot_long_chains, plot_sample_efficiency, plot_step_scores

    png = b"\x89PNG"
    a = plot_long_chains({"ares": {5: (1.0, 0.0), 10: (0.9, 0.02)}}, tmp_path / "a.png", paper={"x": {5: 0.5}})
    b = plot_step_scores({"ares": [1.0, 0.0]}, [0, 1], tmp_path / "b.png")
    c = plot_sample_efficiency([("L=5", 4.0, 880.0)], tmp_path / "c.png")
    assert all(p.read_bytes()[:4] == png for p in (a, b, c))


def test_bench_perf_counts_backbone_work():
    chains = load_task("claimtrees", n=5, length=5).chains
    result = benchmark(chains, ClaimTreesOracle(), ("ares", "entail-prev"), AresConfig(), repeats=1)
    ares, prev = result["methods"]["ares"], result["methods"]["entail-prev"]
    assert (ares["calls"], ares["pairs"]) == (4, 20)  # one wave per step, one mask per chain and step
    assert (prev["calls"], prev["pairs"]) == (1, 20)
    assert ares["pairs_per_budget"] == pytest.approx(20 / (5 * 4 * 220))
    assert result["ares_over_entail_prev"] > 0


def test_bench_perf_counts_behind_the_selection_and_prints_the_certificate():
    chains = load_task("claimtrees", n=5, length=10).chains
    inner = CountingOracle()
    config = AresConfig(prior=0.95)
    result = benchmark(chains, inner, ("ares",), config, repeats=1, premise_selection="relevant")
    ares = result["methods"]["ares"]
    assert ares["pairs"] == inner.pairs  # counted where the oracle receives them, after selection
    assert ares["pairs_per_budget"] < 0.028  # half the authors' .056 at L = 10
    cert = ares["certificate"]
    assert cert["exact_chains"] + cert["stratified_chains"] + cert["sample_chains"] == 5
    assert "ARES certificate" in perf_markdown(result)


def test_bench_cost_rows_and_plot(tmp_path):
    from eval.bench_cost import cost_markdown, cost_rows, cost_series
    from ares_rerank.evaluation.plots import plot_cost_vs_length

    rows = cost_rows(ClaimTreesOracle(), [5, 8], n=3, prior=0.95, premise_selection="relevant")
    assert {(r["length"], r["method"]) for r in rows} == {
        (L, m) for L in (5, 8) for m in ("ARES auto", "ARES exact", "ARES sample", "Entail-Prev")}
    assert all(r["pairs_per_step"] >= 1.0 for r in rows)
    prev = [r for r in rows if r["method"] == "Entail-Prev"]
    assert all(r["pairs_per_step"] == 1.0 and r["certificate"] is None for r in prev)
    assert "hard bound" in cost_markdown(rows) or "eps = 0.1" in cost_markdown(rows)
    path = plot_cost_vs_length(cost_series(rows), tmp_path / "cost.png")
    assert path.stat().st_size > 1000


def test_bench_perf_times_a_model_backbone_cold_on_every_repeat(tiny_nli_path):
    from ares_rerank.backbones.nli import EntailmentHead

    chains = load_task("claimtrees", n=3, length=4).chains
    head = EntailmentHead.from_pretrained(tiny_nli_path)
    result = benchmark(chains, head, ("ares", "entail-prev"), AresConfig(), repeats=2)
    for method in ("ares", "entail-prev"):
        row = result["methods"][method]
        fresh = EntailmentHead.from_pretrained(tiny_nli_path)
        score_chains(chains, fresh, method, AresConfig())
        # every repeat of every method ran the encoder as a fresh head would, never reading an earlier run's cache
        assert row["encoder_pairs"] == fresh.stats.pairs_computed > 0 and row["forward_passes"] >= 1
    assert "encoder pairs" in perf_markdown(result)


def test_results_doc_renders_committed_real_backbone_runs(tmp_path):
    from eval.make_results import real_backbone_section, real_runs

    assert real_runs(tmp_path / "missing") == [] and "pending" in real_backbone_section([])
    task = load_task("claimtrees", n=5, length=5)
    results = evaluate(task, ClaimTreesOracle(), ["ares", "entail-prev"], progress=False)
    (tmp_path / "ct5.json").write_text(json.dumps(results))
    perf = benchmark(task.chains, ClaimTreesOracle(), repeats=1)
    perf.update({"task": "ClaimTrees-5", "backbone": "claimtrees-oracle", "prior": 1.0, "machine": "test box"})
    (tmp_path / "perf_ct5.json").write_text(json.dumps(perf))
    text = real_backbone_section(real_runs(tmp_path))
    assert "ClaimTrees-5" in text and "ARES" in text and "Entail-Prev" in text
    assert "Performance, ClaimTrees-5, 5 chains" in text and "test box" in text and "wall s" in text
    perf.update({"task": "ClaimTrees-6", "backbone_options": {"dtype": "bfloat16"}})
    (tmp_path / "perf_ct5.json").write_text(json.dumps(perf))
    assert 'backbone `claimtrees-oracle` with `{"dtype": "bfloat16"}`' in real_backbone_section(real_runs(tmp_path))
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(ValueError, match="neither"):
        real_backbone_section(real_runs(tmp_path))


def test_backbone_options_reach_load_backbone_and_the_cache_key(tmp_path, tiny_nli_path, capsys):
    from ares_rerank.evaluation.backbones import backbone_cache_key

    code = cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--length", "4", "--n", "5", "--methods", "entail-prev",
                        "--backbone", str(tiny_nli_path), "--kind", "nli", "--backbone-options",
                        '{"overlong_steps": "truncate", "max_length": 24}', "--output-dir", str(tmp_path),
                        "--name", "o",
                        "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    results = json.loads((tmp_path / "o.json").read_text())
    assert code == 0 and results["backbone_options"] == {"overlong_steps": "truncate", "max_length": 24}
    plain = backbone_cache_key(str(tiny_nli_path), "nli")
    assert backbone_cache_key(str(tiny_nli_path), "nli", {"overlong_steps": "truncate"}) != plain
    assert cli_main(["eval", "--backbone", "claimtrees-oracle",
                     "--task", "claimtrees", "--n", "2", "--backbone-options", "[1]", "--no-progress",
                     "--output-dir", str(tmp_path)]) == 2
    assert "--backbone-options must be a JSON object, not a JSON array" in capsys.readouterr().err


def test_dtype_flag_loads_the_model_in_that_dtype_and_keys_the_cache(tmp_path, tiny_nli_path, capsys):
    import torch

    from ares_rerank.commands import options

    argv = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "claimtrees", "--length", "4", "--n", "5", "--methods", "entail-prev", "--backbone",
            str(tiny_nli_path), "--kind", "nli", "--dtype", "bfloat16", "--output-dir", str(tmp_path), "--name", "bf",
            "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert cli_main(argv) == 0
    assert json.loads((tmp_path / "bf.json").read_text())["backbone_options"] == {"dtype": "bfloat16"}
    parser = argparse.ArgumentParser()
    options.add_backbone_arguments(parser)
    args = parser.parse_args(["--backbone", str(tiny_nli_path), "--kind", "nli", "--dtype", "bfloat16"])
    assert next(options.backbone_from_args(args).model.parameters()).dtype == torch.bfloat16
    both = parser.parse_args(["--dtype", "bfloat16", "--backbone-options", '{"dtype": "float32"}'])
    with pytest.raises(ValueError, match="--dtype=bfloat16 and --backbone-options dtype='float32' disagree"):
        options.backbone_options(both)
    same = parser.parse_args(["--dtype", "float32", "--backbone-options", '{"dtype": "float32", "batch_size": 4}'])
    assert options.backbone_options(same) == {"dtype": "float32", "batch_size": 4}
    assert options.backbone_options(parser.parse_args([])) == {}  # no --dtype: nothing passed (oracles take none)
    oracle = parser.parse_args(["--backbone", "claimtrees-oracle", "--dtype", "bfloat16"])
    with pytest.raises(ValueError, match=r"claimtrees-oracle does not take the load options \['dtype'\]"):
        options.backbone_from_args(oracle)


def test_paper_table_takes_real_backbone_cells_from_committed_runs(tmp_path):
    from eval.make_results import paper_table, real_cells, real_runs

    shared_data("recipe_graphs")
    task = load_task("recipes", n=5)
    constant = FunctionBackbone(lambda premises, hypotheses: [0.7] * len(hypotheses))
    results = evaluate(task, constant, ["entail-base"], backbone_name="const", progress=False)
    (tmp_path / "recipes.json").write_text(json.dumps(results))
    cells = real_cells(real_runs(tmp_path))
    f1 = results["methods"]["entail-base"]["macro"]["f1"]
    assert list(cells) == [("CaptainCookRecipes", "Entail-Base")]
    assert cells[("CaptainCookRecipes", "Entail-Base")].startswith(f"{f1:.3f}") and "N = 5" in cells[
        ("CaptainCookRecipes", "Entail-Base")]
    table = paper_table(cells)
    assert "`const` head, N = 5" in table and "| CaptainCookRecipes | ARES | 0.633 | pending" in table


def test_bench_perf_honours_sample(tmp_path, capsys):
    from eval.bench_perf import main

    out = tmp_path / "perf.json"
    assert main(["--task", "claimtrees", "--n", "12", "--length", "5", "--sample", "3", "--backbone",
                 "claimtrees-oracle", "--repeats", "1", "--no-progress", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["num_chains"] == 3 and "sample 3/12" in result["task"]  # not all 12 chains
    assert result["backbone_options"] == {} and "torch " in result["machine"]  # what the numbers were measured with
    capsys.readouterr()
    assert main(["--task", "claimtrees", "--n", "4", "--length", "5", "--sample", "9", "--backbone",
                 "claimtrees-oracle", "--repeats", "1", "--no-progress", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["num_chains"] == 4  # a sample as large as the task is the task, and says so
    assert "--sample 9 is not smaller than" in capsys.readouterr().err


def test_bench_floor_counts_sampling_and_exact_floors():
    import math

    import numpy as np

    from eval.bench_floor import floor_counts

    flat = (np.full(300, 0.5), [f"k{i}" for i in range(300)])  # every input new, every value the same
    split = (np.tile([0.0, 1.0], 150), ["a", "b"] * 150)  # two inputs of half the mass each
    floor, every = floor_counts([flat, split], eps=0.1, delta=0.1)
    range_term = math.ceil(math.log(1 / 0.05) / -math.log(0.8))  # delta' = delta / m with m = 2
    assert floor == range_term + 2  # the flat step needs only the range term; the split one is cheaper exactly
    assert every == 302
    looser, _ = floor_counts([flat, split], eps=0.1, delta=0.1, simultaneous=False)
    assert looser == math.ceil(math.log(1 / 0.1) / -math.log(0.8)) + 2 < floor


def test_bench_floor_trajectories_follow_the_backbone():
    from ares_rerank.chain import Chain
    from eval.bench_floor import sample_trajectories

    chain = Chain(["A"], ["B", "C", "D"])
    sure = sample_trajectories(chain, FunctionBackbone(lambda p, h: [1.0] * len(h)), num=50)
    assert [len(set(keys)) for _, keys in sure] == [1, 1, 1]  # every step accepted: one input per step
    assert sure[2][1][0] == (("A", "B", "C"), "D")
    never = sample_trajectories(chain, FunctionBackbone(lambda p, h: [0.0] * len(h)), num=50)
    assert never[2][1][0] == (("A",), "D") and all((v == 0).all() for v, _ in never)
    coin = sample_trajectories(chain, FunctionBackbone(lambda p, h: [0.5] * len(h)), num=400, seed=1)
    assert len(set(coin[2][1])) == 4  # B and C each kept in about half of the trajectories


def test_machine_description_names_the_gpu_only_where_torch_sees_one(monkeypatch):
    import torch

    from eval.bench_perf import machine_description

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "GPU" not in machine_description() and "torch " in machine_description()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "Test Accelerator 9000")
    assert ", GPU: Test Accelerator 9000, Python" in machine_description()


def test_the_old_out_flag_still_works_with_a_deprecation_warning(tmp_path, capsys):
    """``--out`` (the spelling before ``--output-dir``, one name for every results folder) still writes there."""
    argv = ["eval", "--backbone", "claimtrees-oracle",
            "--task", "claimtrees", "--length", "5", "--n", "10", "--backbone", "claimtrees-oracle",
            "--methods", "ares", "--out", str(tmp_path / "old"), "--no-cache", "--name", "run", "--no-progress"]
    assert cli_main(argv) == 0
    assert "--out is deprecated: use --output-dir" in capsys.readouterr().err
    assert (tmp_path / "old" / "run.json").is_file()
