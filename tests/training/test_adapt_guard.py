"""What adapting guards beyond the user's chains: fresh generated wordings (replayed, or held out for the forgetting
check) and the back-off when the check fails, planted on a tiny head."""

from __future__ import annotations

import json

import pytest

from ares_rerank.training.mix import MixArguments


def _mix():
    return MixArguments(num_chains=20, composed_share=0.5, random_wording_share=0.3, lengths=[4, 6, 12],
                        distractor_share=0.0)


def test_fresh_wordings_are_new_per_purpose_and_seed_and_labelled_by_their_oracle():
    from ares_rerank.backbones.oracle import ClaimTreesOracle
    from ares_rerank.training.guard import CHECK_MAX_LENGTH, fresh_wording_chains
    from ares_rerank.training.mix import training_chains
    from ares_rerank.training.wordings import templates_of, wording_kind

    mix = _mix()
    guard = fresh_wording_chains(mix, 12, 0, "guard")
    check = fresh_wording_chains(mix, 12, 0, "check")
    other = fresh_wording_chains(mix, 12, 1, "check")
    keys = [{c.meta["template"] for c in part} for part in (guard, check, other)]
    assert len(guard) == len(check) == 12 and all(c.id.startswith("fresh-check-") for c in check)
    assert not keys[0] & keys[1] and not keys[1] & keys[2]  # the check never shares a wording with the guard
    mixed = {c.meta["template"] for c in training_chains(mix)}
    assert not mixed & (keys[0] | keys[1])
    kinds = {wording_kind(c.meta["template"]) for c in guard + check}
    assert kinds == {"random", "composed"}  # half random, half composed (paraphrase-style)
    # the check's vanilla chains stay short (ARES on them is the cost of the check)
    vanilla = [c for c in check if c.meta["variant"] == "vanilla"]
    assert vanilla and all(len(c.meta["names"]) <= CHECK_MAX_LENGTH for c in vanilla)
    assert any(len(c.meta["names"]) > CHECK_MAX_LENGTH for c in guard if c.meta["variant"] == "vanilla")
    for chain in guard[:4] + check[:4]:  # each step's gold label is what its wording's rule oracle reads
        oracle = ClaimTreesOracle(templates_of(chain))
        for k, step in enumerate(chain.steps):
            sound = list(chain.base_claims) + [s for s, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]]
    # a wording to leave out is redrawn, not kept
    banned = sorted(keys[0])[:3]
    again = fresh_wording_chains(mix, 12, 0, "guard", exclude=banned)
    assert len(again) == 12 and not {c.meta["template"] for c in again} & set(banned)
    with pytest.raises(ValueError, match=r"purpose='train' must be one of"):
        fresh_wording_chains(mix, 3, 0, "train")
    assert fresh_wording_chains(mix, 0, 0, "guard") == []


def test_guard_pairs_come_by_source_as_many_from_each():
    from ares_rerank.training.guard import fresh_wording_chains, guard_pairs

    mix = _mix()
    chains = fresh_wording_chains(mix, 10, 0, "guard")
    pairs = guard_pairs(chains, mix, mix.premise_selection, 0, per_source=7)
    assert set(pairs) == {"fresh random wordings", "fresh composed wordings"}
    assert all(len(rows) == 7 for rows in pairs.values())
    assert all(r["label"] in (0, 1) and r["chain_id"].startswith("fresh-guard-") for rows in pairs.values()
               for r in rows)
    every = guard_pairs(chains, mix, mix.premise_selection, 0, per_source=None)
    assert sum(map(len, every.values())) > 14


class _PlantedHead:
    """A tiny head that forgets: a linear classifier whose own weights read a fixed set right and whose trained
    weights (planted) read it inverted, so its macro-F1 falls once the averaging weight passes one half."""

    def __init__(self):
        import torch

        torch.manual_seed(0)
        self.model = torch.nn.Linear(2, 1)
        self.x = torch.randn(64, 2)
        self.y = (self.x[:, 0] > 0).long()
        with torch.no_grad():
            self.model.weight.copy_(torch.tensor([[4.0, 0.0]]))
            self.model.bias.zero_()
        self.initial = {name: p.detach().clone() for name, p in self.model.named_parameters()}
        with torch.no_grad():  # the planted forgetting: training turned the sign of what it knew
            self.model.weight.copy_(torch.tensor([[-8.0, 0.0]]))

    def f1(self) -> float:
        import torch

        from ares_rerank.evaluation.protocol import macro_prf

        with torch.no_grad():
            flagged = (self.model(self.x)[:, 0] <= 0).long()
        return macro_prf((1 - self.y).tolist(), flagged.tolist())[2]


