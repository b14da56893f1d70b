"""Task loaders: shapes and labels from the shared data (PRMBench, BIG-Bench Mistake), ProcessBench format in tmp."""

from __future__ import annotations

import json
import re

import pytest
from helpers import shared_data

from ares_rerank.evaluation.tasks import load_task
from ares_rerank.evaluation.tasks.base import strip_numbering
from ares_rerank.evaluation.tasks.bigbench_mistake import bbm_chain
from ares_rerank.evaluation.tasks.prmbench import prmbench_chains


@pytest.fixture(scope="module")
def prmbench():
    shared_data("prmbench")
    return load_task("prmbench")


def test_prmbench_test_split_shapes_and_skipped_records(prmbench):
    assert prmbench.name == "PRMBench"
    assert len(prmbench.chains) == len(prmbench.twins) == 718 - 21
    assert prmbench.info["records_out_of_range"] == 21 and prmbench.info["records_skipped"] == 21
    kept = load_task("prmbench", out_of_range="ignore")
    assert len(kept.chains) == 718 and kept.info["records_skipped"] == 0
    for chain, twin in zip(prmbench.chains, prmbench.twins):
        assert chain.num_base == 1 and twin.labels == (0,) * twin.num_steps
        assert not any(re.match(r"^\d+\.\s", s) for s in chain.steps + twin.steps)
        assert all(s for s in chain.steps)


def test_prmbench_classifications_filter_and_an_unknown_one_is_named(prmbench):
    circular = load_task("prmbench", classifications=["circular"])
    assert circular.chains and {c.meta["classification"] for c in circular.chains} == {"circular"}
    with pytest.raises(ValueError, match=r"classifications=\['bogus'\] are not error types of PRMBench test: use "
                                         r"some of \[.*'circular'"):
        load_task("prmbench", classifications=["circular", "bogus"])  # was: 0 chains, then a CV error about --n


def test_prmbench_first_record_labels_and_questions(prmbench):
    chain, twin = prmbench.chains[0], prmbench.twins[0]
    assert chain.id == "prmbench-circular-prm_test_p1_0" and chain.meta["classification"] == "circular"
    assert chain.labels == (0, 0, 1, 1, 1, 0, 0)  # error_steps [3, 4, 5], 1-based
    assert chain.steps[0].startswith("Let's call the price of a pencil p")
    assert twin.steps[-1] == "That means a pencil costs 29 cents."
    assert prmbench.first_errors[0] == 2


def test_prmbench_record_conventions():
    record = {
        "idx": "x", "classification": "missing_condition", "question": "Q?", "original_question": "Q orig",
        "modified_question": "Q mod", "original_process": ["1. a", "2. b"],
        "modified_process": ["1. a", "", "3. c", "4. d"], "error_steps": [3, 7],
    }
    original, modified = prmbench_chains(record)
    assert original.base_claims == ("Q orig",) and modified.base_claims == ("Q mod",)
    assert modified.steps == ("a", "c", "d") and modified.labels == (0, 1, 0)  # the empty step 2 is dropped
    assert prmbench_chains(record, question="question")[1].base_claims == ("Q?",)
    assert strip_numbering("12. x = 3.5") == "x = 3.5" and strip_numbering("3.5 is x") == "3.5 is x"


def test_prmbench_filters_and_bad_options():
    shared_data("prmbench")
    subset = load_task("prmbench", classifications=["circular"], n=10)
    assert len(subset.chains) == 10 and {c.meta["classification"] for c in subset.chains} == {"circular"}
    with pytest.raises(ValueError, match="out_of_range"):
        load_task("prmbench", out_of_range="clip")
    with pytest.raises(ValueError, match="split"):
        load_task("prmbench", split="dev")


def test_prmbench_test_p2_files_load_with_split_test_p2(tmp_path):
    """PRMBench's own prm800k_test_p2_4o_*.jsonl files were refused: the file-name patterns knew only the p1 split."""
    record = {"idx": "prm_test_p2_0", "classification": "circular", "question": "Q?", "original_question": "Q?",
              "modified_question": "Q?", "original_process": ["1. a", "2. b"], "modified_process": ["1. a", "2. c"],
              "error_steps": [2]}
    folder = tmp_path / "prmbench"
    folder.mkdir()
    for kind in ("circular", "confidence"):
        (folder / f"prm800k_test_p2_4o_{kind}.jsonl").write_text(
            json.dumps({**record, "classification": kind}) + "\n")
    task = load_task("prmbench", path=folder, split="test_p2")
    assert [c.meta["classification"] for c in task.chains] == ["circular", "confidence"]
    assert task.chains[0].labels == (0, 1) and task.info["split"] == "test_p2" and "test_p2" in task.key
    with pytest.raises(FileNotFoundError, match=r"holds the test_p2 split: pass split='test_p2' \(--split test_p2\)"):
        load_task("prmbench", path=folder)  # the default split is test_p1
    single = load_task("prmbench", path=folder / "prm800k_test_p2_4o_circular.jsonl", split="test_p2")
    assert len(single.chains) == 1


def test_bigbench_mistake_shapes_and_labels():
    shared_data("bigbench_mistake")
    task = load_task("bbm")
    assert len(task.chains) == 2186 and len(task.first_errors) == 2186
    first = task.chains[0]  # dyck_languages, mistake_index 12 of 16 steps
    assert first.meta["first_error"] == 12 and first.labels == (0,) * 12 + (1,) * 4
    assert sum(e == -1 for e in task.first_errors) == 336 + 6 + 62 + 40 + 34  # null mistake_index
    only = load_task("bbm", tasks=["word_sorting"], labels="first", n=50)
    assert len(only.chains) == 50 and all(sum(c.labels) <= 1 for c in only.chains)
    with pytest.raises(ValueError, match="unknown tasks"):
        load_task("bbm", tasks=["chess"])


