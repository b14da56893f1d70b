"""Heads as Hub citizens, offline: load by hub id from a local Hub cache the test builds (``models--owner--name`` with
blobs, snapshots and refs, as ``hf_hub_download`` leaves them), revision / token / cache_dir / local_files_only passed
through, the calibration file fetched with the weights, model cards, and push_to_hub against a mocked HfApi."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ares_rerank import load_backbone
from ares_rerank.backbones.hub import (
    PACKAGED_ENCODER,
    PACKAGED_ENCODER_HUB_ID,
    HubOptions,
    hub_model_id,
    resolve_model_name,
)
from ares_rerank.backbones.judge import LLMJudge
from ares_rerank.backbones.nli import EntailmentHead
from ares_rerank.backbones.prms import StepTagPRM
from tiny_models import hub_cache_repo, tiny_bert_classifier


PREMISES = [["Rule: AB -> CD (meaning that if I have AB, I can derive CD)", "I have AB", "I have XY"], ["x = 3"]]
HYPOTHESES = ["I have AB, I use rule (AB -> CD) to derive CD, now I have CD", "x + 1 = 4"]
RECORD = {  # what training writes beside a head: provenance a re-save must keep
    "test": {"accuracy": 0.875, "ece_before": 0.081, "ece_after": 0.042, "num_pairs": 320, "temperature": 1.7},
    "training": {"steps": 40, "seed": 3, "mix": {"num_chains": 12, "templates": ["paper"]}},
    "note": "kept",
}


def save_head(folder: Path, base: Path, temperature: float, seed: int = 0, **record) -> Path:
    """A full head (tiny BERT, weights from ``seed``) saved with relevant:4 premises and a 64-token window."""
    weights = tiny_bert_classifier(folder.parent / f"m{seed}", seed=seed)
    model = AutoModelForSequenceClassification.from_pretrained(weights)
    head = EntailmentHead(model, AutoTokenizer.from_pretrained(base), temperature=temperature,
                          premise_selection="relevant:4", max_length=64, calibration=record)
    return head.save_pretrained(folder)


def save_adapter(folder: Path, base_id: str, base_path: Path) -> Path:
    """A LoRA adapter on ``base_path`` that names ``base_id`` as its base, with a calibration file."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = AutoModelForSequenceClassification.from_pretrained(base_path)
    config = LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["query", "value"], init_lora_weights=False)
    head = EntailmentHead(get_peft_model(base, config).eval(), AutoTokenizer.from_pretrained(base_path),
                          temperature=1.5, premise_selection="relevant:4", max_length=64)
    return head.save_pretrained(folder, save_tokenizer=False, base_model=base_id)


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "hub-cache"


def test_a_pushed_head_loads_back_by_hub_id_with_its_temperature_selection_and_window(tiny_nli_path, tmp_path, cache):
    folder = save_head(tmp_path / "saved", tiny_nli_path, temperature=1.7, **RECORD)
    hub_cache_repo(cache, "user/head", folder)
    head = load_backbone("user/head", cache_dir=cache, device="cpu")
    assert isinstance(head, EntailmentHead) and repr(head) == "EntailmentHead('user/head')"
    assert (head.temperature, head.selector.top_k, head.max_length) == (1.7, 4, 64)
    local = load_backbone(folder, device="cpu")
    pairs = list(zip(PREMISES, HYPOTHESES))
    assert head.predict(pairs) == pytest.approx(local.predict(pairs))
    assert head.calibration["note"] == "kept"


def test_revision_picks_a_commit_and_the_calibration_of_that_commit(tiny_nli_path, tmp_path, cache):
    old = hub_cache_repo(cache, "user/head", save_head(tmp_path / "v1" / "head", tiny_nli_path, 1.2, seed=1),
                         refs=("main", "v1"))
    new = hub_cache_repo(cache, "user/head", save_head(tmp_path / "v2" / "head", tiny_nli_path, 1.7, seed=2))
    assert old != new
    assert load_backbone("user/head", cache_dir=cache, device="cpu").temperature == 1.7  # main moved on
    by_commit = load_backbone("user/head", cache_dir=cache, revision=old, device="cpu")
    by_tag = load_backbone("user/head", cache_dir=cache, revision="v1", device="cpu")
    assert by_commit.temperature == by_tag.temperature == 1.2
    first = load_backbone(tmp_path / "v1" / "head", device="cpu")
    assert by_tag.entailment_probs(PREMISES, HYPOTHESES) == pytest.approx(first.entailment_probs(PREMISES, HYPOTHESES))


