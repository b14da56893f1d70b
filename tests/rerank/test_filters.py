"""AresFilter: threshold and top-k per prompt, on lists and with datasets.Dataset.filter / .map(batched=True)."""

from __future__ import annotations

import pytest
from datasets import Dataset

from ares_rerank import FunctionBackbone
from ares_rerank.rerank.filters import AresFilter, filter_completions
from ares_rerank.rerank.reranker import AresReranker


def word_share(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """Share of the step's words that occur in the premises (0, 0.5 or 1 for the two-word steps below)."""
    out = []
    for p, h in zip(premises, hypotheses):
        known, words = set(" ".join(p).split()), h.split()
        out.append(sum(w in known for w in words) / len(words))
    return out


@pytest.fixture
def reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(word_share), prompt_split="lines")


PROMPTS = ["a b"] * 4 + ["x y"] * 3
COMPLETIONS = ["a b", "a z", "q z", "", "x y", "x y", "x q"]
SCORES = [1.0, 0.5, 0.0, None, 1.0, 1.0, 0.5]


def test_scores_and_threshold_on_lists(reranker):
    ares_filter = AresFilter(reranker, threshold=0.5)
    assert ares_filter.scores(PROMPTS, COMPLETIONS) == SCORES
    assert ares_filter.keep_mask(PROMPTS, COMPLETIONS) == [True, True, False, False, True, True, True]


def test_top_k_per_prompt_and_combined(reranker):
    top1 = AresFilter(reranker, top_k=1)
    assert top1.keep_mask(PROMPTS, COMPLETIONS) == [True, False, False, False, True, False, False]  # tie: earlier
    top2_strict = AresFilter(reranker, top_k=2, threshold=0.75)
    assert top2_strict.keep_mask(PROMPTS, COMPLETIONS) == [True, False, False, False, True, True, False]
    kept = filter_completions(reranker, PROMPTS, COMPLETIONS, top_k=2)
    assert [(k["index"], k["score"]) for k in kept] == [(0, 1.0), (1, 0.5), (4, 1.0), (5, 1.0)]
    assert kept[0] == {"index": 0, "prompt": "a b", "completion": "a b", "score": 1.0}


def test_conversational_rows_group_by_prompt(reranker):
    prompts = [[{"role": "user", "content": "a b"}]] * 2 + [[{"role": "user", "content": "x y"}]]
    completions = [[{"role": "assistant", "content": c}] for c in ("a z", "a b", "x y")]
    assert AresFilter(reranker, top_k=1).keep_mask(prompts, completions) == [False, True, True]


def test_dataset_filter_and_map_batched(reranker):
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS, "id": list(range(7))})
    kept = ds.filter(AresFilter(reranker, threshold=0.75), batched=True, batch_size=100)
    assert kept["id"] == [0, 4, 5]
    top1 = ds.filter(AresFilter(reranker, top_k=1), batched=True, batch_size=100)
    assert top1["id"] == [0, 4]
    scored = ds.map(AresFilter(reranker, threshold=0.5, score_column="s", keep_column="k").add_scores, batched=True)
    assert scored["s"] == SCORES
    assert scored["k"] == [True, True, False, False, True, True, True]


def test_grouped_rows_keep_candidates(reranker):
    ds = Dataset.from_dict({"prompt": ["a b", "x y"], "completion": [["q z", "a b", "a z"], ["x q", ""]]})
    out = ds.map(AresFilter(reranker, top_k=2).keep_candidates, batched=True)
    assert out["completion"] == [["a b", "a z"], ["x q"]]
    assert out["ares_score"] == [[1.0, 0.5], [0.5]]
    with pytest.raises(TypeError, match="expected a list of candidates"):
        AresFilter(reranker, top_k=1).keep_candidates({"prompt": ["a"], "completion": ["a b"]})


def test_validation(reranker):
    with pytest.raises(ValueError, match="needs threshold"):
        AresFilter(reranker)
    with pytest.raises(ValueError, match="top_k=0"):
        AresFilter(reranker, top_k=0)
    with pytest.raises(TypeError, match="must be an AresReranker"):
        AresFilter(FunctionBackbone(word_share), threshold=0.5)
    with pytest.raises(ValueError, match="no column 'completion'"):
        AresFilter(reranker, threshold=0.5)({"prompt": ["a"], "text": ["a"]})


