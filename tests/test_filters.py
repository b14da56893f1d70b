"""AresFilter: threshold and top-k per prompt, on lists and with datasets.Dataset.filter / .map(batched=True)."""

from __future__ import annotations

import pytest
from datasets import Dataset

from ares_rerank import FunctionBackbone
from ares_rerank.filters import AresFilter, filter_completions
from ares_rerank.rerank import AresReranker


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
