"""Issue 15, Python API: bad input gets one clear error of ours where it enters, every resource has a bound, and
cache / calibration files survive failures. Each test here failed on the code before the issue."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import tracemalloc

import pytest

from ares_rerank import AresConfig, Chain, FunctionBackbone, sample_size, score_chains
from ares_rerank.estimator import config as config_module
from ares_rerank.calibration import CALIBRATION_FILE, read_calibration
from ares_rerank.calibration import write_calibration
from ares_rerank.evaluation import ScoreCache, method_key, score_cached
from ares_rerank.evaluation import cache as cache_module
from ares_rerank.rerank.filters import AresFilter
from ares_rerank.chain import read_chains
from ares_rerank.rerank.reranker import AresReranker
from ares_rerank.rewards import AresReward
from helpers import HashBackbone


def word_share(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    out = []
    for p, h in zip(premises, hypotheses):
        known, words = set(" ".join(p).split()), h.split()
        out.append(sum(w in known for w in words) / max(1, len(words)))
    return out


@pytest.fixture
def reranker() -> AresReranker:
    return AresReranker(FunctionBackbone(word_share), prompt_split="lines")


# -- 1. chain input ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        ((["p"], None), {}, TypeError, r"Chain\(steps=None\).*list of strings"),
        ((None, ["a"]), {}, TypeError, r"Chain\(base_claims=None\).*\[\] for no context"),
        ((["p"], 5), {}, TypeError, r"Chain\(steps=5\) is int"),
        ((["p"], {"a": 1}), {}, TypeError, r"Chain\(steps=\{'a': 1\}\) is dict"),
        ((["p"], [1.5]), {}, TypeError, r"Chain\(steps\[0\]\) is float"),
        ((["p"], ["a"]), {"labels": "1"}, TypeError, r"Chain\(labels='1'\) is str"),
        ((["p"], ["a"]), {"labels": [0.5]}, ValueError, r"labels.*0\.5 at index 0"),
        ((["p"], ["a"]), {"labels": [None]}, ValueError, r"labels.*None at index 0"),
        ((["p"], ["a"]), {"meta": "x"}, TypeError, r"Chain\(meta='x'\) is str"),
    ],
)
def test_chain_fields_of_the_wrong_type_name_the_field_and_the_fix(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        Chain(*args, **kwargs)


def test_jsonl_fields_of_the_wrong_type_name_file_line_and_field(tmp_path):
    for record, field in [({"steps": 5}, "steps=5"), ({"steps": None}, "steps=None"),
                          ({"base_claims": None, "steps": ["a"]}, "base_claims=None"),
                          ({"steps": ["a"], "labels": "0"}, "labels='0'"), ({"steps": ["a", " "]}, r"steps\[1\]")]:
        path = tmp_path / "in.jsonl"
        path.write_text(json.dumps(record) + "\n")
        with pytest.raises(ValueError, match=rf"in\.jsonl:1 .*{field}"):
            read_chains(path)


def test_blank_step_is_an_error_naming_the_index_and_blank_base_claims_are_kept():
    with pytest.raises(ValueError, match=r"Chain 'c1' steps\[1\] is blank"):
        Chain(["p"], ["a", " \n\t"], id="c1")
    with pytest.raises(ValueError, match=r"steps\[0\] is blank"):
        Chain([], ["\u3000"])  # unicode whitespace is blank too, as for the reward (str.strip)
    assert Chain(["", "p"], ["a"]).base_claims == ("", "p")  # context that adds nothing to a premise
    assert Chain.from_text("p", "a\n\n  \n\nb").steps == ("a", "b")  # text splitting drops blank steps


def test_lone_surrogate_is_rejected_at_construction_naming_chain_and_index(reranker):
    (steps,) = [json.loads('["ok", "bad \\udcff"]')]  # valid JSON
    with pytest.raises(ValueError, match=r"Chain 'c7' steps\[1\] cannot be encoded as UTF-8"):
        Chain(["p"], steps, id="c7")
    with pytest.raises(ValueError, match=r"base_claims\[0\] cannot be encoded"):
        Chain(["\ud800"], ["a"])
    # The reward and the filter call such a completion unscorable and score the others.
    reward = AresReward(reranker)
    assert reward(["a", "a", "a"], ["a", "x \udcff", "a"]) == [1.0, None, 1.0]
    assert reward(["\udcff"], ["a"]) == [None]
    assert AresFilter(reranker, threshold=0.5).keep_mask(["a", "a"], ["a", "a\udcff"]) == [True, False]


def test_invalid_step_separator_regex_is_a_value_error():
    with pytest.raises(ValueError, match=r"step_separator='re:\(' is not a valid regular expression"):
        AresReranker(FunctionBackbone(word_share), step_separator="re:(")
    with pytest.raises(TypeError, match="step_separator=5"):
        AresReranker(FunctionBackbone(word_share), step_separator=5)


# -- 2. the trajectory bound -------------------------------------------------------------------------------------------
@pytest.mark.timeout(60)
def test_tiny_eps_is_refused_before_any_allocation():
    chain = Chain(["b"], [f"s{k}" for k in range(10)], id="long")
    config = AresConfig(eps=1e-4)  # auto: exact mode may still do without sampling, so the config is accepted
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ValueError) as info:
            score_chains([chain], HashBackbone(lo=0.3, hi=0.7), config=config)  # uncertain: auto falls back
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    for part in ("eps=0.0001", "delta=0.1", "264,915,869", "'long' of 10 steps", "max_samples=100,000", "raise eps"):
        assert part in message, (part, message)
    assert peak < 50 * 2**20 and time.perf_counter() - start < 30
    (confident,) = score_chains([chain], FunctionBackbone(lambda p, h: [1.0] * len(h)), config=config)
    assert confident.mode == "exact" and confident.step_scores == [1.0] * 10  # exact mode is not affected


def test_sample_mode_checks_the_bound_when_configured():
    with pytest.raises(ValueError, match=r"eps=1e-05.*max_samples=100,000"):
        AresConfig(eps=1e-5, mode="sample")  # numpy asked for 197 GiB before
    with pytest.raises(ValueError, match=r"eps=1e-300.*too many trajectories"):
        AresConfig(eps=1e-300, mode="sample")  # eps^2 underflows: not a ZeroDivisionError
    with pytest.raises(ValueError, match="eps=1e-200"):
        sample_size(10, eps=1e-200)
    assert AresConfig(eps=1e-5, mode="exact").max_samples == 100_000


@pytest.mark.parametrize("args, match", [((3, 0.1, 2), "delta=2"), ((3, 0.1, 0), "delta=0"), ((3, 0.1, -1), "delta=-1"),
                                         ((3, float("nan"), 0.1), "eps=nan"), ((1.5, 0.1, 0.1), "num_steps=1.5"),
                                         (("3", 0.1, 0.1), "num_steps='3'")])
def test_sample_size_refuses_values_outside_its_domain(args, match):
    """``sample_size(3, delta=2)`` returned 55 (a guarantee for a "probability" of 2), delta=-1 ended in math's bare
    "math domain error", and ``num_steps=1.5`` gave a count for a fractional chain."""
    with pytest.raises(ValueError, match=re.escape(f"sample_size({match})")):
        sample_size(*args)
    assert sample_size(10, 0.1, 0.1) == 265


def test_max_samples_raises_the_bound_and_changes_no_score_or_cache_key():
    chain = Chain(["b"], ["s0", "s1"])
    with pytest.raises(ValueError, match=r"N = 115,278 trajectories for a chain of 2 steps"):
        score_chains([chain], HashBackbone(), config=AresConfig(eps=0.004, mode="sample"))
    (big,) = score_chains([chain], HashBackbone(), config=AresConfig(eps=0.004, mode="sample", max_samples=200_000))
    assert big.num_samples == 115_278
    for mode in ("sample", "exact", "auto"):
        default = score_chains([chain], HashBackbone(), config=AresConfig(mode=mode, prior=0.9))[0]
        raised = score_chains([chain], HashBackbone(), config=AresConfig(mode=mode, prior=0.9, max_samples=10**9))[0]
        assert raised.step_scores == default.step_scores
    assert method_key("ares", AresConfig(max_samples=7)) == method_key("ares", AresConfig())
    assert method_key("ares", AresConfig()).startswith("ares-p1-eps0.1-delta0.1-auto-")


def test_cache_keys_change_with_the_estimator_revision(monkeypatch):
    from ares_rerank.evaluation import cache

    before = method_key("ares", AresConfig())
    monkeypatch.setattr(cache, "ESTIMATOR_REVISION", cache.ESTIMATOR_REVISION + 1)
    assert method_key("ares", AresConfig()) != before  # scores of an older estimator are never read back
    assert method_key("entail-prev") == "entail-prev"  # baselines do not depend on the estimator


@pytest.mark.parametrize("kwargs, word", [({"max_samples": 0}, "max_samples"), ({"max_samples": 2.5}, "max_samples"),
                                          ({"max_samples": True}, "max_samples"), ({"seed": -1}, "seed"),
                                          ({"seed": 1.5}, "seed"), ({"eps": 10**400}, "eps"),  # too large for a
                                          ({"prior": 10**400}, "prior"), ({"base_priors": [10**400]}, "base_priors"),
                                          ({"threshold": 10**400}, "threshold")])  # float: not an OverflowError
def test_new_config_checks_name_the_parameter(kwargs, word):
    with pytest.raises(ValueError, match=word):
        AresConfig(**kwargs)


def test_the_mask_matrix_has_a_memory_bound(monkeypatch):
    monkeypatch.setattr(config_module, "MAX_SAMPLE_BYTES", 10_000)
    chain = Chain([f"b{i}" for i in range(60)], [f"s{k}" for k in range(40)], id="wide")
    with pytest.raises(ValueError, match=r"'wide' of 40 steps and 100 claims needs a 335 x 100 mask matrix"):
        score_chains([chain], HashBackbone(), config=AresConfig(mode="sample"))


# -- 3. invalid values where they enter --------------------------------------------------------------------------------
@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), -float("inf"), 5, -0.1])
def test_filter_threshold_must_be_finite_and_in_the_score_range(reranker, threshold):
    with pytest.raises(ValueError, match="threshold="):
        AresFilter(reranker, threshold=threshold)


def test_filter_threshold_types_and_custom_scales(reranker):
    with pytest.raises(TypeError, match="threshold=True"):
        AresFilter(reranker, threshold=True)
    assert AresFilter(reranker, threshold=5.0, aggregate=lambda s: 10 * s[-1]).threshold == 5.0  # its own scale
    with pytest.raises(ValueError, match="threshold=nan"):
        AresFilter(reranker, threshold=float("nan"), aggregate=lambda s: 10 * s[-1])


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_reward_unscorable_value_must_be_finite(reranker, value):
    with pytest.raises(ValueError, match="unscorable_value="):
        AresReward(reranker, unscorable_value=value)


def test_reward_unscorable_value_none_or_a_number(reranker):
    with pytest.raises(TypeError, match="unscorable_value=True"):
        AresReward(reranker, unscorable_value=True)
    assert AresReward(reranker, unscorable_value=-1.0)(["a"], [""]) == [-1.0]
    assert AresReward(reranker)(["a"], [""]) == [None]


@pytest.mark.parametrize(
    "fn, error, match",
    [
        (lambda p, h: {0.7: "x"}, TypeError, "returned dict"),  # its keys were read as probabilities
        (lambda p, h: {str(i): 0.5 for i in range(len(h))}, TypeError, "returned dict"),
        (lambda p, h: ["0.5"] * len(h), TypeError, "str '0.5'"),
        (lambda p, h: 0.5, TypeError, "returned float"),
        (lambda p, h: None, TypeError, "returned NoneType"),
        (lambda p, h: {0.5}, TypeError, "returned set"),
        (lambda p, h: iter(lambda: 0.5, None), ValueError, "more than 1 values"),  # an endless iterator
    ],
)
def test_backbone_outputs_of_the_wrong_form_are_errors(fn, error, match):
    with pytest.raises(error, match=match):
        score_chains([Chain(["a"], ["b"])], FunctionBackbone(fn))
    with pytest.raises(error, match=match):
        FunctionBackbone(fn).entailment_probs([["a"]], ["b"])  # checked when called directly too


def test_backbone_outputs_arrays_and_bools_still_work():
    import numpy as np

    chain = Chain(["a"], ["b", "c"])
    for fn in (lambda p, h: np.full(len(h), 0.25, dtype=np.float32), lambda p, h: [True] * len(h)):
        (scores,) = score_chains([chain], FunctionBackbone(fn), config=AresConfig(mode="exact"))
        assert all(0.0 <= s <= 1.0 for s in scores.step_scores)


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"temperature": Infinity}', "temperature=inf"),
        ('{"temperature": NaN}', "temperature=nan"),
        ('{"temperature": -1}', "temperature=-1"),
        ('{"temperature": "1.3"}', "temperature='1.3'"),
        ('{"temperature": true}', "temperature=True"),
        ('{"temperature": 1.3, "bias": NaN}', "bias=nan"),
        ('{"temperature": 1.3, "bias": "0.5"}', "bias='0.5'"),
        ('{"temperature": 1.3, "max_length": "512"}', "max_length='512'"),
        ('{"temperature": 1.3, "max_length": 4}', "max_length=4"),
        ('{"temperature": 1.3, "premise_selection": 6}', "premise_selection=6"),
        ('{"temperature": 1.3, "entailment_label": [1]}', r"entailment_label=\[1\]"),
        ("[1.3]", "JSON list, not an object"),
        ('{"temperature": 1' + "0" * 400 + "}", "temperature=10{400}"),  # too large for a float: no OverflowError
        ('{"temperature": 1e-320}', "temperature=1e-320 must be a finite number >= 0.0001"),  # subnormal: NaN later
    ],
)
def test_calibration_file_values_are_checked_at_load_naming_file_and_key(tmp_path, text, match):
    (tmp_path / CALIBRATION_FILE).write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        read_calibration(tmp_path)
    assert str(tmp_path / CALIBRATION_FILE) in str(info.value)


def test_calibration_file_that_is_a_folder_is_an_error_not_an_uncalibrated_head(tmp_path):
    """A folder named ares_calibration.json was skipped as "no calibration": the head loaded uncalibrated, silently."""
    (tmp_path / CALIBRATION_FILE).mkdir()
    with pytest.raises(ValueError, match="is not a file") as info:
        read_calibration(tmp_path)
    assert str(tmp_path / CALIBRATION_FILE) in str(info.value)
    assert read_calibration(tmp_path / "no_such_folder") == {}


@pytest.mark.parametrize("link", ["dangling", "loop"])
def test_a_broken_link_at_the_calibration_file_is_an_error_naming_it(tiny_nli_path, tmp_path, link):
    """A Hub snapshot with a missing blob (a dangling link) loaded the head uncalibrated, silently."""
    from ares_rerank.backbones.nli import EntailmentHead

    folder = shutil.copytree(tiny_nli_path, tmp_path / "head")
    path = folder / CALIBRATION_FILE
    path.unlink(missing_ok=True)
    path.symlink_to(path if link == "loop" else tmp_path / "blobs" / "missing")
    expected = "links back to itself" if link == "loop" else "does not exist"
    with pytest.raises(ValueError, match=f"is a link to .*, which {expected}") as info:
        read_calibration(folder)
    assert str(path) in str(info.value) and "hf download" in str(info.value)
    with pytest.raises(ValueError, match=expected):
        EntailmentHead.from_pretrained(folder, device="cpu")


def test_a_huge_calibration_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A 2 GiB calibration file was read whole (4.5 GB of memory)."""
    from ares_rerank import calibration  # the calibration file format lives in calibration.py

    path = tmp_path / CALIBRATION_FILE
    with open(path, "wb") as handle:  # sparse: 2 GiB long, no disk used
        handle.truncate(2 << 30)
    tracemalloc.start()
    with pytest.raises(ValueError, match=r"is 2,147,483,648 bytes, more than a file of this kind can be") as info:
        read_calibration(tmp_path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert str(path) in str(info.value) and peak < 1 << 20
    path.write_text(json.dumps({"temperature": 1.3, "note": "x" * 1000}))
    assert read_calibration(tmp_path)["temperature"] == 1.3
    monkeypatch.setattr(calibration, "MAX_CALIBRATION_BYTES", 100)  # the bound itself, on a small file
    with pytest.raises(ValueError, match="more than a file of this kind can be"):
        read_calibration(tmp_path)


def test_nli_head_refuses_infinite_temperature_and_calibration_with_it(tiny_nli_path, tmp_path):
    from ares_rerank.backbones.nli import EntailmentHead

    folder = shutil.copytree(tiny_nli_path, tmp_path / "head")
    (folder / CALIBRATION_FILE).write_text('{"temperature": Infinity}')
    with pytest.raises(ValueError, match="temperature=inf"):
        EntailmentHead.from_pretrained(folder, device="cpu")
    head = EntailmentHead.from_pretrained(tiny_nli_path, device="cpu")
    with pytest.raises(ValueError, match="temperature=inf must be a finite number >= "):
        EntailmentHead(head.model, head.tokenizer, temperature=float("inf"))
    with pytest.raises(ValueError, match="bias=inf must be a finite number"):
        EntailmentHead(head.model, head.tokenizer, bias=float("inf"))


def test_max_length_beyond_the_position_table_is_an_error_at_construction(tiny_nli_path, tmp_path):
    from ares_rerank.backbones.nli import EntailmentHead

    table = EntailmentHead.from_pretrained(tiny_nli_path, device="cpu").model.config.max_position_embeddings
    with pytest.raises(ValueError, match=rf"max_length={table + 1} is longer than this model's position table"):
        EntailmentHead.from_pretrained(tiny_nli_path, device="cpu", max_length=table + 1)
    folder = shutil.copytree(tiny_nli_path, tmp_path / "head")
    write_calibration(folder, {"temperature": 1.0, "max_length": 100_000})  # e.g. copied from a longer model
    with pytest.raises(ValueError, match=rf"at most {table} positions"):
        EntailmentHead.from_pretrained(folder, device="cpu")
    assert EntailmentHead.from_pretrained(tiny_nli_path, device="cpu", max_length=table).max_length == table


def test_position_table_offsets_of_roberta_style_models(tiny_nli_path):
    import transformers

    from ares_rerank.backbones.tokenization import model_window, position_limit
    from ares_rerank.backbones.nli import EntailmentHead

    config = transformers.RobertaConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=16, max_position_embeddings=66)
    roberta = transformers.RobertaForSequenceClassification(config).eval()
    tokenizer = EntailmentHead.from_pretrained(tiny_nli_path, device="cpu").tokenizer
    assert position_limit(roberta) == 64  # positions start after the padding index
    with pytest.raises(ValueError, match="at most 64 positions"):
        EntailmentHead(roberta, tokenizer, max_length=65)
    assert model_window(roberta, object(), None) == 64  # a tokenizer without a limit: the table's, not 66
    qwen = transformers.Qwen2Config(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                    num_key_value_heads=1, intermediate_size=16)
    assert position_limit(transformers.Qwen2ForSequenceClassification(qwen)) is None  # rotary: no table