def test_keep_mask_checks_the_scores_it_is_given(reranker):
    """Given scores were used as they came: one score for two prompts gave a one-entry mask, three for one prompt
    a mask of three, and 7.0 passed the threshold."""
    ares_filter = AresFilter(reranker, threshold=0.5, top_k=1)
    assert ares_filter.keep_mask(PROMPTS, COMPLETIONS, scores=SCORES) == ares_filter.keep_mask(PROMPTS, COMPLETIONS)
    with pytest.raises(ValueError, match="1 scores for 2 prompts and 2 completions"):
        ares_filter.keep_mask(["a", "b"], ["a", "b"], scores=[0.5])
    with pytest.raises(ValueError, match="3 scores for 1 prompts"):
        ares_filter.keep_mask(["a"], ["a"], scores=[0.5, 0.6, 0.7])
    for bad in (7.0, -0.1, float("nan"), "0.5", True):
        with pytest.raises(ValueError, match=r"scores\[1\]=.* must be a number in \[0, 1\] or None"):
            ares_filter.keep_mask(["a", "a"], ["a", "b"], scores=[0.5, bad])


# -- datasets' defaults, batch borders, fingerprint and num_proc ------------------------------------------------------
def test_dataset_filter_and_map_without_batched_true(reranker):
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS, "id": list(range(7))})
    assert ds.filter(AresFilter(reranker, threshold=0.75))["id"] == [0, 4, 5]  # one row per call
    scored = ds.map(AresFilter(reranker, threshold=0.5).add_scores)
    assert scored["ares_score"] == SCORES and scored["ares_keep"] == [True, True, False, False, True, True, True]
    conversational = Dataset.from_dict({"prompt": [[{"role": "user", "content": "a b"}]] * 2,
                                        "completion": [[{"role": "assistant", "content": c}] for c in ("a b", "q")]})
    assert len(conversational.filter(AresFilter(reranker, threshold=0.5))) == 1
    grouped = Dataset.from_dict({"prompt": ["a b", "x y"], "completion": [["q z", "a b", "a z"], ["x q", ""]]})
    assert grouped.map(AresFilter(reranker, top_k=1).keep_candidates)["completion"] == [["a b"], ["x q"]]
    with pytest.raises(ValueError, match=r"needs all rows of a prompt at once.*batched=True.*filter_dataset"):
        ds.filter(AresFilter(reranker, top_k=1))


def test_top_k_split_across_batch_borders_refuses_naming_the_fixes(reranker):
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS, "id": list(range(7))})
    top1 = AresFilter(reranker, top_k=1)
    for batch_size in (2, 3, 5):  # a border inside "a b" (rows 0-3) or "x y" (rows 4-6)
        with pytest.raises(ValueError, match=r"continue from the previous batch.*filter_dataset.*group_size="):
            ds.filter(top1, batched=True, batch_size=batch_size)
    assert ds.filter(top1, batched=True, batch_size=4)["id"] == [0, 4]  # borders between groups: correct
    assert ds.filter(top1, batched=True)["id"] == [0, 4]  # a new pass over the same data is not a split
    assert ds.filter(top1, batched=True)["id"] == [0, 4]
    shuffled = ds.select([0, 4, 1, 5, 2, 6, 3])
    with pytest.raises(ValueError, match=r"'a b' are not next to each other.*filter_dataset"):
        shuffled.filter(top1, batched=True)


def test_top_k_in_datasets_workers_is_refused_without_group_size(reranker):
    """With num_proc > 1 each worker sees one shard: a prompt split between two shards got a top-k in each and an
    extra row was kept without a word (found by an audit, 2026-11-28)."""
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS, "id": list(range(7))})
    with pytest.raises(ValueError, match=r"runs in a datasets worker process \(num_proc > 1\).*group_size="):
        ds.filter(AresFilter(reranker, top_k=1), batched=True, num_proc=2)
    assert ds.filter(AresFilter(reranker, threshold=0.5), batched=True, num_proc=2)["id"] == [0, 1, 4, 5, 6]  # fine


def test_filter_dataset_is_correct_for_any_order_batch_size_and_num_proc(reranker):
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS, "id": list(range(7))})
    top1 = AresFilter(reranker, top_k=1)
    shuffled = ds.shuffle(seed=3)
    for data, batch_size, num_proc in ((ds, 2, None), (shuffled, 1, None), (shuffled, 3, 2)):
        kept = top1.filter_dataset(data, batch_size=batch_size, num_proc=num_proc)
        # one row per prompt, the best (rows 4 and 5 tie: the earlier of the two in the data's order)
        assert sorted(zip(kept["prompt"], kept["completion"])) == [("a b", "a b"), ("x y", "x y")]
        assert "ares_score" not in kept.column_names
    both = AresFilter(reranker, top_k=2, threshold=0.75).filter_dataset(shuffled, batch_size=2, keep_scores=True)
    assert sorted(zip(both["id"], both["ares_score"])) == [(0, 1.0), (4, 1.0), (5, 1.0)]
    assert top1.filter_dataset(ds, batch_size=2)["id"] == [0, 4]  # in the data's order, ties to the earlier row
    assert len(top1.filter_dataset(ds.select([]))) == 0  # no rows: none kept (was datasets' missing-column error)


