"""The shipped head: loads offline from the package (adapter + calibration) on the packaged MiniLM encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ares_rerank import load_backbone, score_chains
from ares_rerank.backbones.loading import DEFAULT_HEAD_DIR
from ares_rerank.data import load_claimtrees


@pytest.fixture(scope="module")
def head():
    return load_backbone("default", device="cpu")


def test_default_head_is_shipped_small_and_calibrated(head):
    files = {p.name for p in DEFAULT_HEAD_DIR.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "ares_calibration.json"} <= files
    assert sum(p.stat().st_size for p in DEFAULT_HEAD_DIR.iterdir()) < 2_000_000  # an adapter, not a model
    config = json.loads((DEFAULT_HEAD_DIR / "adapter_config.json").read_text())
    assert not Path(config["base_model_name_or_path"]).is_absolute()  # resolved from the package at load time
    calibration = json.loads((DEFAULT_HEAD_DIR / "ares_calibration.json").read_text())
    assert head.temperature == pytest.approx(calibration["temperature"])
    assert "default_head" in repr(head)  # names the adapter it came from, not only its base encoder


def test_default_head_scores_chains_under_ares(head):
    chains = load_claimtrees(3, length=5)
    for scores in score_chains(chains, head):
        assert len(scores.step_scores) == 4 and all(0.0 <= s <= 1.0 for s in scores.step_scores)
    passes = head.stats.forward_passes
    score_chains(chains, head)
    assert head.stats.forward_passes == passes  # cached


def test_ares_reward_loads_the_real_default_on_first_call(monkeypatch):
    from ares_rerank import rewards

    monkeypatch.delenv("ARES_RERANK_BACKBONE", raising=False)
    reward = rewards.AresReward()  # the lazy default, as `ares_reward` builds it
    chain = load_claimtrees(1, length=4)[0]
    prompt, completion = "\n".join(chain.base_claims), "\n\n".join(chain.steps)
    values = reward([prompt, prompt], [completion, "   "])
    assert values[1] is None and 0.0 <= values[0] <= 1.0


def test_loaded_adapter_is_merged_for_inference_and_saves_as_the_same_adapter(head, tmp_path):
    from safetensors.torch import load_file

    lora_layers = [m for m in head.model.modules() if hasattr(m, "merged") and hasattr(m, "lora_A")]
    assert lora_layers and all(m.merged for m in lora_layers)  # no LoRA path in the forward pass
    head.save_pretrained(tmp_path / "copy")
    shipped = load_file(DEFAULT_HEAD_DIR / "adapter_model.safetensors")
    saved = load_file(tmp_path / "copy" / "adapter_model.safetensors")
    assert set(saved) == set(shipped)
    assert all((saved[k] == shipped[k]).all() for k in shipped)  # the adapter itself, not merged weights
    again = load_backbone(str(tmp_path / "copy"), device="cpu")
    premises, hypotheses = [["A is true.", "A implies B."], ["C is true."]], ["B is true.", "D is true."]
    assert again.entailment_probs(premises, hypotheses) == pytest.approx(head.entailment_probs(premises, hypotheses))