def test_the_back_off_lowers_the_averaging_weight_until_the_planted_forgetting_holds():
    import torch

    from ares_rerank.training.adapt_steps import blend_weights
    from ares_rerank.training.guard import back_off

    head = _PlantedHead()
    trained = {name: p.detach().clone() for name, p in head.model.named_parameters()}
    blend_weights(head.model, head.initial, trained, 0.0)
    before = head.f1()
    assert before == 1.0
    result = back_off(0.7, lambda w: blend_weights(head.model, head.initial, trained, w), head.f1, before, 0.02)
    # 0.7, 0.49 and 0.35 (x 0.7, x 0.5) read the set inverted; 0.245 (x 0.35) reads it right
    assert [w for w, _ in result["tries"]] == [0.7, 0.49, 0.35, 0.245]
    assert result["tries"][0][1] < before - 0.02 and result["held"] and result["adapted_weight"] == 0.245
    expected = head.initial["weight"] * 0.755 + trained["weight"] * 0.245
    assert torch.allclose(head.model.weight, expected)  # left at the weight kept
    # a check that holds at once keeps the weight asked for
    assert back_off(0.3, lambda w: blend_weights(head.model, head.initial, trained, w), head.f1, before,
                    0.02)["tries"] == [[0.3, 1.0]]


def test_the_forgetting_check_of_training_backs_off_or_warns_and_says_so(monkeypatch):
    from types import SimpleNamespace

    from ares_rerank.training import adapt_steps
    from ares_rerank.training.adapt_steps import _forgetting_check, forgetting_note

    for action in ("back_off", "warn"):
        head = _PlantedHead()
        # the check's chains are scored by the head itself: here, the planted head's set
        monkeypatch.setattr(adapt_steps, "ares_f1_at_half", lambda chains, scored, head=head: head.f1())
        args = SimpleNamespace(adapted_weight=0.7, forgetting_bound=0.02, on_forgetting=action)
        result = _forgetting_check(head.model, head.initial, None, ["a chain"], 1.0, args)
        note = forgetting_note(result)
        if action == "back_off":
            assert result["held"] and result["backed_off"] and result["adapted_weight"] == 0.245
            assert "backed off to adapted_weight 0.245" in note and "0.7: " in note
        else:
            assert not result["held"] and not result["backed_off"] and result["adapted_weight"] == 0.7
            assert result["score"] < 0.98 and "the head forgets there" in note
        assert result["before"] == 1.0 and result["bound"] == 0.02 and result["action"] == action
    held = {"held": True, "backed_off": False, "tries": [[0.7, 1.0]], "before": 1.0, "bound": 0.02}
    assert forgetting_note(held) is None


def test_adapt_refuses_bad_forgetting_options(tmp_path):
    from ares_rerank.training.adapt import AdaptArguments

    base = {"chains_file": "mine.jsonl", "output_dir": str(tmp_path)}
    with pytest.raises(ValueError, match=r"forgetting_bound=-0.1 must lie in \[0, 1\)"):
        AdaptArguments(**base, forgetting_bound=-0.1)
    with pytest.raises(ValueError, match=r"on_forgetting='ignore' must be 'back_off'"):
        AdaptArguments(**base, on_forgetting="ignore")
    with pytest.raises(ValueError, match=r"check_chains=-1 must be an integer >= 0"):
        AdaptArguments(**base, check_chains=-1)


@pytest.mark.slow
def test_adapt_replays_fresh_wordings_and_shows_the_forgetting_check(tmp_path, tiny_nli_path, capsys):
    from test_adapt import _tiny_head, _write_chains

    from ares_rerank.cli import main

    head = _tiny_head(tmp_path, tiny_nli_path)
    chains = _write_chains(tmp_path / "mine.jsonl")
    out = tmp_path / "adapted"
    assert main(["adapt", str(head), "--chains_file", str(chains), "--output_dir", str(out), "--max_steps", "2",
                 "--batch_size", "4", "--replay_chains", "6", "--guard_chains", "6", "--check_chains", "4",
                 "--progress", "false", "--forgetting_bound", "0.99"]) == 0
    printed = capsys.readouterr().out
    assert "fresh wordings, never trained on (forgetting check) (4 chains)" in printed
    record = json.loads((out / "head" / "ares_calibration.json").read_text())["adaptation"]
    sources = record["replay"]["sources"]
    assert {"fresh random wordings", "fresh composed wordings"} <= set(sources)
    assert record["replay"]["guard_chains"] == 6 and record["replay"]["pairs"] == sum(sources.values())
    check = record["forgetting_check"]
    assert check["held"] and check["adapted_weight"] == 0.7 and len(check["tries"]) == 1  # a bound of 0.99 holds
    entry = record["report"]["sets"]["fresh wordings, never trained on (forgetting check)"]
    assert entry["after"]["ARES macro-F1 at 0.5"] == check["score"] and entry["before"]["ARES macro-F1 at 0.5"] == \
        check["before"]
    assert "forgetting check" in (out / "head" / "README.md").read_text()


