"""One degenerate completion must not take the process down: a chain of more than ``AresConfig.max_steps`` steps is
refused before any memory that grows with its length is taken (issue: 100,000 steps took 9.9 GB), by every surface
that scores completions, with the outcome each documents: ``None`` from the rewards, dropped by the filter, an error
naming the record from ``ares-rerank score`` and ``score_chains``."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import pytest

from ares_rerank import AresConfig, Chain, FunctionBackbone
from ares_rerank.rerank.filters import AresFilter
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rewards import AresReward, AsyncAresReward
from ares_rerank.scoring import score_chains

STEPS = 100_000
LONG = "\n\n".join(f"step {i} holds" for i in range(STEPS))  # 1.4 MB
CAP = 300 * 2**20  # the bound on memory above the baseline


def constant(premises, hypotheses):
    return [0.9] * len(hypotheses)


@pytest.fixture
def reranker():
    return AresReranker(FunctionBackbone(constant))


def peak_while(fn):
    """``fn()``'s result and the peak of memory allocated (Python and numpy) while it ran."""
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_rewards_score_a_batch_of_eight_long_completions_as_none_within_the_memory_cap(reranker):
    prompts, completions = ["q"] * 9, [LONG] * 8 + ["a short one\n\nholds"]
    values, peak = peak_while(lambda: AresReward(reranker)(prompts, completions))
    assert values[:8] == [None] * 8 and values[8] == pytest.approx(0.9)  # the short one is still scored
    assert peak < CAP
    values, peak = peak_while(lambda: asyncio.run(AsyncAresReward(reranker)(prompts, completions)))
    assert values[:8] == [None] * 8 and values[8] == pytest.approx(0.9) and peak < CAP


def test_the_record_names_the_step_count_and_the_fix(reranker):
    record = reranker.score_pairs(["q"], [LONG], on_error="none")[0]
    assert record["score"] is None and f"has {STEPS} steps, more than max_steps=4096" in record["error"]
    with pytest.raises(ValueError, match="max_steps=4096"):
        reranker.score("q", [LONG])


def test_the_filter_drops_long_completions_within_the_memory_cap(reranker):
    keep, peak = peak_while(lambda: AresFilter(reranker, threshold=0.5)(
        {"prompt": ["q"] * 3, "completion": [LONG, "fine\n\nholds", LONG]}))
    assert keep == [False, True, False] and peak < CAP


def test_score_chains_refuses_before_allocating_and_max_steps_none_lifts_the_bound():
    chain = Chain(["q"], [f"s{i}" for i in range(5000)], id="long")
    for method in ("ares", "entail-prev"):
        with pytest.raises(ValueError, match="chain 'long' has 5000 steps, more than max_steps=4096"):
            score_chains([chain], FunctionBackbone(constant), method)
    short = Chain(["q"], [f"s{i}" for i in range(50)])
    unbounded = AresConfig(max_steps=None)
    assert len(score_chains([short], FunctionBackbone(constant), config=unbounded)[0].step_scores) == 50
    with pytest.raises(ValueError, match="max_steps=0"):
        AresConfig(max_steps=0)


def test_cli_score_refuses_a_long_record_before_loading_the_backbone(tmp_path, capsys):
    from ares_rerank.cli import main

    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"prompt": "q", "completion": "ok\n\nfine"}) + "\n"
                      + json.dumps({"prompt": "q", "completion": LONG}) + "\n")
    # a backbone path that does not exist: the length is refused first, so loading it is never tried
    code, peak = peak_while(lambda: main(["score", str(source), "--backbone", str(tmp_path / "no-such-head"),
                                          "--output", str(tmp_path / "out.jsonl"), "--no-progress"]))
    assert code == 2 and peak < CAP
    assert f"record 2: chain '2' has {STEPS} steps, more than max_steps=4096" in capsys.readouterr().err
    assert main(["score", str(source), "--backbone", "claimtrees-oracle", "--max-steps", "0", "--no-progress",
                 "--output", str(tmp_path / "o.jsonl")]) == 2
