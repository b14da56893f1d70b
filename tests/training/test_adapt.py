"""``ares-rerank adapt``: a trained tiny head continued on a user's chains, end to end through the command line."""

from __future__ import annotations

import json

import pytest

from ares_rerank.backbones.loading import load_backbone
from ares_rerank.data import load_claimtrees
from ares_rerank.data.claimtrees import ClaimTreesTemplates


# A wording of the user's own (not a training or held-out template): the chains carry gold labels only.
USER_WORDING = ClaimTreesTemplates(rule="Ratifying {p} endorses {q}.", fact="{p} is ratified.",
                                   step="{p} is ratified, and ratifying {p} endorses {q}; wherefore {q} is ratified.")


def _tiny_head(tmp_path, base):
    from ares_rerank.training.head import parse_args, train_head

    flags = {"base_model": str(base), "output_dir": str(tmp_path / "first"), "num_chains": 24, "max_steps": 2,
             "per_device_train_batch_size": 8, "eval_steps": 2, "save_steps": 2, "max_length": 256,
             "lora_r": 2, "lora_alpha": 4, "lora_target_modules": "query value", "disable_tqdm": "true",
             "calibration_method": "platt"}
    argv = [part for key, value in flags.items() for part in (f"--{key}", *str(value).split())]
    return train_head(*parse_args(argv)).folder


def _write_chains(path, n=12):
    chains = load_claimtrees(n, 5, start=5000, templates=USER_WORDING)
    path.write_text("".join(json.dumps({"id": c.id, "base_claims": list(c.base_claims), "steps": list(c.steps),
                                        "labels": list(c.labels)}) + "\n" for c in chains))
    return path