# -- 4. paths and caches -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ['{"peft_type": "LORA", "base_mod', "[1, 2]"])
def test_a_corrupt_adapter_config_is_an_error_naming_it(tmp_path, text):
    """A cut-off adapter_config.json was a bare JSONDecodeError naming no file."""
    from ares_rerank.backbones.hub import DEFAULT_HEAD_DIR
    from ares_rerank.backbones.loading import load_backbone

    folder = shutil.copytree(DEFAULT_HEAD_DIR, tmp_path / "head")
    (folder / "adapter_config.json").write_text(text)
    for kind in (None, "nli"):  # kind detection reads it first; a given kind reads it when locating the base
        with pytest.raises(ValueError, match="save or download the adapter again") as info:
            load_backbone(folder, kind=kind, device="cpu")
        assert str(folder / "adapter_config.json") in str(info.value)


def test_a_fifo_as_a_tokenizer_file_is_an_error_naming_it(tiny_nli_path, tmp_path):
    """A FIFO tokenizer.json gave transformers' generic "couldn't instantiate the backend tokenizer" (reading it
    would block until a writer came)."""
    from ares_rerank.backbones.loading import load_backbone

    folder = shutil.copytree(tiny_nli_path, tmp_path / "head")
    (folder / "tokenizer.json").unlink()
    os.mkfifo(folder / "tokenizer.json")
    with pytest.raises(ValueError, match="is a FIFO \\(named pipe\\), not a regular file") as info:
        load_backbone(folder, kind="nli", device="cpu")
    assert str(folder / "tokenizer.json") in str(info.value)


