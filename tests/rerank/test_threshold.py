"""The flag threshold lives with what flags steps: ``AresReranker(threshold=)`` / ``RerankConfig.threshold`` (the
CLI's ``--threshold``), read by the records' first error, the rewards' logs, early rejection and the score command.
``AresConfig(threshold=)`` (where it lived, though the estimator never read it) still works for one release: it
warns and is forwarded to every consumer."""

from __future__ import annotations

import json
import warnings

import pytest

from ares_rerank import AresConfig, AresReranker, FunctionBackbone
from ares_rerank.chain import DEFAULT_THRESHOLD
from ares_rerank.cli import main
from ares_rerank.estimator import AresStream
from ares_rerank.rerank.config import RerankConfig
from ares_rerank.rewards.trl import AresReward
from ares_rerank.search import step_generator, stepwise_best_of_n


def constant(premises, hypotheses):
    """Every step is entailed with probability 0.4: a one-step chain's tau is 0.4 (prior 1, exact)."""
    return [0.4] * len(hypotheses)


BACKBONE = FunctionBackbone(constant)  # also the CLI's --backbone test_threshold:BACKBONE


def first_errors(reranker: AresReranker) -> list[int]:
    return [r["first_error"] for r in reranker.score_pairs(["a", "a"], ["so x", "so y"])]


def logged_flagged_frac(reranker: AresReranker) -> float:
    metrics: dict[str, float] = {}
    AresReward(reranker, name="r")(["a"], ["so x"], log_metric=metrics.__setitem__)
    return metrics["r/flagged_frac"]


def early_stopped(reranker: AresReranker) -> int:
    policy = step_generator(lambda prompt, steps, rng: None if len(steps) == 2 else f"so x{len(steps)}")
    return stepwise_best_of_n(policy, ["a"], reranker, n=2, rejection="hard")[0].stats.stopped


def test_the_reranker_holds_the_threshold_and_every_consumer_reads_it():
    default, low = AresReranker(BACKBONE), AresReranker(BACKBONE, threshold=0.3)
    assert default.threshold == DEFAULT_THRESHOLD == 0.5 and low.threshold == 0.3
    assert first_errors(default) == [0, 0] and first_errors(low) == [-1, -1]  # tau 0.4: flagged at 0.5, not at 0.3
    assert logged_flagged_frac(default) == 1.0 and logged_flagged_frac(low) == 0.0
    assert early_stopped(default) == 2 and early_stopped(low) == 0
    assert AresConfig().threshold is None  # the estimator's settings no longer carry it


def test_a_threshold_in_aresconfig_warns_and_is_forwarded_for_one_release():
    with pytest.warns(DeprecationWarning, match=r"AresConfig\(threshold=0.3\) is deprecated.*AresReranker"):
        config = AresConfig(threshold=0.3, mode="exact")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per config, not at every later field set
        config.eps = 0.2
        legacy = AresReranker(BACKBONE, config)
    assert legacy.threshold == 0.3
    assert first_errors(legacy) == [-1, -1] and logged_flagged_frac(legacy) == 0.0 and early_stopped(legacy) == 0
    stream = AresStream(BACKBONE, config)
    state = stream.start(["a"])
    stream.extend([state], ["so x"])
    assert state.first_error() == -1 and state.first_error(0.5) == 0
    assert AresReranker(BACKBONE, config, threshold=0.3).threshold == 0.3  # the same value twice is fine
    with pytest.raises(ValueError, match=r"AresReranker\(threshold=0.5\) and AresConfig\(threshold=0.3\) disagree"):
        AresReranker(BACKBONE, config, threshold=0.5)


@pytest.mark.parametrize("value", [1.5, -0.1, float("nan"), True, "0.5"])
def test_a_bad_threshold_is_refused_naming_it(value):
    with pytest.raises(ValueError, match=r"AresReranker\(threshold=.*\) must be a number in \[0, 1\]"):
        AresReranker(BACKBONE, threshold=value)
    with pytest.raises(ValueError, match=r"--threshold=.* must be a number in \[0, 1\]"):
        RerankConfig(threshold=value)


def test_the_cli_threshold_is_rerankconfigs_and_works_as_before(tmp_path, capsys):
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"id": "c", "prompt": "a", "completion": "so x"}) + "\n")
    backbone = ["--backbone", "test_threshold:BACKBONE", "--mode", "exact", "--no-progress"]
    flags = {}
    for threshold in ("0.5", "0.3"):
        out = tmp_path / f"{threshold}.jsonl"
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # the CLI never builds a deprecated AresConfig
            assert main(["score", str(data), *backbone, "--threshold", threshold, "--output", str(out)]) == 0
        flags[threshold] = json.loads(out.read_text())["flags"]
    assert flags == {"0.5": [True], "0.3": [False]}
    assert "threshold: 0.3" in capsys.readouterr().err
    assert main(["score", str(data), *backbone, "--threshold", "5"]) == 2
    assert "--threshold=5.0 must be a number in [0, 1]" in capsys.readouterr().err