def test_hub_options_reach_every_file_the_head_reads(tiny_nli_path, tmp_path, cache, monkeypatch):
    import huggingface_hub

    head_commit = hub_cache_repo(cache, "user/head", save_head(tmp_path / "saved", tiny_nli_path, 1.7))
    calls = []
    download = huggingface_hub.hf_hub_download

    def spy(repo_id, filename, **kwargs):
        calls.append((repo_id, filename, kwargs))
        return download(repo_id, filename, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", spy)
    head = load_backbone("user/head", cache_dir=cache, token="hf_not_a_real_token", local_files_only=True,
                         device="cpu")
    assert head.temperature == 1.7
    assert {name for _, name, _ in calls} >= {"adapter_config.json", "config.json", "ares_calibration.json"}
    for _, _, kwargs in calls:
        assert kwargs["token"] == "hf_not_a_real_token" and kwargs["local_files_only"] is True
        assert kwargs["cache_dir"] == str(cache)
    # the probes read main; the calibration is read at the commit config.json came from
    probes = {"adapter_config.json", "config.json"}
    assert {kwargs["revision"] for _, name, kwargs in calls if name not in probes} == {head_commit}
    with pytest.raises(ValueError, match="revision=''"):
        HubOptions(revision="")
    with pytest.raises(TypeError, match="local_files_only"):
        load_backbone("user/head", cache_dir=cache, local_files_only="yes")


def test_hf_hub_cache_variable_names_the_cache(tiny_nli_path, tmp_path, cache):
    hub_cache_repo(cache, "user/head", save_head(tmp_path / "saved", tiny_nli_path, 1.7))
    code = ("from ares_rerank import load_backbone; h = load_backbone('user/head', device='cpu'); "
            "print(h.temperature, h.selector.top_k, h.max_length)")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == ["1.7", "4", "64"]


def test_a_hub_adapter_loads_on_the_base_its_config_names(tiny_nli_path, tmp_path, cache):
    hub_cache_repo(cache, "user/tiny-base", tiny_nli_path)
    adapter = save_adapter(tmp_path / "adapter", "user/tiny-base", tiny_nli_path)
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == "user/tiny-base"
    commit = hub_cache_repo(cache, "user/tiny-adapter", adapter)
    head = load_backbone("user/tiny-adapter", cache_dir=cache, revision=commit, device="cpu")  # SEQ_CLS -> nli
    assert isinstance(head, EntailmentHead) and hasattr(head.model, "peft_config")
    assert (head.temperature, head.selector.top_k, head.max_length) == (1.5, 4, 64)
    local = load_backbone(adapter, base_model=tiny_nli_path, device="cpu")
    assert head.entailment_probs(PREMISES, HYPOTHESES) == pytest.approx(local.entailment_probs(PREMISES, HYPOTHESES))


def test_an_adapter_repo_with_its_tokenizer_loads_offline_by_hub_id(tiny_nli_path, tmp_path, cache, monkeypatch):
    """A head pushed as an adapter (tokenizer included, no config.json) and fetched with snapshot_download failed
    offline: the tokenizer load asked the repo for config.json, and offline "not cached" was a failure."""
    from peft import LoraConfig, get_peft_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub_cache_repo(cache, "user/tiny-base", tiny_nli_path)
    torch.manual_seed(0)
    base = AutoModelForSequenceClassification.from_pretrained(tiny_nli_path)
    config = LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["query", "value"], init_lora_weights=False)
    pushed = EntailmentHead(get_peft_model(base, config).eval(), AutoTokenizer.from_pretrained(tiny_nli_path),
                            temperature=1.5).save_pretrained(tmp_path / "adapter", base_model="user/tiny-base")
    assert (pushed / "tokenizer.json").is_file() and not (pushed / "config.json").exists()
    hub_cache_repo(cache, "user/tiny-adapter", pushed)  # every file of the repo, as snapshot_download leaves them
    head = load_backbone("user/tiny-adapter", cache_dir=cache, device="cpu")
    assert head.temperature == 1.5 and hasattr(head.model, "peft_config")
    assert head.tokenizer.get_vocab() == AutoTokenizer.from_pretrained(pushed).get_vocab()
    local = load_backbone(pushed, base_model=tiny_nli_path, device="cpu")
    assert head.entailment_probs(PREMISES, HYPOTHESES) == pytest.approx(local.entailment_probs(PREMISES, HYPOTHESES))