def test_staging_folders_of_killed_saves_are_removed_by_the_next_save(tmp_path):
    """A head save killed mid-way left .<name>.saving-* beside the head, and nothing ever removed it."""
    from ares_rerank.backbones.loading import load_backbone
    from ares_rerank.utils.io import atomic_folder

    dead = 4_194_305  # above Linux's largest pid: no such process
    folder = tmp_path / "head"
    left = {name: tmp_path / name for name in (f".head.saving-{dead}-a1", ".head.saving-b2", f".head.new-{dead}-c3",
                                                f".head.old-{dead}-d4", f".head.saving-{os.getppid()}-e5")}
    for path in left.values():
        path.mkdir()
        (path / "model.safetensors").write_bytes(b"x" * 100)
    old = time.time() - 7200
    os.utime(left[".head.saving-b2"], (old, old))  # no pid in its name: stale by its age
    load_backbone("default", device="cpu").save_pretrained(folder)
    assert {p.name for p in tmp_path.iterdir()} == {
        "head", f".head.new-{dead}-c3", f".head.old-{dead}-d4", f".head.saving-{os.getppid()}-e5"}
    with atomic_folder(folder) as fresh:  # the kind of save that train / calibrate make
        (fresh / "x.json").write_text("{}")
    assert {p.name for p in tmp_path.iterdir()} == {"head", f".head.saving-{os.getppid()}-e5"}  # still running