@pytest.mark.slow
def test_adapt_command_continues_a_head_with_replay_and_saves_it_with_its_card(tmp_path, tiny_nli_path, capsys):
    from ares_rerank.cli import main

    head = _tiny_head(tmp_path, tiny_nli_path)
    chains = _write_chains(tmp_path / "mine.jsonl")
    out = tmp_path / "adapted"
    capsys.readouterr()
    # the fresh wordings' guard and forgetting check are left out here (tests/training/test_adapt_guard.py has them)
    fresh = ["--guard_chains", "0", "--check_chains", "0"]
    assert main(["adapt", str(head), "--chains_file", str(chains), "--output_dir", str(out), "--max_steps", "3",
                 "--batch_size", "4", "--replay_chains", "6", "--progress", "false", *fresh]) == 0
    printed = capsys.readouterr().out
    assert "your held-out chains" in printed and "the head's own test split" in printed and "before" in printed

    saved = out / "head"
    record = json.loads((saved / "ares_calibration.json").read_text())
    adaptation = record["adaptation"]
    # the head's own settings were kept, none repeated on the command line
    assert record["premise_selection"] == "relevant:6" and record["max_length"] == 256
    assert json.loads((saved / "adapter_config.json").read_text())["r"] == 2
    assert record["val"]["method"] == "platt"
    first = json.loads((head / "ares_calibration.json").read_text())
    # trained through the head's own calibration, which stays as it was (no refit unless asked)
    assert (record["temperature"], record["bias"]) == (first["temperature"], first["bias"])
    assert adaptation["chains"] == {"train": 10, "val": 0, "heldout": 2}  # 12 chains split by chain id
    assert adaptation["replay"]["chains"] == 6 and adaptation["replay"]["pairs"] > 0
    # the tiny mix has fixed and composed wordings: three chains of each, and as many pairs replayed from each
    sources = adaptation["replay"]["sources"]
    assert set(sources) == {"fixed wordings", "composed wordings"} and len(set(sources.values())) == 1
    assert adaptation["replay"]["pairs"] == sum(sources.values())
    assert adaptation["replay"]["mix"]["num_chains"] == 24  # rebuilt from the recorded mix, not stored
    assert record["training"]["replay_mix"] == adaptation["replay"]["mix"]
    sets = adaptation["report"]["sets"]
    assert set(sets) == {"your held-out chains", "the head's own test split"}
    for entry in sets.values():
        assert set(entry["before"]) == set(entry["after"]) and entry["before"]
        assert all(0.0 <= v <= 1.0 for v in [*entry["before"].values(), *entry["after"].values()])
    assert "ARES macro-F1 at 0.5" in sets["your held-out chains"]["after"]
    assert adaptation["report"]["steps"] == 3 and adaptation["report"]["replay_rows"] == 3 * 2
    assert adaptation["arguments"]["replay_target"] == "head" and adaptation["arguments"]["adapted_weight"] == 0.7
    assert json.loads((out / "report.json").read_text())["sets"] == sets

    card = (saved / "README.md").read_text()
    assert "## Adapted" in card and "mine.jsonl" in card and "your held-out chains" in card
    assert f"{max(sources.values())} from each of composed wordings, fixed wordings" in card
    assert "averaged with the head's own weights (70% adapted)" in card

    backbone = load_backbone(str(saved), device="cpu")  # loads like any head, calibration applied
    assert backbone.temperature == pytest.approx(record["temperature"]) and backbone.bias == pytest.approx(
        record["bias"])
    chain = load_claimtrees(1, 4, start=9000, templates=USER_WORDING)[0]
    probs = backbone.predict([(list(chain.base_claims), chain.steps[0])])
    assert 0.0 <= float(probs[0]) <= 1.0

    # adapting the adapted head again replays the original generated mix, not the user's chains
    again = tmp_path / "again"
    assert main(["adapt", str(saved), "--chains_file", str(chains), "--output_dir", str(again), "--max_steps", "1",
                 "--batch_size", "4", "--replay_chains", "3", "--progress", "false", "--recalibrate", "true",
                 "--replay_target", "labels", *fresh]) == 0
    refit = json.loads((again / "head" / "ares_calibration.json").read_text())
    second = refit["adaptation"]
    assert second["replay"]["chains"] == 3 and second["replay"]["mix"]["num_chains"] == 24
    # --recalibrate holds val chains apart and refits the head's method on them and on the mix's val pairs
    assert second["chains"] == {"train": 9, "val": 1, "heldout": 2}
    assert refit["val"]["method"] == "platt" and refit["val"]["num_pairs"] > 0 and "calibrated_on" in refit
    assert refit["temperature"] == pytest.approx(refit["val"]["temperature"])

    # --replay_max_chars drops long pairs after the even draw: each source replays at most what it did without it
    short = tmp_path / "short"
    assert main(["adapt", str(head), "--chains_file", str(chains), "--output_dir", str(short), "--max_steps", "1",
                 "--batch_size", "4", "--replay_chains", "6", "--progress", "false", "--replay_max_chars", "150",
                 *fresh]) == 0
    limited = json.loads((short / "head" / "ares_calibration.json").read_text())["adaptation"]["replay"]
    assert set(limited["sources"]) == set(sources) and all(0 < n <= sources[k] for k, n in limited["sources"].items())
    assert 0 < limited["pairs"] == sum(limited["sources"].values()) < adaptation["replay"]["pairs"]
    shown = (f"{max(limited['sources'].values())} from each of" if len(set(limited["sources"].values())) == 1 else
             "by source: " + ", ".join(f"{n} {k}" for k, n in limited["sources"].items()))
    assert shown in (short / "head" / "README.md").read_text()


@pytest.mark.slow
def test_a_recipe_trained_head_replays_the_graphs_of_data_dir_or_says_where_to_get_them(tmp_path, tiny_nli_path,
                                                                                          capsys, monkeypatch):
    """The shipped head's mix has recipe chains: adapting rebuilds them from the recipe graphs, which the package
    does not ship. Without them the command stops before writing anything, naming --data_dir, where the graphs come
    from and --replay_share 0; with --data_dir (and no $ARES_DATA_DIR) it replays them."""
    import shutil

    from ares_rerank.cli import main
    from helpers import shared_data

    data = shared_data("recipe_graphs").parent
    head = tmp_path / "recipe-head"
    shutil.copytree(_tiny_head(tmp_path, tiny_nli_path), head)
    path = head / "ares_calibration.json"
    record = json.loads(path.read_text())
    record["training"]["mix"]["recipe_share"] = 0.5  # as the shipped head's record has it
    path.write_text(json.dumps(record))
    chains = _write_chains(tmp_path / "mine.jsonl")
    monkeypatch.delenv("ARES_DATA_DIR", raising=False)
    flags = ["--chains_file", str(chains), "--max_steps", "1", "--batch_size", "4", "--replay_chains", "4",
             "--progress", "false"]
    sound = tmp_path / "sound.jsonl"  # every step labelled sound: said before anything runs
    sound.write_text("".join(json.dumps({**json.loads(line), "labels": [0] * len(json.loads(line)["labels"])}) + "\n"
                             for line in chains.read_text().splitlines()))
    capsys.readouterr()
    assert main(["adapt", str(head), "--output_dir", str(tmp_path / "none"), *flags, "--chains_file", str(sound)]) == 2
    error = capsys.readouterr().err
    assert "trained on recipe chains" in error and "--data_dir" in error and "fallcat/ares" in error
    assert "--replay_share 0" in error and "ARES_DATA_DIR" in error
    assert not (tmp_path / "none").exists()  # stopped before the run folder
    assert "is labelled sound (0): the head learns nothing about telling them apart" in error

    out = tmp_path / "adapted"
    assert main(["adapt", str(head), "--output_dir", str(out), "--data_dir", str(data), *flags]) == 0
    adaptation = json.loads((out / "head" / "ares_calibration.json").read_text())["adaptation"]
    assert "recipe graphs" in adaptation["replay"]["sources"] and "data_dir" not in adaptation["arguments"]