def test_prm_and_judge_load_by_hub_id_and_revision(tiny_prm_path, tiny_causal_lm_path, cache, recwarn):
    commit = hub_cache_repo(cache, "user/prm", tiny_prm_path)
    assert isinstance(load_backbone("user/prm", cache_dir=cache, revision=commit, device="cpu"), StepTagPRM)
    hub_cache_repo(cache, "user/judge", tiny_causal_lm_path)
    judge = load_backbone("user/judge", kind="judge", cache_dir=cache, local_files_only=True, device="cpu")
    assert isinstance(judge, LLMJudge) and 0.0 <= judge.predict([("x = 3", "x + 1 = 4")])[0] <= 1.0
    assert not [w for w in recwarn if "ares_calibration" in str(w.message)]  # they read no calibration file


def test_a_repo_without_calibration_loads_uncalibrated_and_an_unknown_one_warns(tiny_nli_path, cache):
    hub_cache_repo(cache, "user/plain", tiny_nli_path, known_missing=("adapter_config.json", "ares_calibration.json"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the Hub said the repo has no calibration: nothing to warn about
        head = load_backbone("user/plain", cache_dir=cache, device="cpu")
    assert (head.temperature, head.selector.name) == (1.0, "all")
    hub_cache_repo(cache, "user/unknown", tiny_nli_path)  # cached weights, no word on the calibration file
    with pytest.warns(UserWarning, match="ares_calibration.json is not in the local Hub cache"):
        assert load_backbone("user/unknown", cache_dir=cache, device="cpu").temperature == 1.0


def test_packaged_encoder_names_resolve_offline_and_record_the_hub_id(tmp_path):
    packaged = resolve_model_name(PACKAGED_ENCODER)
    assert Path(packaged).is_dir() and resolve_model_name(PACKAGED_ENCODER_HUB_ID) == packaged
    assert resolve_model_name(PACKAGED_ENCODER_HUB_ID, revision="main") == PACKAGED_ENCODER_HUB_ID  # the Hub's
    assert hub_model_id(PACKAGED_ENCODER) == hub_model_id(packaged) == PACKAGED_ENCODER_HUB_ID
    assert hub_model_id("org/encoder") == "org/encoder"
    assert hub_model_id(tmp_path) is None and hub_model_id(None) is None


def test_model_card_has_hub_metadata_settings_metrics_and_loading(tiny_nli_path, tmp_path):
    folder = save_head(tmp_path / "saved", tiny_nli_path, 1.7, **RECORD)
    card = ModelCard((folder / "README.md").read_text())
    meta = card.data.to_dict()
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-classification"
    assert meta["license"] == "apache-2.0" and "ares-rerank" in meta["tags"]
    assert "base_model" not in meta  # a local base: no Hub id to name
    for text in ("| temperature | 1.7 |", "`relevant:4`", "64 tokens", "| test | 320 | 0.875 | 0.081 | 0.042 |",
                 "Intended use", "ClaimTrees", 'load_backbone("path/or/hub-id")', "CrossEncoder",
                 "the softmax of `logits / 1.7`, not"):
        assert text in card.text, text
    adapter = save_adapter(tmp_path / "adapter", "org/tiny-base", tiny_nli_path)
    meta = ModelCard((adapter / "README.md").read_text()).data.to_dict()
    assert (meta["library_name"], meta["base_model"]) == ("peft", "org/tiny-base")
    assert meta["base_model_relation"] == "adapter"
    assert "No held-out metrics" in (adapter / "README.md").read_text()


def test_model_card_names_every_selection_rule():
    from ares_rerank.backbones.card import model_card

    for selection, said in (("relevant-words:6", "at most 6 of the premises that share a distinctive token with the "
                                                 "step (numbers read as quantities), in chain order"),
                            ("relevant", "the premises that share a distinctive token with the step |"),
                            ("all", "the head reads every premise |")):
        card = model_card({"temperature": 1.3, "premise_selection": selection, "max_length": 512},
                          base_model=None, adapter=True)
        assert said in card and "a custom selection" not in card, selection


def test_resaving_a_loaded_head_keeps_its_calibration_provenance(tiny_nli_path, tmp_path):
    folder = save_head(tmp_path / "saved", tiny_nli_path, 1.7, **RECORD)
    head = load_backbone(folder, device="cpu")
    head.temperature = 1.9
    again = json.loads((head.save_pretrained(tmp_path / "again") / "ares_calibration.json").read_text())
    assert again["temperature"] == 1.9 and again["premise_selection"] == "relevant:4" and again["max_length"] == 64
    assert {key: again[key] for key in RECORD} == RECORD
    assert "| test | 320 | 0.875" in (tmp_path / "again" / "README.md").read_text()
    assert "| bias |" not in (tmp_path / "again" / "README.md").read_text()  # no Platt bias: no row
    head.bias = -0.8
    head.save_pretrained(tmp_path / "platt")
    card = (tmp_path / "platt" / "README.md").read_text()
    assert "| bias | -0.8 |" in card and "`logits / 1.9` with -0.8 added to the entailment logit" in card
    assert load_backbone(tmp_path / "platt", device="cpu").bias == -0.8


def test_push_to_hub_uploads_weights_calibration_and_card_with_transformers_defaults(tiny_nli_path, tmp_path,
                                                                                       monkeypatch):
    from huggingface_hub import HfApi

    calls: dict = {}

    def create_repo(self, repo_id, **kwargs):
        calls["create_repo"] = (repo_id, kwargs)
        return type("RepoUrl", (), {"repo_id": f"me/{repo_id}" if "/" not in repo_id else repo_id})()

    def create_branch(self, repo_id, **kwargs):
        calls["create_branch"] = (repo_id, kwargs)

    def upload_folder(self, **kwargs):
        folder = Path(kwargs["folder_path"])
        calls["upload_folder"] = kwargs
        calls["files"] = sorted(p.name for p in folder.iterdir())
        calls["card"] = (folder / "README.md").read_text()
        calls["calibration"] = json.loads((folder / "ares_calibration.json").read_text())
        return type("CommitInfo", (), {"commit_url": "https://huggingface.co/me/head/commit/abc", "pr_url": None})()

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_branch", create_branch)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    head = load_backbone(save_head(tmp_path / "saved", tiny_nli_path, 1.7, **RECORD), device="cpu")
    url = head.push_to_hub("head")
    assert url == "https://huggingface.co/me/head/commit/abc"
    assert calls["create_repo"] == ("head", {"private": None, "exist_ok": True})  # like transformers: not private
    assert "create_branch" not in calls
    upload = calls["upload_folder"]
    assert upload["repo_id"] == "me/head" and upload["commit_message"] == "Upload ARES entailment head"
    assert (upload["revision"], upload["create_pr"]) == (None, False)
    expected = {"README.md", "ares_calibration.json", "config.json", "model.safetensors", "tokenizer.json"}
    assert expected <= set(calls["files"])
    assert calls["calibration"]["temperature"] == 1.7 and calls["calibration"]["note"] == "kept"
    assert 'load_backbone("me/head")' in calls["card"]
    head.push_to_hub("me/head", private=True, revision="v2", create_pr=True, commit_message="v2")
    assert calls["create_repo"][1]["private"] is True and calls["create_branch"] == ("me/head", {"branch": "v2",
                                                                                               "exist_ok": True})
    assert (calls["upload_folder"]["revision"], calls["upload_folder"]["create_pr"]) == ("v2", True)


def test_save_head_records_the_hub_id_of_the_packaged_encoder(tiny_nli_path, tmp_path):
    from peft import LoraConfig, get_peft_model

    from ares_rerank.training.head import save_head as training_save_head

    model = get_peft_model(AutoModelForSequenceClassification.from_pretrained(tiny_nli_path),
                           LoraConfig(task_type="SEQ_CLS", r=2, target_modules=["query"]))
    calibration = {"temperature": 1.3, "entailment_label": 1, "premise_selection": "relevant:6", "max_length": 64,
                   "base_model": PACKAGED_ENCODER, **RECORD}
    folder = tmp_path / "head"
    training_save_head(model, AutoTokenizer.from_pretrained(tiny_nli_path), folder, calibration, PACKAGED_ENCODER)
    adapter_config = json.loads((folder / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == PACKAGED_ENCODER_HUB_ID
    saved = json.loads((folder / "ares_calibration.json").read_text())
    assert saved["base_model"] == PACKAGED_ENCODER_HUB_ID and saved["training"] == RECORD["training"]
    assert not (folder / "tokenizer.json").exists()  # the packaged encoder's tokenizer ships with the package
    assert ModelCard((folder / "README.md").read_text()).data.base_model == PACKAGED_ENCODER_HUB_ID