def test_write_calibration_refuses_a_symlinked_file_and_leaves_its_target(tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"temperature": 2.0}')
    model = tmp_path / "model"
    model.mkdir()
    (model / CALIBRATION_FILE).symlink_to(outside)
    with pytest.raises(ValueError, match="is a symlink .*never writes through or replaces a link"):
        write_calibration(model, {"temperature": 1.5})
    assert outside.read_text() == '{"temperature": 2.0}' and (model / CALIBRATION_FILE).is_symlink()
    assert read_calibration(model) == {"temperature": 2.0}  # reading follows links (hub snapshots are links)


def test_write_calibration_replaces_a_broken_temperature_and_cleans_stale_temps(tmp_path):
    (tmp_path / CALIBRATION_FILE).write_text('{"temperature": NaN, "note": "kept"}')
    stale, fresh = tmp_path / f".{CALIBRATION_FILE}.dead.tmp", tmp_path / f".{CALIBRATION_FILE}.live.tmp"
    stale.write_text("{")
    fresh.write_text("{")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)  # left by a run killed two days ago
    write_calibration(tmp_path, {"temperature": 1.25})
    assert read_calibration(tmp_path) == {"temperature": 1.25, "note": "kept"}
    assert not stale.exists() and fresh.exists()  # a write in progress elsewhere is left alone
    with pytest.raises(ValueError, match="max_length=2"):
        write_calibration(tmp_path, {"temperature": 1.25, "max_length": 2})  # never writes what loading refuses