def test_group_size_checks_each_batch_holds_whole_groups(reranker):
    prompts = ["a b"] * 2 + ["x y"] * 2 + ["p q"] * 2
    ds = Dataset.from_dict({"prompt": prompts, "completion": ["a z", "a b", "x y", "x q", "z", "p q"],
                            "id": list(range(6))})
    grouped = AresFilter(reranker, top_k=1, group_size=2)
    for batch_size in (2, 4, 6):
        assert ds.filter(grouped, batched=True, batch_size=batch_size)["id"] == [1, 2, 5]
    with pytest.raises(ValueError, match=r"group_size=2\): rows 2-2 of this batch of 3 are not one whole group"):
        ds.filter(grouped, batched=True, batch_size=3)
    doubled = Dataset.from_dict({k: v[:4] * 2 for k, v in ds.to_dict().items()})  # shards of 4 rows: whole groups
    assert doubled.filter(grouped, batched=True, batch_size=2, num_proc=2)["id"] == [1, 2, 1, 2]
    with pytest.raises(ValueError, match="group_size=0"):
        AresFilter(reranker, top_k=1, group_size=0)


def exploding_backbone():
    """A backbone whose model (a torch module) raises when pickled."""
    import torch

    class Exploding(torch.nn.Linear):
        def __reduce_ex__(self, protocol):
            raise AssertionError("the model weights were pickled")

    backbone = FunctionBackbone(word_share)
    backbone.model = Exploding(4, 2)
    backbone.source = "org/some-head"
    return backbone


def test_fingerprint_hashes_settings_not_weights_and_objects_stay_picklable(reranker, tiny_nli_path, monkeypatch):
    import pickle

    from datasets.fingerprint import Hasher

    heavy = AresFilter(AresReranker(exploding_backbone(), prompt_split="lines"), threshold=0.5)
    with pytest.raises(AssertionError, match="weights were pickled"):
        pickle.dumps(heavy)  # ordinary pickling would carry the model ...
    digest = Hasher.hash(heavy)  # ... the datasets fingerprint never does
    assert digest == Hasher.hash(AresFilter(AresReranker(exploding_backbone(), prompt_split="lines"), threshold=0.5))
    assert digest != Hasher.hash(AresFilter(AresReranker(exploding_backbone(), prompt_split="lines"), threshold=0.6))
    assert Hasher.hash(heavy.add_scores) != Hasher.hash(heavy.keep_candidates)
    import ares_rerank.estimator

    # an estimator that scores differently never reuses a datasets cache of the old one
    monkeypatch.setattr(ares_rerank.estimator, "ESTIMATOR_REVISION", ares_rerank.estimator.ESTIMATOR_REVISION + 1)
    assert Hasher.hash(heavy) != digest
    monkeypatch.undo()
    # A real (tiny) head: two loads hash alike, a changed temperature does not; picklable for num_proc.
    first = AresFilter(AresReranker(str(tiny_nli_path), prompt_split="lines"), threshold=0.5)
    second = AresFilter(AresReranker(str(tiny_nli_path), prompt_split="lines"), threshold=0.5)
    assert Hasher.hash(first) == Hasher.hash(second)
    second.reranker.backbone.temperature = 2.0
    assert Hasher.hash(first) != Hasher.hash(second)
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS})
    one = ds.map(first.add_scores, batched=True, batch_size=3)
    assert ds.map(first.add_scores, batched=True, batch_size=3, num_proc=2)["ares_score"] == one["ares_score"]
    fresh = AresFilter(AresReranker(str(tiny_nli_path), prompt_split="lines"), threshold=0.5)  # loaded again
    assert ds.map(fresh.add_scores, batched=True, batch_size=3)._fingerprint == one._fingerprint  # a cache hit


def test_column_names_that_would_overwrite_data_are_refused(reranker):
    """score_column='completion' replaced the texts with their scores; filter_dataset overwrote, then dropped, a
    column of the user's named like the scores; a list passed as the dataset raised AttributeError (an audit)."""
    with pytest.raises(ValueError, match="must differ"):
        AresFilter(reranker, threshold=0.5, score_column="completion")
    ds = Dataset.from_dict({"prompt": PROMPTS, "completion": COMPLETIONS, "ares_score": list(range(7))})
    with pytest.raises(ValueError, match="already has a column 'ares_score'"):
        AresFilter(reranker, threshold=0.5).filter_dataset(ds)
    assert len(AresFilter(reranker, threshold=0.5, score_column="s").filter_dataset(ds)) == 5
    with pytest.raises(TypeError, match="takes a datasets.Dataset, got list"):
        AresFilter(reranker, threshold=0.5).filter_dataset([{"prompt": "a", "completion": "a"}])
    with pytest.raises(ValueError, match=r"batch_size=0\) must be a positive int"):
        AresFilter(reranker, threshold=0.5).filter_dataset(ds, batch_size=0)