def test_every_chain_of_a_mix_names_its_source():
    from ares_rerank.chain import Chain
    from ares_rerank.training.mix import MixArguments, chain_source, training_chains
    from ares_rerank.training.wordings import wording_kind

    chains = training_chains(MixArguments(num_chains=60, composed_share=0.4, random_wording_share=0.4))
    sources = [chain_source(c) for c in chains]
    assert set(sources) == {"fixed wordings", "composed wordings", "random wordings"}
    for chain, source in zip(chains, sources):
        assert source == f"{wording_kind(chain.meta['template'])} wordings"
    assert chain_source(Chain(["a"], ["b"], id="mix-3-recipe-ramen", meta={"oracle": "recipe"})) == "recipe graphs"
    assert chain_source(Chain(["a"], ["b"], id="mine-1")) == "given chains"
    assert (wording_kind("r12"), wording_kind("c1.0.2"), wording_kind("paper")) == ("random", "composed", "fixed")


def test_the_batch_plan_mixes_replay_and_cycles_your_pairs_evenly():
    from collections import Counter

    from ares_rerank.training.adapt_steps import batch_plan

    plan = batch_plan(n_user=10, n_replay=1000, steps=20, batch_size=16, replay_share=0.5, seed=0)
    assert len(plan) == 20 and all(len(mine) == 8 and len(theirs) == 8 for mine, theirs in plan)
    seen = Counter(i for mine, _ in plan for i in mine)
    assert set(seen) == set(range(10)) and max(seen.values()) - min(seen.values()) <= 1  # 160 rows over 10 pairs
    replayed = [i for _, theirs in plan for i in theirs]
    assert len(set(replayed)) == len(replayed) == 160  # without repeats while they last
    assert all(not theirs and len(mine) == 16 for mine, theirs in batch_plan(10, 0, 3, 16, 0.5, 0))
    assert all(len(theirs) == 3 for _, theirs in batch_plan(10, 2, 4, 4, 0.99, 0))  # one row of yours at least


def test_weight_averaging_moves_only_the_trained_weights_part_of_the_way_back():
    import torch

    from ares_rerank.training.adapt_steps import average_weights

    model = torch.nn.Linear(3, 2)
    model.bias.requires_grad_(False)
    initial = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    frozen = model.bias.detach().clone()
    with torch.no_grad():
        model.weight.add_(10.0)
        model.bias.add_(10.0)
    average_weights(model, initial, 0.7)
    assert torch.allclose(model.weight, initial["weight"] + 7.0)
    assert torch.equal(model.bias, frozen + 10.0)  # not trained, not averaged


def test_the_trained_log_odds_are_the_calibrated_probability_the_head_scores_with():
    import numpy as np
    import torch

    from ares_rerank.calibration import entailment_probs_from_logits
    from ares_rerank.training.adapt_steps import entailment_log_odds

    logits = torch.tensor([[0.3, -1.2, 2.0], [4.0, 1.0, -3.0], [-2.0, 0.5, 0.1]], dtype=torch.float64)
    for index, temperature, bias in ((1, 1.0, 0.0), (2, 1.7, -1.1), (0, 0.6, 0.4)):
        odds = entailment_log_odds(logits, index, temperature, bias)
        expected = entailment_probs_from_logits(logits.numpy(), index, temperature, bias)
        assert np.allclose(torch.sigmoid(odds).numpy(), expected)
    single = torch.tensor([[0.7], [-2.5]], dtype=torch.float64)
    expected = entailment_probs_from_logits(single.numpy()[:, 0], 1, 1.3, 0.2)
    assert np.allclose(torch.sigmoid(entailment_log_odds(single, 0, 1.3, 0.2)).numpy(), expected)


