"""Names that fail fast: a near miss of a built-in name is a typo ("did you mean"), and offline a hub id missing from
the cache is refused before transformers retries, naming the folder looked in and the command that downloads it."""

from __future__ import annotations

import json

import pytest

from ares_rerank.backbones import loading
from ares_rerank.backbones.loading import load_backbone


@pytest.fixture
def no_load(monkeypatch):
    """Any attempt to load a model file (hub or folder) fails the test: the refusals come before it."""
    def refuse(kind):
        raise AssertionError(f"a {kind} load was attempted")

    real = loading.backbone_class

    def no_from_pretrained(kind):  # the class's hub ids stay readable (family detection reads them, no file)
        return type("Refusing", (), {"hub_ids": getattr(real(kind), "hub_ids", ()),
                                     "from_pretrained": classmethod(lambda cls, *a, **k: refuse(kind))})

    monkeypatch.setattr(loading, "backbone_class", no_from_pretrained)
    monkeypatch.setattr(loading, "_detect_from_files", lambda name, kwargs: refuse("detection"))


@pytest.mark.parametrize(("typo", "meant"), [("claimtree-oracle", "claimtrees-oracle"), ("Default", "default"),
                                             ("defualt", "default"), ("claimtrees_oracle", "claimtrees-oracle"),
                                             (" default", "default")])
def test_a_near_miss_of_a_built_in_name_is_refused_with_did_you_mean(typo, meant, no_load):
    with pytest.raises(ValueError) as err:
        load_backbone(typo)
    assert f"did you mean {meant!r}?" in str(err.value) and repr(typo) in str(err.value)


def test_a_local_folder_with_a_near_miss_name_is_still_a_folder(tmp_path, monkeypatch, no_load):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Default").mkdir()
    with pytest.raises(FileNotFoundError, match="without config.json"):  # read as the folder it is, not a typo
        load_backbone("Default")


def test_offline_an_uncached_hub_id_fails_at_once_naming_the_cache_folder_and_the_download(tmp_path, monkeypatch,
                                                                                           no_load):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError) as err:
        load_backbone("someone/not-cached-prm", cache_dir=str(tmp_path))
    message = str(err.value)
    assert "'someone/not-cached-prm'" in message and str(tmp_path / "models--someone--not-cached-prm") in message
    assert "HF_HUB_OFFLINE=1" in message and "hf download someone/not-cached-prm" in message
    assert f"--cache-dir {tmp_path}" in message


def test_offline_a_cached_hub_id_goes_on_to_the_loader(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snapshot = tmp_path / "models--someone--cached" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    seen = []

    class Loaded:
        hub_ids = ()

        @classmethod
        def from_pretrained(cls, name, **kwargs):
            seen.append(name)
            return "loaded"

    monkeypatch.setattr(loading, "backbone_class", lambda kind: Loaded)
    assert load_backbone("someone/cached", kind="nli", cache_dir=str(tmp_path)) == "loaded"
    assert seen == ["someone/cached"]


def test_local_files_only_is_offline_too(tmp_path, monkeypatch, no_load):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    with pytest.raises(ValueError, match="local_files_only=True reads"):
        load_backbone("someone/elsewhere", kind="nli", cache_dir=str(tmp_path), local_files_only=True)


@pytest.mark.parametrize("argv", [["--backbone", "claimtree-oracle"], ["--backbone", "someone/not-cached"]])
def test_the_cli_says_it_in_one_line_without_a_traceback(tmp_path, capsys, monkeypatch, argv):
    from ares_rerank.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "cache"))
    chains = tmp_path / "chains.jsonl"
    chains.write_text(json.dumps({"base_claims": ["a"], "steps": ["b"]}) + "\n")
    assert main(["score", str(chains), *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and repr(argv[1]) in err
    assert ("did you mean 'claimtrees-oracle'" in err) if "oracle" in argv[1] else ("hf download someone/not-cached"
                                                                                    in err)