@pytest.mark.parametrize("keys", [("..", "..", "x"), ("../..", "../../etc", "../m"), ("", ".", ".hidden"),
                                  ("/abs", "a/../../b", "..\\..")])
def test_cache_keys_cannot_escape_the_cache_root(tmp_path, keys):
    root = tmp_path / "cache"
    cache = ScoreCache(root)
    path = cache.path(*keys)
    assert path.resolve().is_relative_to(root.resolve())
    assert all(part not in (".", "..") and not part.startswith(".") for part in path.relative_to(root).parts)
    scores = score_chains([Chain(["a"], ["b"])], HashBackbone())
    cache.save(*keys, {"fp": scores[0]})
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]


def test_cache_keys_longer_than_a_file_name_do_not_collide(tmp_path):
    cache = ScoreCache(tmp_path)
    a, b = cache.path("t", "x" * 300 + "a", "m"), cache.path("t", "x" * 300 + "b", "m")
    assert a != b and len(a.parent.name) <= 150


def test_cache_folder_linked_outside_the_root_is_refused(tmp_path):
    root, outside = tmp_path / "cache", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (root / "task").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="outside the cache folder"):
        ScoreCache(root).path("task", "backbone", "ares")


WRONG_SHAPES = [
    "[1, 2]",
    '{"FP": 5}',
    '{"FP": {"step_scores": "x"}}',
    '{"FP": {"step_scores": [0.5], "evaluations": "many", "evaluations_per_step": [1]}}',
    '{"FP": {"step_scores": [0.5, 0.5], "evaluations": 1, "evaluations_per_step": [1]}}',  # not this chain's length
    '{"FP": {"step_scores": [NaN], "evaluations": 1, "evaluations_per_step": [1]}}',
    '{"FP": {"step_scores": [1], "evaluations": 1, "evaluations_per_step": [1], "x": 1}}',
    "\x00\xff not json",
]


