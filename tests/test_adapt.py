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
    assert main(["adapt", str(head), "--chains_file", str(chains), "--output_dir", str(out), "--max_steps", "3",
                 "--batch_size", "4", "--replay_chains", "6", "--progress", "false"]) == 0
    printed = capsys.readouterr().out
    assert "your held-out chains" in printed and "the head's own test split" in printed and "before" in printed

    saved = out / "head"
    record = json.loads((saved / "ares_calibration.json").read_text())
    adaptation = record["adaptation"]
    # the head's own settings were kept, none repeated on the command line
    assert record["premise_selection"] == "relevant:6" and record["max_length"] == 256
    assert json.loads((saved / "adapter_config.json").read_text())["r"] == 2
    assert record["val"]["method"] == "platt"
    assert adaptation["chains"] == {"train": 9, "val": 1, "heldout": 2}  # 12 chains split by chain id
    assert adaptation["replay"]["chains"] == 6 and adaptation["replay"]["pairs"] > 0
    assert adaptation["replay"]["mix"]["num_chains"] == 24  # rebuilt from the recorded mix, not stored
    assert record["training"]["replay_mix"] == adaptation["replay"]["mix"]
    sets = adaptation["report"]["sets"]
    assert set(sets) == {"your held-out chains", "the head's own test split"}
    for entry in sets.values():
        assert set(entry["before"]) == set(entry["after"]) and entry["before"]
        assert all(0.0 <= v <= 1.0 for v in [*entry["before"].values(), *entry["after"].values()])
    assert "ARES macro-F1 at 0.5" in sets["your held-out chains"]["after"]
    assert adaptation["report"]["steps"] == 3
    assert json.loads((out / "report.json").read_text())["sets"] == sets

    card = (saved / "README.md").read_text()
    assert "## Adapted" in card and "mine.jsonl" in card and "your held-out chains" in card

    backbone = load_backbone(str(saved), device="cpu")  # loads like any head, calibration applied
    assert backbone.temperature == pytest.approx(record["temperature"]) and backbone.bias == pytest.approx(
        record["bias"])
    chain = load_claimtrees(1, 4, start=9000, templates=USER_WORDING)[0]
    probs = backbone.predict([(list(chain.base_claims), chain.steps[0])])
    assert 0.0 <= float(probs[0]) <= 1.0

    # adapting the adapted head again replays the original generated mix, not the user's chains
    again = tmp_path / "again"
    assert main(["adapt", str(saved), "--chains_file", str(chains), "--output_dir", str(again), "--max_steps", "1",
                 "--batch_size", "4", "--replay_chains", "3", "--progress", "false"]) == 0
    second = json.loads((again / "head" / "ares_calibration.json").read_text())["adaptation"]
    assert second["replay"]["chains"] == 3 and second["replay"]["mix"]["num_chains"] == 24


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
    with pytest.raises(ValueError, match=r"HEAD=.*is a full model, not a LoRA adapter head"):
        adapt_head(str(tiny_nli_path), _write_chains(tmp_path / "ok.jsonl"), tmp_path / "out")
    assert main(["adapt", str(tmp_path / "nowhere" / "head"), "--chains_file", str(few), "--output_dir",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "HEAD=" in err and "neither 'default', a head folder nor a hub id" in err and "Traceback" not in err
    assert main(["adapt", "default", "--output_dir", str(tmp_path / "o")]) == 2
    assert "chains_file is required" in capsys.readouterr().err


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