def test_the_generated_measurement_wordings_are_unseen_and_read_back():
    """training/unseen_wordings' generators: their content words occur in no training form, held-out or unseen
    wording and in no random wording's vocabulary (the later one's in none of the first's), and the rule oracle reads
    their chains back."""
    import re

    from ares_rerank.backbones.oracle import ClaimTreesOracle
    from ares_rerank.data import load_claimtrees
    from ares_rerank.training.mix import MENTION_FORMS, MISSING_RULE_FORMS
    from ares_rerank.training.wordings import (FACT_FORMS, HELDOUT_TEMPLATES, RULE_FORMS, STEP_FORMS,
                                               TRAIN_TEMPLATES, wording_vocabulary)
    from training.unseen_wordings import GENERATORS, UNSEEN_WORDINGS, generated_wording

    def words(*texts):
        return {w.lower() for t in texts for w in re.findall(r"[A-Za-z]+", t.replace("{p}", " ").replace("{q}", " "))}

    known = [*RULE_FORMS, *FACT_FORMS, *STEP_FORMS, *MENTION_FORMS, *MISSING_RULE_FORMS,
             *(x for t in [*TRAIN_TEMPLATES.values(), *HELDOUT_TEMPLATES.values(), *UNSEEN_WORDINGS.values()]
               for x in (t.rule, t.fact, t.step))]
    function_words = {"is", "and", "has", "been", "being", "any"}
    first = {w for seed in range(40) for t in [generated_wording(seed)] for w in words(t.rule, t.fact, t.step)}
    for name, generate in GENERATORS.items():
        seen = set()
        for seed in range(6):
            templates = generate(seed)
            assert templates == generate(seed)  # deterministic
            seen.add(templates)
            own = words(templates.rule, templates.fact, templates.step) - function_words
            assert own and not own & words(*known) and not own & set(wording_vocabulary()), (name, seed)
            if name != "generated":  # the later generator shares no word with the one the defaults were chosen on
                assert not own & first, (name, seed)
            oracle = ClaimTreesOracle(templates)
            for chain in load_claimtrees(2, 6, start=3, templates=templates):
                for k, step in enumerate(chain.steps):
                    sound = list(chain.base_claims) + [s for s, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
                    assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]]
        assert len(seen) >= 4, name


def test_the_forgetting_measurement_summarises_mean_and_spread_over_seeds():
    from training.measure_forgetting import summary_table

    seeds = {str(s): {"sets": {"other wording, L = 10": {
        "shipped": {"cv": 0.9, "at_0.5": 0.8}, "before": {"cv": 0.8 + 0.02 * s, "at_0.5": 0.7},
        "after": {"cv": 0.9, "at_0.5": 0.9 - 0.1 * s}}}} for s in range(3)}
    table = summary_table(seeds).splitlines()
    assert table[0] == "| set | shipped head | adapted, before | adapted, after |"
    assert table[2] == ("| other wording, L = 10 | 0.900 ± 0.000 (0.800 ± 0.000) | 0.820 ± 0.040 (0.700 ± 0.000) "
                        "| 0.900 ± 0.000 (0.800 ± 0.200) |")


def test_the_forgetting_measurement_columns_are_adapt_options_and_the_table_shows_only_those_run():
    import dataclasses

    from ares_rerank.training.adapt import AdaptArguments
    from training.measure_forgetting import CONFIGS, DEFAULT_CONFIGS, summary_table

    fields = {f.name: f.default for f in dataclasses.fields(AdaptArguments)}
    assert set(DEFAULT_CONFIGS) <= set(CONFIGS)
    for label, options in CONFIGS.items():  # each column names real adapt options, changed from their defaults
        assert all(key in fields and fields[key] != value for key, value in options.items()), label
    seeds = {"0": {"sets": {"target wording, L = 7": {"shipped": {"cv": 0.8, "at_0.5": 0.5},
                                                      "weight-0.5": {"cv": 0.9, "at_0.5": 0.85}}}}}
    assert summary_table(seeds).splitlines()[0] == "| set | shipped head | adapted, weight-0.5 |"