@pytest.mark.parametrize("content", WRONG_SHAPES)
def test_cache_file_of_the_wrong_shape_counts_as_missing_and_refresh_recovers(tmp_path, content):
    chains = [Chain(["I have A"], ["I have A"], id="c")]
    cache, key = ScoreCache(tmp_path), ("task", "backbone")
    mkey = method_key("ares", AresConfig())
    path = cache.path(*key, mkey)
    path.parent.mkdir(parents=True)
    for file in (path, path.with_suffix(".json")):  # this format's file and the format before it
        file.write_text(content.replace("FP", chains[0].fingerprint()))
    scores, stats = score_cached(chains, HashBackbone(), "ares", AresConfig(), cache=cache, cache_path=key,
                                 progress=False)
    assert stats["scored"] == 1 and 0.0 <= scores[0].step_scores[0] <= 1.0
    again, stats = score_cached(chains, HashBackbone(), "ares", AresConfig(), cache=cache, cache_path=key,
                                progress=False)
    assert stats["cached"] == 1 and again[0].step_scores == scores[0].step_scores
    _, stats = score_cached(chains, HashBackbone(), "ares", AresConfig(), cache=cache, cache_path=key, refresh=True,
                            progress=False)
    assert stats["scored"] == 1


def test_cache_save_appends_without_reading_and_a_torn_line_is_skipped(tmp_path, monkeypatch):
    cache = ScoreCache(tmp_path)
    chains = [Chain(["a"], [f"s{i}"]) for i in range(3)]
    scores = score_chains(chains, HashBackbone())
    fps = [c.fingerprint() for c in chains]
    monkeypatch.setattr(cache_module, "_read_entries", lambda path: pytest.fail("save read the cache file"))
    monkeypatch.setattr(ScoreCache, "load", lambda *a: pytest.fail("save read the cache file"))
    cache.save("t", "b", "m", {fps[0]: scores[0]})
    path = cache.path("t", "b", "m")
    size = path.stat().st_size
    with open(path, "a") as handle:
        handle.write('{"' + fps[1] + '": {"step_sc')  # a save killed mid-line
    cache.save("t", "b", "m", {fps[2]: scores[2]})
    assert path.read_text().count("\n") == 3 and path.stat().st_size > size
    monkeypatch.undo()
    entries = cache.load("t", "b", "m")
    assert set(entries) == {fps[0], fps[2]}
    assert cache.lookup(entries, chains[2]).step_scores == scores[2].step_scores


def test_cache_reads_the_previous_format_and_later_saves_win(tmp_path):
    cache = ScoreCache(tmp_path)
    chain = Chain(["a"], ["b"])
    old, new = score_chains([chain], HashBackbone()), score_chains([chain], HashBackbone(salt="new"))
    path = cache.path("t", "b", "m")
    path.parent.mkdir(parents=True)
    path.with_suffix(".json").write_text(json.dumps({chain.fingerprint(): old[0].to_dict()}))  # one JSON object
    assert cache.lookup(cache.load("t", "b", "m"), chain).step_scores == old[0].step_scores
    cache.save("t", "b", "m", {chain.fingerprint(): new[0]})
    assert cache.lookup(cache.load("t", "b", "m"), chain).step_scores == new[0].step_scores


def test_cache_compacts_when_refreshes_pile_up_and_cleans_stale_temps(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "_COMPACT_MIN_STALE", 0)
    cache = ScoreCache(tmp_path)
    chains = [Chain(["a"], [f"s{i}"]) for i in range(4)]
    batch = dict(zip((c.fingerprint() for c in chains), score_chains(chains, HashBackbone())))
    path = cache.path("t", "b", "m")
    path.parent.mkdir(parents=True)
    stale = path.with_name(f".{path.name}.dead.tmp")
    stale.write_text("{")
    os.utime(stale, (time.time() - 2 * 86400,) * 2)
    for _ in range(3):  # three --refresh runs
        cache.save("t", "b", "m", batch)
    assert not stale.exists() and path.read_text().count("\n") == 3
    entries = cache.load("t", "b", "m")
    assert set(entries) == set(batch) and path.read_text().count("\n") == 1  # rewritten compacted
    assert cache.load("t", "b", "m") == entries