def test_bbm_chain_drops_empty_steps_and_moves_the_index():
    chain = bbm_chain({"input": "in", "steps": ["a", " ", "b", "c"], "mistake_index": 2})
    assert chain.steps == ("a", "b", "c") and chain.labels == (0, 1, 1) and chain.meta["first_error"] == 1
    clean = bbm_chain({"input": "in", "steps": ["a", "b"], "mistake_index": None})
    assert clean.labels == (0, 0) and clean.meta["first_error"] == -1


def test_processbench_format_file(tmp_path):
    records = [
        {"id": "p0", "problem": "2+2?", "steps": ["2+2=5", "so 5"], "label": 0},
        {"id": "p1", "problem": "3+3?", "steps": ["3+3=6", "", "so 6"], "label": -1},
        {"id": "p2", "problem": "1+1?", "steps": ["1+1=2", "times 2 is 5", "so 5"], "label": 1},
    ]
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    task = load_task("processbench", path=str(path))
    assert [c.id for c in task.chains] == ["p0", "p1", "p2"]
    assert task.first_errors == [0, -1, 1]
    assert [c.labels for c in task.chains] == [(1, 1), (0, 0), (0, 1, 1)]
    assert task.chains[1].steps == ("3+3=6", "so 6") and task.chains[0].base_claims == ("2+2?",)
    as_json = tmp_path / "tiny.json"
    as_json.write_text(json.dumps(records), encoding="utf-8")
    assert load_task("processbench", path=str(as_json), labels="first").chains[2].labels == (0, 1, 0)


def test_processbench_format_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "p", "steps": ["a"], "label": 3}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="label=3"):
        load_task("processbench", path=str(bad))
    bad.write_text(json.dumps({"question": "p", "steps": ["a"]}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="problem"):
        load_task("processbench", path=str(bad))
    with pytest.raises(FileNotFoundError, match="path="):
        load_task("processbench", path=str(tmp_path / "missing.jsonl"))


def test_data_files_of_another_format_name_the_file_and_the_missing_keys(tmp_path):
    """A ProcessBench (or ClaimTrees) file given to --task prmbench / bbm ended in "KeyError: 'error_steps'" (an
    internal-error line in the CLI); a non-object record in "cannot convert dictionary update sequence element #0";
    a non-UTF-8 file in the codec's bare message."""
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"problem": "p", "steps": ["a"], "label": -1}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"record 1 \(in other.jsonl\) lacks \['question', 'original_process'"):
        load_task("prmbench", path=str(other))
    with pytest.raises(ValueError, match=r"record 1 \(in other.jsonl\) lacks \['input'\]"):
        load_task("bbm", path=str(other))
    other.write_text("[1, 2]\n", encoding="utf-8")
    for task in ("prmbench", "bbm", "processbench"):
        with pytest.raises(ValueError, match="line 1 is a JSON list; expected one object per record"):
            load_task(task, path=str(other))
    other.write_bytes(b'{"problem": "caf\xe9"}\n')
    with pytest.raises(ValueError, match="other.jsonl' is not UTF-8"):
        load_task("processbench", path=str(other))
    broken = tmp_path / "broken.json"
    broken.write_text('[{"problem": "p"}', encoding="utf-8")
    with pytest.raises(ValueError, match="broken.json' is not JSON"):
        load_task("processbench", path=str(broken))


def test_synthetic_tasks_and_registry_errors():
    shared_data("recipe_graphs")
    ct = load_task("claimtrees", n=5, length=5, paper_compat=True)
    assert ct.name == "ClaimTrees-5 (paper_compat)" and len(ct.chains) == 5 and ct.info["length"] == 5
    ms = load_task("claimtrees", n=3, variant="multi_source", sources=3, depth=5)
    assert ms.name == "ClaimTrees-s3d5" and all(c.num_steps == 4 for c in ms.chains)
    with pytest.raises(ValueError, match=r"\['sources', 'depth'\] shape variant='multi_source' chains, not "
                                         r"variant='vanilla' ones"):
        load_task("claimtrees", n=3, sources=3, depth=5)  # was silently ten-state vanilla chains
    assert load_task("claimtrees", n=1).info["length"] == 10
    rec = load_task("recipes", n=3)
    assert rec.name == "CaptainCookRecipes" and rec.chains[0].num_steps == 17
    with pytest.raises(ValueError, match="no option"):
        load_task("recipes", n=3, length=10)
    with pytest.raises(ValueError, match="unknown"):
        load_task("gsm8k")


def test_subsample_is_seeded_ordered_and_keeps_twins(prmbench):
    sample = prmbench.subsample(25, seed=3)
    again = prmbench.subsample(25, seed=3)
    other = prmbench.subsample(25, seed=4)
    ids = [c.id for c in sample.chains]
    assert ids == [c.id for c in again.chains]
    assert ids != [c.id for c in other.chains]
    positions = [[c.id for c in prmbench.chains].index(i) for i in ids]
    assert positions == sorted(positions) and len(set(ids)) == 25
    assert [t.id for t in sample.twins] == [f"{i}-original" for i in ids]
    assert sample.first_errors == [prmbench.first_errors[p] for p in positions]
    assert sample.key != prmbench.key and sample.key != other.key
    assert sample.info["sample"] == {"k": 25, "seed": 3, "of": len(prmbench.chains)}
    assert prmbench.subsample(10_000) is prmbench
    with pytest.raises(ValueError, match="k=0"):
        prmbench.subsample(0)
