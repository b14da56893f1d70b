"""load_backbone: kinds, auto-detection, special names and bad input; import stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from ares_rerank import load_backbone
from ares_rerank.backbones import loading
from ares_rerank.backbones.loading import detect_kind, select_device, select_dtype
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.backbones.prms import StepTagPRM


def test_detect_kind_from_architectures():
    assert detect_kind(["Qwen2ForTokenClassification"]) == "prm-trl"  # what TRL's PRMTrainer saves
    assert detect_kind(["Qwen2ForTokenClassification"], recorded="prm") == "prm"  # ares-rerank train prm's record
    assert detect_kind(["Qwen2ForProcessRewardModel"]) == "prm-qwen"  # loaded natively
    assert detect_kind(["Qwen2ForPrmModel"]) == "prm-skywork"
    assert detect_kind(["TinyForProcessRewardModel"]) == "prm"  # an unknown PRM architecture: remote code
    assert detect_kind(["DebertaV2ForSequenceClassification"]) == "nli"
    with pytest.raises(ValueError, match="kind='judge'.*kind='prm-math-shepherd'.*kind='prm-rlhflow'"):
        detect_kind(["LlamaForCausalLM"], "m")
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        detect_kind(["SomethingNew"], "m", remote_code=True)
    with pytest.raises(ValueError, match="cannot tell the backbone kind"):
        detect_kind(None, "m")


def test_unknown_kind_is_an_error(tiny_prm_path):
    with pytest.raises(ValueError, match="kind='reward' is unknown"):
        load_backbone(tiny_prm_path, kind="reward")


def test_special_names(tmp_path, monkeypatch):
    assert isinstance(load_backbone("claimtrees-oracle"), ClaimTreesOracle)
    monkeypatch.setattr(loading, "DEFAULT_HEAD_DIR", tmp_path / "default_head")
    with pytest.raises(ValueError, match="does not have yet"):
        load_backbone("default")
    with pytest.raises(ValueError, match="kind='nli'"):
        load_backbone("default", kind="judge")


def test_a_missing_or_empty_model_folder_is_a_clear_error(tmp_path, monkeypatch, capsys):
    """``--backbone ./no-such-folder`` used to end in transformers' "OSError: Repo id must use alphanumeric chars"
    (offline: "We couldn't connect to 'https://huggingface.co'"), and an empty folder in "Unrecognized model ... should
    have a `model_type` key in its config.json"; neither said the folder is missing or holds no model."""
    from ares_rerank.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in ("./no-such-folder", str(tmp_path / "no-such-folder"), "no-such-owner/no-such-model"):
        with pytest.raises(ValueError, match="is not a local folder and did not load as a Hugging Face hub id"):
            load_backbone(name)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="without config.json or adapter_config.json"):
        load_backbone(tmp_path / "empty")
    for name, error in (("", ValueError), (None, TypeError), (5, TypeError)):
        with pytest.raises(error, match="must name a backbone"):
            load_backbone(name)
    chains = tmp_path / "in.jsonl"
    chains.write_text('{"base_claims": ["I have A"], "steps": ["I have A"]}\n')
    assert main(["score", str(chains), "--backbone", "./no-such-folder", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "backbone './no-such-folder' is not a local folder" in err and "ARES_DEBUG" not in err, err


def test_kind_detected_from_a_token_classifier(tiny_prm_path):
    assert isinstance(load_backbone(tiny_prm_path, device="cpu", dtype="float32"), StepTagPRM)


def test_device_and_dtype_selection():
    assert select_device("cpu").type == "cpu"
    assert select_device("auto").type in ("cpu", "cuda", "mps")
    beyond = f"cuda:{torch.cuda.device_count()}"  # "cuda" on a CPU-only machine used to fail later in an AssertionError
    with pytest.raises(ValueError, match=f"device='{beyond}': this machine has {torch.cuda.device_count()} usable"):
        select_device(beyond)
    assert select_dtype("auto", torch.device("cpu")) == torch.float32  # bf16 was slower on CPU
    assert select_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    with pytest.raises(ValueError, match="dtype='int3'"):
        select_dtype("int3", torch.device("cpu"))
    with pytest.raises(ValueError, match="device='gpu!'"):
        select_device("gpu!")


def test_import_does_not_load_torch():
    code = "import sys, ares_rerank; from ares_rerank import load_backbone; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_hub_options_are_accepted_by_every_kind(tiny_prm_path, tiny_causal_lm_path, tiny_nli_path, tmp_path):
    # A local folder ignores them, as transformers does; hub ids use them (tests/backbones/test_hub.py).
    options = {"revision": "main", "token": False, "cache_dir": tmp_path, "local_files_only": True, "device": "cpu"}
    assert isinstance(load_backbone(tiny_prm_path, **options), StepTagPRM)
    assert type(load_backbone(tiny_causal_lm_path, kind="judge", **options)).__name__ == "LLMJudge"
    assert type(load_backbone(tiny_causal_lm_path, kind="prm-causal", step_tag="ki", **options)).__name__ == "CausalPRM"
    assert load_backbone(tiny_nli_path, **options).temperature == 1.0


def test_a_task_model_of_another_kind_is_refused_before_its_weights_load(tmp_path, tiny_prm_path, tiny_nli_path):
    """Heads that share weight names loaded without a missing key: Qwen2's token classifier as kind='nli' (both name
    their head score.*) or as a judge (tied lm_head), a BERT sequence classifier as kind='prm', all with meaningless
    scores (found by an audit, 2026-11-28)."""
    from ares_rerank import load_backbone

    for path, kind, saved, fix in ((tiny_prm_path, "nli", "ForTokenClassification", "kind='prm-trl' or 'prm'"),
                                   (tiny_prm_path, "judge", "ForTokenClassification", "kind='prm-trl' or 'prm'"),
                                   (tiny_nli_path, "prm", "BertForSequenceClassification", "kind='nli'")):
        with pytest.raises(ValueError, match=f"was saved as .*{saved}, not a model .*load it as {fix}"):
            load_backbone(str(path), kind=kind, device="cpu")
    assert load_backbone(str(tiny_prm_path), kind="prm", device="cpu") is not None


def test_checkpoints_that_would_score_silently_wrong_are_refused_with_the_folder_named(
        tmp_path, tiny_causal_lm_path, tiny_nli_path):
    """Found by an audit (2026-11-27): a causal LM loaded as kind='prm' got a random head; a folder without tokenizer
    files read every word as [UNK]; trust_remote_code='False' ran the checkpoint's code; a truncated safetensors
    file ended in safetensors' bare header error."""
    import shutil

    from ares_rerank import load_backbone

    with pytest.raises(ValueError, match=r"saved as Qwen2ForCausalLM, not a model AutoModelForTokenClassification "
                                         r"reads .*kind='judge', 'prm-math-shepherd', 'prm-rlhflow' or 'prm-causal'"):
        load_backbone(str(tiny_causal_lm_path), kind="prm", device="cpu")
    with pytest.raises(TypeError, match="trust_remote_code='False' must be True or False"):
        load_backbone(str(tiny_nli_path), kind="nli", device="cpu", trust_remote_code="False")
    no_tokenizer = tmp_path / "no-tokenizer"
    shutil.copytree(tiny_nli_path, no_tokenizer)
    for f in no_tokenizer.iterdir():
        if f.name.startswith(("tokenizer", "vocab", "special_tokens", "merges")):
            f.unlink()
    with pytest.raises(ValueError, match="has only its .* special tokens"):
        load_backbone(str(no_tokenizer), kind="nli", device="cpu")
    truncated = tmp_path / "truncated"
    shutil.copytree(tiny_nli_path, truncated)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"did not load \(.*\): a file in .*truncated.* may be truncated or corrupt"):
        load_backbone(str(truncated), kind="nli", device="cpu")


def test_a_folder_named_like_a_builtin_backbone_is_not_loaded_silently_in_its_place(tmp_path, monkeypatch):
    """A folder ./default (a saved head) was shadowed by the shipped head without a word (found by an audit)."""
    from ares_rerank import load_backbone

    monkeypatch.chdir(tmp_path)
    (tmp_path / "claimtrees-oracle").mkdir()
    with pytest.warns(UserWarning, match=r"built-in 'claimtrees-oracle', not the folder .*'./claimtrees-oracle'"):
        load_backbone("claimtrees-oracle")