def test_cache_in_a_read_only_folder_is_still_read(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "_COMPACT_MIN_STALE", 0)
    cache = ScoreCache(tmp_path)
    chain = Chain(["a"], ["b"])
    scores = score_chains([chain], HashBackbone())
    for _ in range(3):
        cache.save("t", "b", "m", {chain.fingerprint(): scores[0]})
    monkeypatch.setattr(cache_module, "write_atomic", lambda *a: (_ for _ in ()).throw(PermissionError("read-only")))
    assert cache.lookup(cache.load("t", "b", "m"), chain).step_scores == scores[0].step_scores


def test_max_masks_has_an_upper_bound():
    from ares_rerank.estimator.config import MAX_MASKS

    with pytest.raises(ValueError, match=r"max_masks=.*\[1, 65536\]"):
        AresConfig(max_masks=MAX_MASKS + 1)
    assert AresConfig(max_masks=MAX_MASKS).max_masks == MAX_MASKS


def test_whole_chain_answers_are_checked_like_pair_answers():
    from ares_rerank import Chain, score_chains

    class DictJudge:
        def entailment_probs(self, premises, hypotheses):
            return [0.5] * len(hypotheses)

        def chain_step_probs(self, base_claims, steps):
            return {0.9: "a", 0.8: "b"}  # its keys would read as probabilities

    with pytest.raises(TypeError, match="returned dict"):
        score_chains([Chain(["p"], ["a", "b"])], DictJudge(), method="llm-judge")