def test_adapt_refuses_bad_input_before_any_work(tmp_path, tiny_nli_path, capsys):
    from ares_rerank.cli import main
    from ares_rerank.training.adapt import adapt_head

    few = tmp_path / "few.jsonl"
    _write_chains(few, n=3)
    with pytest.raises(ValueError, match=r"chains_file=.*few.jsonl.*at least 5 chains"):
        adapt_head("default", few, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=r"replay_share=1.5 must lie in \[0, 1\)"):
        adapt_head("default", few, tmp_path / "out", replay_share=1.5)
    with pytest.raises(ValueError, match=r"adapted_weight=0.0 must lie in \(0, 1\]"):
        adapt_head("default", few, tmp_path / "out", adapted_weight=0.0)
    with pytest.raises(ValueError, match=r"replay_target='teacher' must be 'head'"):
        adapt_head("default", few, tmp_path / "out", replay_target="teacher")
    with pytest.raises(ValueError, match=r"HEAD=.*is a full model, not a LoRA adapter head"):
        adapt_head(str(tiny_nli_path), _write_chains(tmp_path / "ok.jsonl"), tmp_path / "out")
    assert main(["adapt", str(tmp_path / "nowhere" / "head"), "--chains_file", str(few), "--output_dir",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "HEAD=" in err and "neither 'default', a head folder nor a hub id" in err and "Traceback" not in err
    assert main(["adapt", "default", "--output_dir", str(tmp_path / "o")]) == 2
    assert "chains_file is required" in capsys.readouterr().err


@pytest.mark.parametrize("labels", [[float("nan"), 1], [0.5, 1], ["1", 0], [2, 0]], ids=["NaN", "0.5", "'1'", "2"])
def test_adapt_refuses_a_label_that_is_not_0_or_1_naming_the_line(tmp_path, capsys, labels):
    """A NaN (JSON's NaN), a fraction or a string label is refused before anything is trained or written."""
    from ares_rerank.cli import main

    chains = _write_chains(tmp_path / "mine.jsonl", n=6)
    rows = [json.loads(line) for line in chains.read_text().splitlines()]
    rows[2]["labels"] = labels + [0] * (len(rows[2]["steps"]) - len(labels))
    chains.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["adapt", "default", "--chains_file", str(chains), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "mine.jsonl:3" in err and "labels must be 0 (sound) or 1 (unsound)" in err
    assert not (tmp_path / "out").exists()


def test_the_unseen_wordings_of_the_measurement_are_in_no_mix_and_read_back():
    """training/unseen_wordings.py: no training form, held-out wording or random-wording word shares their verbs,
    and the rule oracle reads their chains back (the evaluation sets' labels are right)."""
    import re

    from ares_rerank.backbones.oracle import ClaimTreesOracle
    from ares_rerank.training.mix import MENTION_FORMS, MISSING_RULE_FORMS
    from ares_rerank.training.wordings import (FACT_FORMS, HELDOUT_TEMPLATES, RULE_FORMS, STEP_FORMS,
                                               TRAIN_TEMPLATES, wording_vocabulary)
    from training.unseen_wordings import UNSEEN_WORDINGS

    def words(*texts):
        return {w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t.replace("{p}", " ").replace("{q}", " "))}

    known = [*RULE_FORMS, *FACT_FORMS, *STEP_FORMS, *MENTION_FORMS, *MISSING_RULE_FORMS,
             *(x for t in [*TRAIN_TEMPLATES.values(), *HELDOUT_TEMPLATES.values()] for x in (t.rule, t.fact, t.step))]
    vocabulary = set(wording_vocabulary())
    common = {"is", "and", "since"}  # function words every wording shares
    for key, templates in UNSEEN_WORDINGS.items():
        own = words(templates.rule, templates.fact, templates.step) - common
        assert own and not own & words(*known), key
        assert not own & vocabulary, key  # no random wording can draw them
        chain = load_claimtrees(1, 6, start=7, templates=templates)[0]
        oracle = ClaimTreesOracle(templates)
        for k, step in enumerate(chain.steps):
            sound = list(chain.base_claims) + [s for s, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]]


def test_adapt_help_lists_its_options(capsys):
    from ares_rerank.cli import main

    with pytest.raises(SystemExit) as done:
        main(["adapt", "default", "--help"])
    text = capsys.readouterr().out
    assert done.value.code == 0 and "--chains_file" in text and "--replay_share" in text and "--lora_r" not in text