def test_numpy_scalars_are_accepted_and_stored_as_python_numbers():
    import dataclasses
    import json

    import numpy as np

    from ares_rerank.estimator import config as settings
    from ares_rerank.estimator import AresConfig  # defined in config.py, still importable where users found it

    assert AresConfig is settings.AresConfig
    config = AresConfig(eps=np.float32(0.2), delta=np.float64(0.05), prior=np.float32(1.0), seed=np.int64(3),
                        max_masks=np.int32(8), prune_mass=np.float32(0.1), base_priors=np.array([1.0, 0.9]))
    assert type(config.eps) is float and type(config.seed) is int and type(config.max_masks) is int
    assert config.base_priors == (1.0, pytest.approx(0.9)) and all(type(p) is float for p in config.base_priors)
    json.dumps(dataclasses.asdict(config))  # records and cache keys serialize it
    with pytest.raises(TypeError):  # a list changed in place skipped every check (NaN scored 0.0 in exact mode)
        config.base_priors[0] = float("nan")
    for unordered in ({0.1, 0.9}, {0.1: 1.0, 0.9: 1.0}):  # a set has no order, a dict gave its keys
        with pytest.raises(ValueError, match="one per base claim in order"):
            AresConfig(base_priors=unordered)
    for bad in ({"eps": np.bool_(True)}, {"max_masks": 8.0}, {"seed": np.float64(1.0)}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            AresConfig(**bad)


def test_a_numpy_float32_setting_is_the_number_written_not_its_float32_neighbour():
    """AresConfig(prior=np.float32(0.95)) read 0.949999988079071: another config (cache key, results) and other
    scores than prior=0.95. A numpy float of less than double precision is read by its shortest decimal."""
    import dataclasses

    import numpy as np

    written = AresConfig(prior=0.95, eps=0.1, threshold=0.3, base_priors=[0.9, 0.8])
    as_float32 = AresConfig(prior=np.float32(0.95), eps=np.float32(0.1), threshold=np.float16(0.3),
                            base_priors=np.array([0.9, 0.8], dtype=np.float32))
    assert as_float32 == written and dataclasses.asdict(as_float32) == dataclasses.asdict(written)
    later = AresConfig()
    later.prior = np.float32(0.95)
    assert later.prior == 0.95
    chain = Chain(["We have a.", "We have b."], ["So a and b.", "Then c."])
    backbone = FunctionBackbone(lambda premises, hypotheses: [0.6] * len(hypotheses), name="constant")
    first = score_chains([chain], backbone, "ares", AresConfig(prior=np.float32(0.95), mode="exact"))[0]
    second = score_chains([chain], backbone, "ares", AresConfig(prior=0.95, mode="exact"))[0]
    assert first.step_scores == second.step_scores


def test_one_long_uncertain_chain_is_refused_at_max_evaluations_and_the_others_still_score():
    """Nothing bounded ARES's work on one chain: a 1,000-step chain under an uncertain backbone asked 490,000
    evaluations (72 s with a trivial function; hours with a model). The limit is checked before each backbone call."""
    import hashlib

    from ares_rerank import AresReranker, AresReward, Chain, FunctionBackbone, score_chains
    from ares_rerank.estimator.config import AresConfig

    def uncertain(premises, hypotheses):  # deterministic, in (0.05, 0.95): every mask matters
        return [0.05 + 0.9 * int(hashlib.md5(("|".join(p) + h).encode()).hexdigest()[:6], 16) / 0xFFFFFF
                for p, h in zip(premises, hypotheses)]

    calls = []
    backbone = FunctionBackbone(lambda p, h: calls.append(len(p)) or uncertain(p, h))
    long_chain = Chain(["The problem."], [f"Step {k} says something." for k in range(60)], id="long")
    with pytest.raises(ValueError, match=r"chain 'long': ARES needs more than max_evaluations=300 .* Raise "
                                         r"AresConfig\(max_evaluations=...\)"):
        score_chains([long_chain], backbone, config=AresConfig(max_evaluations=300))
    assert sum(calls) <= 300  # stopped before the call that would pass it
    assert score_chains([long_chain], backbone, config=AresConfig(max_evaluations=None))[0].evaluations > 300
    for bad in (0, -1, 1.5, True, "100"):
        with pytest.raises(ValueError, match="max_evaluations="):
            AresConfig(max_evaluations=bad)
    reward = AresReward(AresReranker(backbone, prompt_split="lines", config=AresConfig(max_evaluations=300)))
    short = "\n\n".join(f"Step {k} says something." for k in range(3))
    long = "\n\n".join(long_chain.steps)
    values = reward(prompts=["The problem."] * 2, completions=[long, short])
    assert values[0] is None and isinstance(values[1], float)


def test_the_sample_memory_bound_counts_the_per_trajectory_temporaries():
    """The bound counted the N x claims mask matrix only: a 1-step chain at N = 16.6 M was "33 MB" and peaked at
    683 MB (float64 draws, int64 sums and indices: ~40 bytes a trajectory), so the 1 GiB bound allowed ~20 GiB."""
    from ares_rerank.estimator.config import MAX_SAMPLE_BYTES, SAMPLE_ROW_BYTES, AresConfig, sample_size

    eps = 2.2e-4  # N ~ 31 M for one step: 31 MB of mask matrix, ~1.3 GB in all
    assert sample_size(1, eps, 0.1) * 2 < MAX_SAMPLE_BYTES < sample_size(1, eps, 0.1) * (1 + SAMPLE_ROW_BYTES)
    with pytest.raises(ValueError, match="bytes a trajectory of temporaries"):
        AresConfig(mode="sample", eps=eps, max_samples=10**10)


def test_internal_errors_and_silent_values_at_the_api_edges_are_clear_errors():
    """score_chains(None) raised "'NoneType' object is not iterable", method=['ares'] "unhashable type: 'list'";
    aggregate_scores read '12' as 12.0, [5.0, -3.0] averaged to 1.0, a dict by its keys, and took a custom
    aggregate's '0.7'; numpy integers were refused as batch sizes and top_k although AresConfig takes them."""
    import numpy as np

    from ares_rerank import AresFilter, AresReranker, AresReward, ClaimTreesOracle, aggregate_scores, score_chains

    with pytest.raises(TypeError, match=r"score_chains\(chains=None\) must be a list of Chain objects"):
        score_chains(None, ClaimTreesOracle())
    with pytest.raises(ValueError, match=r"method=\['ares'\]\) is unknown"):
        score_chains([], ClaimTreesOracle(), method=["ares"])
    for bad, error, message in (([None], TypeError, "holds None at step 0"), ("0.5", TypeError, "must be a list"),
                                (["12"], TypeError, "holds '12' at step 0"),
                                ([5.0, -3.0], ValueError, "lie in \\[0, 1\\]"),
                                ({0.1: 1.0}, TypeError, "must be a list"),
                                ([10**400], ValueError, "non-finite")):  # an int too large for a float
        with pytest.raises(error, match=message):
            aggregate_scores(bad, "mean")
    with pytest.raises(TypeError, match="returned '0.7'"):
        aggregate_scores([0.5], lambda scores: "0.7")
    assert aggregate_scores([0.5, np.float32(0.25)], "mean") == 0.375
    assert isinstance(aggregate_scores([1, 0], lambda scores: 1), float)
    with pytest.raises(ValueError, match="must be a finite number"):
        AresFilter(AresReranker(FunctionBackbone(lambda p, h: [0.5] * len(p))), threshold=10**400)
    backbone = FunctionBackbone(lambda premises, hypotheses: [0.5] * len(premises))
    reranker = AresReranker(backbone)
    assert score_chains([], backbone, batch_size=np.int64(2)) == []
    assert AresFilter(reranker, threshold=np.float32(0.1), top_k=np.int64(1)).top_k == 1
    assert AresReward(reranker, unscorable_value=np.float32(0.0)).unscorable_value == 0.0
    assert len(reranker.rank_batch(["p"], [["a", "b"]], top_k=np.int64(1))[0]) == 1
