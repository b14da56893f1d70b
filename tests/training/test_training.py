"""Training data (mix, pairs, split by chain), head training + save/reload, PRM-head training (tiny models)."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

from ares_rerank.backbones.loading import load_backbone
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.backbones.selection import apply_selector, get_selector
from ares_rerank.chain import Chain
from ares_rerank.data import load_claimtrees
from ares_rerank.training.mix import DISTRACTOR_KINDS, HELDOUT_RECIPES, MixArguments, add_distractors, training_chains
from ares_rerank.training.names import NAME_STYLES, random_names, rename_states
from ares_rerank.training.wordings import HELDOUT_TEMPLATES, TRAIN_TEMPLATES, composed_templates, templates_of
from ares_rerank.training.pairs import build_pairs, chain_pairs, pairs_dataset, split_chains, subset_masks


def _oracle(chain: Chain) -> ClaimTreesOracle:
    return ClaimTreesOracle(templates_of(chain))


@pytest.fixture(scope="module")
def mix_chains() -> list[Chain]:
    return training_chains(MixArguments(num_chains=40, mix_seed=3))


def test_split_puts_no_chain_id_on_both_sides(mix_chains):
    parts = split_chains(mix_chains, {"val": 0.2, "test": 0.2}, seed=1)
    ids = {name: {c.id for c in part} for name, part in parts.items()}
    assert sum(len(v) for v in ids.values()) == len(mix_chains)
    assert not ids["train"] & ids["val"] and not ids["train"] & ids["test"] and not ids["val"] & ids["test"]
    assert len(ids["val"]) == len(ids["test"]) == 8
    # The pairs of each split come only from that split's chains.
    for name, part in parts.items():
        rows = build_pairs(part, "relevant:6", _oracle, subsets_per_step=1)
        assert {r["chain_id"] for r in rows} <= ids[name]


def test_split_by_group_keeps_a_group_together():
    chains = [Chain(["b"], ["s"], labels=[0], id=f"c{i}", meta={"recipe": f"r{i % 5}"}) for i in range(40)]
    parts = split_chains(chains, {"test": 0.2}, seed=0, group=lambda c: c.meta["recipe"])
    train_groups = {c.meta["recipe"] for c in parts["train"]}
    test_groups = {c.meta["recipe"] for c in parts["test"]}
    assert len(test_groups) == 1 and not train_groups & test_groups


def test_split_rejects_duplicate_ids_and_bad_fractions():
    twice = [Chain(["b"], ["s"], labels=[0], id="same")] * 2
    with pytest.raises(ValueError, match="unique"):
        split_chains(twice, {"test": 0.5})
    with pytest.raises(ValueError, match="fractions"):
        split_chains([Chain(["b"], ["s"], labels=[0], id="a")], {"train": 0.5})


def test_training_mix_varies_names_templates_and_never_uses_heldout_ones(mix_chains):
    coherent = {c.meta["template"] for c in mix_chains} & set(TRAIN_TEMPLATES)
    composed = {c.meta["template"] for c in mix_chains} - coherent
    assert len(coherent) >= 5 and len(composed) >= 10 and all(t.startswith("c") for t in composed)
    assert len({c.meta["name_style"] for c in mix_chains}) == len(NAME_STYLES)
    assert not {c.meta["template"] for c in mix_chains} & set(HELDOUT_TEMPLATES)
    names = {n for c in mix_chains for n in c.meta["names"]}
    assert names and all(len(n) != 3 for n in names)  # 3-character names are held out
    assert {c.meta["variant"] for c in mix_chains} == {"vanilla", "multi_source", "insertion"}
    # Sound-prefix gold labels agree with the rule oracle after renaming and rewording.
    for chain in mix_chains:
        for k, step in enumerate(chain.steps):
            sound = list(chain.base_claims) + [s for s, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert _oracle(chain).entailment_probs([sound], [step])[0] == 1 - chain.labels[k]


def test_rename_states_replaces_whole_names_only():
    chain = load_claimtrees(1, 5)[0]
    new = random_names(5, "word", random.Random(0))
    renamed = rename_states(chain, new, suffix="-w")
    assert renamed.id == chain.id + "-w" and renamed.labels == chain.labels
    text = " ".join(renamed.claims)
    assert not any(old in text.split() for old in chain.meta["names"])
    assert "Rule:" in text and "derive" in text
    with pytest.raises(ValueError, match="distinct names"):
        rename_states(chain, ["A"] * 5)
    with pytest.raises(ValueError, match="name style"):
        random_names(3, "three", random.Random(0))


def test_pairs_are_labelled_by_the_oracle_selected_and_deduplicated(mix_chains):
    rows = build_pairs(mix_chains[:20], "relevant:6", _oracle, subsets_per_step=2, seed=0, minimal_pairs=True)
    keys = [(tuple(r["premises"]), r["hypothesis"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert {r["kind"] for r in rows} == {"sound_prefix", "full_prefix", "subset", "minimal"}
    positives = {(r["chain_id"], r["step"]): set(r["premises"]) for r in rows
                 if r["kind"] == "sound_prefix" and r["label"] == 1}
    for r in (r for r in rows if r["kind"] == "minimal"):
        # a minimal negative drops one claim the positive needed; selection reruns on the smaller set, so it may
        # also admit or drop others (relevance is IDF-weighted over the included claims)
        assert r["label"] == 0 and len(positives[(r["chain_id"], r["step"])] - set(r["premises"])) >= 1
    assert 0.3 < np.mean([r["label"] for r in rows]) < 0.7
    by_id = {c.id: c for c in mix_chains}
    for r in rows:
        chain = by_id[r["chain_id"]]
        # Selection never changes the truth, so the oracle agrees on the selected premises too.
        assert _oracle(chain).entailment_probs([r["premises"]], [r["hypothesis"]])[0] == r["label"]
        if r["kind"] == "sound_prefix":
            assert r["label"] == 1 - chain.labels[r["step"]]


def test_pairs_premises_are_what_the_backbone_selects():
    chain = load_claimtrees(1, 10, start=7)[0]
    selector = get_selector("relevant:6")
    rows = chain_pairs(chain, selector, None)
    assert [r["kind"] for r in rows] == ["sound_prefix"] * chain.num_steps  # no oracle: sound prefixes only
    for r in rows:
        k = r["step"]
        included = list(chain.base_claims) + [s for s, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
        assert r["premises"] == [included[i] for i in apply_selector(selector, included, r["hypothesis"])]


def test_subset_masks_stay_before_the_step():
    chain = load_claimtrees(1, 8)[0]
    masks = subset_masks(chain, 3, 10, random.Random(0))
    assert len(masks) == 10 and all(max(m, default=0) < chain.num_base + 3 for m in masks)
    assert all(set(range(chain.num_base)) <= set(m) for m in masks[::2])  # prior-1 subsets keep the base claims


def test_conflicting_labels_raise():
    a = Chain(["x"], ["y"], labels=[0], id="a")
    b = Chain(["x"], ["y"], labels=[1], id="b")
    with pytest.raises(ValueError, match="conflicting labels"):
        build_pairs([a, b], "all")


def test_pairs_dataset_columns(mix_chains):
    ds = pairs_dataset(build_pairs(mix_chains[:3], "relevant:6", _oracle, 1))
    assert ds.column_names == ["chain_id", "step", "kind", "premises", "hypothesis", "label"]


HELDOUT_WORDS = {"given", "conclude", "concluding", "know", "available", "whenever", "becomes", "possessing", "grants",
                 "access", "acquired", "attaining", "attained", "assures", "consequently", "procuring", "procured",
                 "guarantees", "accordingly", "fulfilling", "fulfilled", "triggers", "whereupon", "entails", "verified"}


def test_wording_forms_parse_in_every_combination_and_avoid_the_heldout_words():
    import itertools

    from ares_rerank.training.mix import MENTION_FORMS, MISSING_RULE_FORMS
    from ares_rerank.training.wordings import FACT_FORMS, RULE_FORMS, STEP_FORMS

    forms = RULE_FORMS + FACT_FORMS + STEP_FORMS + MENTION_FORMS + MISSING_RULE_FORMS
    assert not {w.strip(".,;:?()").lower() for f in forms for w in f.split()} & HELDOUT_WORDS
    for held in HELDOUT_TEMPLATES.values():
        assert not {held.rule, held.fact, held.step} & set(forms)
    assert len(RULE_FORMS) * len(FACT_FORMS) * len(STEP_FORMS) >= 5000
    rng = random.Random(0)
    for r, f, s in itertools.product(range(len(RULE_FORMS)), range(len(FACT_FORMS)), range(len(STEP_FORMS))):
        # multi-word names are the hardest to parse: every combination must read back its own labels
        plain = load_claimtrees(1, 4, start=r * 400 + f * 20 + s, templates=composed_templates(r, f, s))[0]
        chain = rename_states(plain, random_names(4, "multi", rng))
        chain = Chain(chain.base_claims, chain.steps, labels=chain.labels, id="c",
                      meta={**chain.meta, "template": f"c{r}.{f}.{s}"})
        oracle = _oracle(chain)
        for k, step in enumerate(chain.steps):
            sound = list(chain.base_claims) + [x for x, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]], (r, f, s)


@pytest.fixture(scope="module")
def varied_chains() -> list[Chain]:
    return training_chains(MixArguments(num_chains=160, mix_seed=5, composed_share=0.5, distractor_share=0.5,
                                        name_styles=list(NAME_STYLES)))


def test_varied_mix_names_wordings_and_distractors(varied_chains):
    styles = {c.meta["name_style"] for c in varied_chains}
    assert styles == set(NAME_STYLES)
    names = [n for c in varied_chains for n in c.meta["names"]]
    assert min(map(len, names)) == 1 and max(len(n) for n in names if " " not in n) == 12
    assert all(len(n) != 3 for n in names) and any(" " in n for n in names)
    assert len({c.meta["template"] for c in varied_chains}) > 60  # composed wordings rarely repeat
    kinds = {kind for c in varied_chains for kind, _ in c.meta.get("distractors", [])}
    assert kinds == set(DISTRACTOR_KINDS)
    text = " ".join(" ".join(c.claims) for c in varied_chains).lower()
    assert not {w.strip(".,;:?()") for w in text.split()} & HELDOUT_WORDS
    selector = get_selector("relevant:6")
    for chain in varied_chains:
        oracle = _oracle(chain)
        for k, step in enumerate(chain.steps):
            sound = list(chain.base_claims) + [x for x, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]]
        if chain.meta.get("distractors"):  # a distractor never hides the evidence from the selector
            for k, step in enumerate(chain.steps):
                full = list(chain.base_claims) + list(chain.steps[:k])
                seen = [full[i] for i in apply_selector(selector, full, step)]
                assert oracle.entailment_probs([seen], [step]) == oracle.entailment_probs([full], [step])


def test_random_wordings_are_new_per_chain_read_back_and_avoid_the_heldout_words():
    from ares_rerank.training.wordings import random_templates, wording_vocabulary

    assert random_templates(7) == random_templates(7) and random_templates(7) != random_templates(8)
    vocabulary = set(wording_vocabulary())
    assert len(vocabulary) > 1000 and not vocabulary & HELDOUT_WORDS and "not" not in vocabulary
    # the words the shipped head's random wordings drew from: a held-out wording that bans a word of it would change
    # the recipe's training data (write held-out wordings in words outside it)
    digest = hashlib.sha256(" ".join(wording_vocabulary()).encode()).hexdigest()
    assert digest == "b2ac9d98c0bb79f68f93ced6aa10d9fc3544fcd28a14e8291437fba80f63144a"
    args = MixArguments(num_chains=60, mix_seed=2, random_wording_share=0.5, composed_share=0.0, distractor_share=0.3,
                        name_styles=list(NAME_STYLES))
    chains = training_chains(args)
    randomized = [c for c in chains if c.meta["template"].startswith("r")]
    assert 15 <= len(randomized) <= 45 and len({c.meta["template"] for c in randomized}) == len(randomized)
    # distractors are English sentences whatever the wording: the random words are the rest
    written = {w.strip(".,;:?()").lower() for c in randomized for claim in c.claims for w in claim.split()
               if claim not in {text for _, text in c.meta.get("distractors", [])}}
    names = {w.lower() for c in randomized for name in c.meta["names"] for w in name.split()}  # a state may be "TO"
    heldout_vocabulary = {w.strip(".,;:?()") for t in HELDOUT_TEMPLATES.values() for form in (t.rule, t.fact, t.step)
                          for w in form.lower().split() if "{" not in w}
    assert HELDOUT_WORDS <= heldout_vocabulary and not (written - names) & heldout_vocabulary
    for chain in randomized:  # the oracle reads every random wording back: the labels are the chain's own
        oracle = _oracle(chain)
        for k, step in enumerate(chain.steps):
            sound = list(chain.base_claims) + [x for x, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]], chain.id
    # a share of 0 draws nothing: older mixes are unchanged
    plain = MixArguments(num_chains=20, mix_seed=2)
    assert [c.id for c in training_chains(plain)] == [c.id for c in training_chains(
        MixArguments(num_chains=20, mix_seed=2, random_wording_share=0.0))]
    with pytest.raises(ValueError, match="random_wording_share"):
        MixArguments(random_wording_share=1.5)


def test_distractors_share_names_but_change_no_truth():
    chain = load_claimtrees(1, 8, start=3)[0]
    chain = Chain(chain.base_claims, chain.steps, labels=chain.labels, id="d", meta={**chain.meta, "template": "paper"})
    rng = random.Random(1)
    out = add_distractors(chain, templates_of(chain), ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"], rng)
    added = [text for _, text in out.meta["distractors"]]
    assert added and all(text in out.base_claims for text in added) and out.steps == chain.steps
    oracle = ClaimTreesOracle()
    for k, step in enumerate(chain.steps):
        before = list(chain.base_claims) + list(chain.steps[:k])
        after = list(out.base_claims) + list(out.steps[:k])
        assert oracle.entailment_probs([before, after], [step, step]) == oracle.entailment_probs([before] * 2,
                                                                                               [step] * 2)
    names = set(chain.meta["names"]) | {"Q1", "Q2", "Q3", "Q4", "Q5", "Q6"}
    assert all(any(n in text.split(" ") or f"{n}." in text or f"{n}?" in text for n in names) for text in added)


def test_pairs_label_what_the_selection_keeps():
    chain = load_claimtrees(1, 6, start=2)[0]
    chain = Chain(chain.base_claims, chain.steps, labels=chain.labels, id="s", meta={**chain.meta, "template": "paper"})
    rows = build_pairs([chain], "relevant:1", _oracle, subsets_per_step=1)  # one claim: never rule and fact together
    assert rows and all(r["label"] == 0 and len(r["premises"]) <= 1 for r in rows)
    rows = build_pairs([chain], "relevant:6", _oracle, subsets_per_step=1)
    assert {r["label"] for r in rows} == {0, 1}


def test_split_chains_keeps_a_split_group_together():
    chains = [Chain(["b"], ["s"], labels=[0], id=f"c{i}", meta={"split_group": f"g{i % 4}"} if i < 20 else {})
              for i in range(60)]
    parts = split_chains(chains, {"val": 0.1, "test": 0.1}, seed=2)
    for name, part in parts.items():
        others = [c for n, p in parts.items() if n != name for c in p]
        groups = {c.meta["split_group"] for c in part if "split_group" in c.meta}
        assert not groups & {c.meta["split_group"] for c in others if "split_group" in c.meta}


@pytest.fixture(scope="module")
def recipe_mix() -> list[Chain]:
    from helpers import shared_data

    shared_data("recipe_graphs")
    return training_chains(MixArguments(num_chains=60, mix_seed=2, recipe_share=0.5))


def test_recipe_chains_come_from_training_graphs_and_split_by_graph(recipe_mix):
    recipes = [c for c in recipe_mix if c.meta.get("task") == "captaincook_recipes"]
    assert 15 < len(recipes) < 45 and len(recipes) + len([c for c in recipe_mix if "rules" in c.meta]) == 60
    assert not {c.meta["recipe"] for c in recipes} & set(HELDOUT_RECIPES)
    assert {c.meta["deleted"] for c in recipes} >= {"ingredient", "rule"}
    parts = split_chains(recipe_mix, {"val": 0.2, "test": 0.2}, seed=0)
    where = {}
    for name, part in parts.items():
        for c in part:
            if "recipe" in c.meta:
                assert where.setdefault(c.meta["recipe"], name) == name  # one recipe graph, one split
    rows = build_pairs(recipes[:4], "relevant:6", _oracle_or_none, subsets_per_step=1, minimal_pairs=True)
    assert {r["kind"] for r in rows} >= {"sound_prefix", "full_prefix", "subset"}
    from ares_rerank.training.pairs import generated_oracle

    for r in rows:  # labelled by the recipe oracle on what the selection kept
        chain = next(c for c in recipes if c.id == r["chain_id"])
        assert generated_oracle(chain).entailment_probs([r["premises"]], [r["hypothesis"]]) == [float(r["label"])]


def test_a_recipe_mix_reads_the_graphs_of_data_dir_without_the_environment(monkeypatch):
    """`train head --data_dir` (and `calibrate --config`): the mix's recipe chains and their oracle labels come from
    the folder named, with $ARES_DATA_DIR unset; without either the error names data_dir."""
    from helpers import shared_data

    from ares_rerank.training import parse_args, split_rows

    data = str(shared_data("recipe_graphs").parent)
    monkeypatch.delenv("ARES_DATA_DIR")
    mix, args = parse_args(["--num_chains", "30", "--mix_seed", "2", "--recipe_share", "0.5", "--data_dir", data,
                            "--output_dir", "unused"])
    assert args.data_dir == data
    rows = split_rows(mix, args.data_dir)
    recipe_rows = [r for _, part in rows.values() for r in part if "-recipe-" in r["chain_id"]]
    assert recipe_rows and {r["label"] for r in recipe_rows} == {0, 1}  # labelled by the recipe oracle
    with pytest.raises(FileNotFoundError, match="data_dir=None and .ARES_DATA_DIR is not set"):
        split_rows(mix)


def _oracle_or_none(chain: Chain):
    return _oracle(chain) if "rules" in chain.meta else None


def test_evaluation_sets_hold_out_recipes_and_wordings():
    from helpers import shared_data

    from training.evaluate_head import EVAL_SETS, evaluate_head

    shared_data("recipe_graphs")
    heldout = EVAL_SETS["recipes-heldout"][0](100)
    assert heldout and {c.meta["recipe"] for c in heldout} <= set(HELDOUT_RECIPES)
    assert {c.meta["recipe"] for c in EVAL_SETS["recipes"][0](100)} > set(HELDOUT_RECIPES)
    variants = EVAL_SETS["recipes-heldout-variants"][0](60)
    assert {c.meta["recipe"] for c in variants} == set(HELDOUT_RECIPES)  # every held-out graph, no other
    assert len({(c.base_claims, c.steps) for c in variants}) == 60  # distinct chains, where the entries hold six
    assert {c.meta["deleted"] for c in variants} == {"ingredient", "rule", "start"}
    results = evaluate_head(None, ["available-10", "multiword-10"], n=10, log=lambda _: None,
                            oracle_selection="relevant:6")
    assert all(r["ares"]["f1"] == r["ares"]["f1_at_0.5"] == 1.0 for r in results.values())


def test_evaluate_head_cli_checks_sets_first_and_saves_after_each_set(tmp_path, monkeypatch, capsys):
    from training import evaluate_head as module

    out = tmp_path / "e.json"
    with pytest.raises(SystemExit) as done:  # an unknown set is refused before anything runs
        module.main(["--head", "oracle", "--sets", "available-10,nope", "--out", str(out)])
    assert done.value.code == 2 and "sets ['nope'] are unknown" in capsys.readouterr().err and not out.exists()
    with pytest.raises(SystemExit) as done:  # a head folder that is not there: the message, not a traceback
        module.main(["--head", str(tmp_path / "no-such-head"), "--sets", "available-10", "--out", str(out)])
    assert done.value.code == 2 and "--head" in capsys.readouterr().err and not out.exists()

    seen = []
    real = module.evaluate_head

    def record(backbone, sets, *args, **kwargs):  # the file holds every finished set before the next one starts
        saved = json.loads(out.read_text()) if out.exists() else {"results": {}, "meta": {"complete": None}}
        seen.append((list(sets), sorted(saved["results"]), saved["meta"]["complete"]))
        return real(backbone, sets, *args, **kwargs)

    monkeypatch.setattr(module, "evaluate_head", record)
    assert module.main(["--head", "oracle", "--sets", "available-10,multiword-10", "--n", "10",
                        "--out", str(out)]) == 0
    assert seen == [(["available-10"], [], None), (["multiword-10"], ["available-10"], False)]
    saved = json.loads(out.read_text())
    assert saved["meta"]["device"] == "cpu" and sorted(saved["results"]) == ["available-10", "multiword-10"]
    assert saved["meta"]["complete"] and saved["meta"]["sets"] == ["available-10", "multiword-10"]
    assert saved["results"]["multiword-10"]["ares"]["f1"] == 1.0  # the oracle behind relevant:6
    assert out.with_suffix(".md").read_text().count("| multiword-10 |") == 1


def test_the_recipe_configs_parse_and_chain_their_stages():
    from ares_rerank.training.head import parse_args
    from training import train_default_head

    for stages in (train_default_head.STAGES, train_default_head.VARIED_STAGES):
        previous = None
        for _, config, _ in stages:
            mix, head_args = parse_args([str(config)])
            if previous is not None:  # run alone, each stage starts from the head its previous stage writes
                assert head_args.init_adapter == f"{previous}/head"
            previous = head_args.output_dir


def test_the_recipe_refuses_an_earlier_run_before_its_first_stage(tmp_path, capsys):
    from training import train_default_head

    (tmp_path / "default_head_stage3" / "head").mkdir(parents=True)  # stage 3 of an earlier run, an hour in
    with pytest.raises(SystemExit) as exit_info:
        train_default_head.main(["--runs_dir", str(tmp_path), "--export_dir", ""])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "default_head_stage3' holds an earlier run (head)" in err and "--overwrite to replace it" in err
    assert not any((tmp_path / "default_head_stage1").iterdir())  # stage 1 never started


def test_every_training_config_parses():
    from ares_rerank.training.head import parse_args
    from training import train_default_head

    configs = sorted(train_default_head.CONFIGS.glob("*.yaml"))
    assert len(configs) >= 7
    for config in configs:
        parse_args([str(config)])
    # the stage-5 GPU experiment's full fine-tuning run (training/README.md) drops its init_adapter from the shell
    _, args = parse_args([str(train_default_head.CONFIGS / "default_head_stage5_recipes.yaml"),
                          "--full_finetune", "true", "--init_adapter", ""])
    assert args.full_finetune and not args.init_adapter
    # the recipe's first GPU stage widens stage 4's rank-8 adapter to rank 64 at its scale of 2, and both GPU stages
    # replay their kept checkpoints within a 6000-step schedule
    mix5, args5 = parse_args([str(train_default_head.CONFIGS / "default_head_stage5_gpu.yaml")])
    assert (args5.lora_r, args5.lora_alpha, args5.init_adapter) == (64, 128, "runs/default_head_stage4/head")
    mix6, args6 = parse_args([str(train_default_head.CONFIGS / "default_head_stage6_gpu.yaml")])
    assert (args5.max_steps, args5.stop_at_step, args6.max_steps, args6.stop_at_step) == (6000, 2500, 6000, 2000)
    assert mix5.recipe_share == mix6.recipe_share == 0.65 and mix6.first_index > mix5.first_index
    assert args5.learning_rate == 2 * args6.learning_rate and args6.warmup_steps == 0
    assert mix5.premise_selection == "relevant-words:6" and args5.max_length == args6.max_length == 512


def test_settings_that_failed_only_after_training_are_refused_when_parsed(tmp_path):
    from ares_rerank.training.head import parse_args

    base = ["--output_dir", str(tmp_path)]
    for flags, match in ((["--test_fraction", "0"], r"test_fraction=0.0\) must be above 0"),
                         (["--val_fraction", "0"], r"val_fraction=0.0\) must be above 0"),
                         (["--subsets_per_step", "-1"], r"subsets_per_step=-1\) must be an int >= 0"),
                         (["--calibration_bins", "0"], r"calibration_bins=0 must be an integer in \[1, 1000\]"),
                         (["--torch_threads", "-3"], "torch_threads=-3 must be >= 0"),
                         (["--learning_rate", "nan"], "learning_rate=nan must be a finite number > 0"),
                         (["--learning_rate", "0"], "learning_rate=0.0 must be a finite number > 0")):
        with pytest.raises(ValueError, match=match):
            parse_args(base + flags)


def test_a_refused_chains_file_leaves_no_empty_run_folder(tmp_path):
    """The run folder was created before the chains were read, and stayed, empty, when they were refused."""
    from ares_rerank.training.head import parse_args, train_head

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"steps": 5}\n')
    mix, args = parse_args(["--chains_file", str(bad), "--output_dir", str(tmp_path / "new" / "run")])
    with pytest.raises((TypeError, ValueError), match="steps=5"):
        train_head(mix, args)
    assert not (tmp_path / "new" / "run").exists()
    kept = tmp_path / "mine"
    kept.mkdir()
    mix, args = parse_args(["--chains_file", str(bad), "--output_dir", str(kept)])
    with pytest.raises((TypeError, ValueError), match="steps=5"):
        train_head(mix, args)
    assert kept.is_dir()  # a folder the user made stays


def test_parse_args_reads_yaml_and_lets_flags_override(tmp_path):
    from ares_rerank.training.head import parse_args

    config = tmp_path / "c.yaml"
    config.write_text("num_chains: 30\nlora_r: 4\nlearning_rate: 0.002\noutput_dir: %s\n" % tmp_path)
    mix, args = parse_args([str(config), "--lora_r", "2"])
    assert mix.num_chains == 30 and args.lora_r == 2 and args.learning_rate == 0.002
    config.write_text("not_an_argument: 1\n")
    with pytest.raises(ValueError, match="not_an_argument"):
        parse_args([str(config)])
    # broken YAML ended in yaml's ParserError (an internal-error line in the CLI); a list in "config keys [1, 2]"
    config.write_text("a: [1\n")
    with pytest.raises(ValueError, match=r"config '.*c\.yaml' is not valid YAML"):
        parse_args([str(config)])
    config.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="holds a YAML list; expected a mapping"):
        parse_args([str(config)])


def _tiny_args(tmp_path, base, **overrides):
    from ares_rerank.training.head import parse_args

    flags = {"base_model": str(base), "output_dir": str(tmp_path / "run"), "num_chains": 24, "max_steps": 4,
             "per_device_train_batch_size": 8, "eval_steps": 2, "save_steps": 2, "logging_steps": 1,
             "max_length": 256, "lora_target_modules": "query value", "disable_tqdm": "true", **overrides}
    argv = []
    for key, value in flags.items():
        argv += [f"--{key}", *str(value).split()]
    return parse_args(argv)


@pytest.mark.slow
@pytest.mark.parametrize("full", [False, True])
def test_tiny_head_trains_saves_and_reloads_with_identical_scores(tmp_path, tiny_nli_path, full):
    from ares_rerank.backbones.nli import EntailmentHead
    from ares_rerank.training.head import train_head

    mix, args = _tiny_args(tmp_path, tiny_nli_path, full_finetune=str(full).lower())
    trained = train_head(mix, args)
    folder = tmp_path / "run" / "head"
    calibration = json.loads((folder / "ares_calibration.json").read_text())
    assert calibration["temperature"] == pytest.approx(trained.calibration["temperature"])
    assert calibration["premise_selection"] == "relevant:6" and calibration["test"]["num_pairs"] > 0
    assert (folder / "adapter_config.json").is_file() != full
    assert (tmp_path / "run" / "reliability_test.png").is_file()

    chains = load_claimtrees(3, 5, start=50)
    premises = [list(c.base_claims) for c in chains for _ in c.steps]
    hypotheses = [s for c in chains for s in c.steps]
    live = EntailmentHead(trained.model.eval(), trained.tokenizer, temperature=calibration["temperature"],
                          premise_selection="relevant:6", max_length=256)
    reloaded = EntailmentHead.from_pretrained(folder, premise_selection="relevant:6", max_length=256, device="cpu")
    assert reloaded.temperature == pytest.approx(calibration["temperature"])
    np.testing.assert_allclose(reloaded.entailment_probs(premises, hypotheses),
                               live.entailment_probs(premises, hypotheses), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_tiny_prm_head_trains_with_labels_only_on_step_tags(tmp_path):
    from ares_rerank.backbones.prms import StepTagPRM
    from ares_rerank.training.prm import PRMTrainingArguments, chain_rows, encode_rows, load_prm, train_prm
    from tiny_models import tiny_qwen2_token_classifier

    tiny_prm_path = tiny_qwen2_token_classifier(tmp_path / "base", kind=None)  # a plain token classifier

    rows = chain_rows(load_claimtrees(6, 4))
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    args = PRMTrainingArguments(model_name_or_path=str(tiny_prm_path), dataset=str(tmp_path / "rows.jsonl"),
                                output_dir=str(tmp_path / "prm-run"), max_steps=3, per_device_train_batch_size=2,
                                learning_rate=1e-2, logging_steps=1, disable_tqdm=True, save_strategy="no")
    model, tokenizer = load_prm(args)
    encoded = encode_rows(rows, model, tokenizer, args)
    tag_id = tokenizer.convert_tokens_to_ids("<extra_0>")
    for row, ids, labels in zip(rows, encoded["input_ids"], encoded["labels"]):
        marked = [i for i, y in enumerate(labels) if y != -100]
        assert marked == [i for i, t in enumerate(ids) if t == tag_id]  # one label per tag, nothing else
        assert [labels[i] for i in marked] == [int(x) for x in row["labels"]]

    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    model, tokenizer = train_prm(args)
    assert any(not np.allclose(before[k].numpy(), v.detach().numpy()) for k, v in model.named_parameters())
    chain = load_claimtrees(1, 5, start=90)[0]
    live = StepTagPRM(model.eval(), tokenizer, cache_size=0)
    with pytest.raises(ValueError, match=r"output_dir=.*prm-run' holds an earlier run .*prm"):
        train_prm(args)  # refused before any work: the PRM just saved is not silently replaced
    reloaded = load_backbone(tmp_path / "prm-run" / "prm", device="cpu")  # its record says: this layout, not TRL's
    assert type(reloaded) is StepTagPRM
    np.testing.assert_allclose(reloaded.chain_step_probs(chain.base_claims, chain.steps),
                               live.chain_step_probs(chain.base_claims, chain.steps), rtol=0, atol=1e-6)


def test_prm_rows_are_checked_before_they_become_labels():
    """bool() read the labels "False" and "-" as True (every wrong step trained as correct), a string of completions
    was split per character, and max_length 0 / -5 gave empty rows / cut the last tag (found by an audit)."""
    from ares_rerank.training.prm import PRMTrainingArguments, check_row

    check_row(0, {"prompt": "p", "completions": ["a", "b"], "labels": [True, 0]})
    for row, message in (({"prompt": "p", "completions": ["a", "b"], "labels": ["True", "False"]}, "got 'True'"),
                         ({"prompt": "p", "completions": ["a", "b"], "labels": ["+", "-"]}, "got '\\+'"),
                         ({"prompt": "p", "completions": ["a"], "labels": [0.5]}, "got 0.5"),
                         ({"prompt": "p", "completions": "ab", "labels": [True, False]}, "list of step strings"),
                         ({"prompt": [{"role": "user", "content": "p"}], "completions": ["a"], "labels": [1]},
                          "prompt is list"),
                         ({"prompt": "p", "completions": ["a", "b"], "labels": [1]}, "one label per completion"),
                         ({"completions": ["a"], "labels": [1]}, "must have prompt, completions and labels")):
        with pytest.raises(ValueError, match=message):
            check_row(3, row)
    for bad in (0, -5):
        with pytest.raises(ValueError, match=f"--max_length={bad} must be a positive number"):
            PRMTrainingArguments(model_name_or_path="m", output_dir="/tmp/never-made", max_length=bad)


def test_cli_train_forwards_to_the_training_recipe(tmp_path, capsys):
    from ares_rerank.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("lora_rank: 4\n")
    assert main(["train", "head", str(bad)]) == 2
    assert "lora_rank" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "nonsense"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:  # the installed package trains from your chains: no checkout needed
        main(["train", "head", "--help"])
    assert done.value.code == 0 and "--chains_file" in capsys.readouterr().out


@pytest.mark.slow
def test_init_adapter_continues_from_a_saved_head(tmp_path, tiny_nli_path):
    import torch
    from safetensors.torch import load_file

    from ares_rerank.training.head import load_base, train_head

    mix, args = _tiny_args(tmp_path, tiny_nli_path, max_steps=2, lora_layers=1)  # LoRA on the upper layer only
    folder = train_head(mix, args).folder
    _, args2 = _tiny_args(tmp_path, tiny_nli_path, init_adapter=str(folder))
    model, _ = load_base(args2)
    saved = load_file(str(folder / "adapter_model.safetensors"))
    lora_a = {k: v for k, v in model.state_dict().items() if "lora_A" in k}
    assert lora_a and len(lora_a) == len([k for k in saved if "lora_A" in k])
    assert all(".layer.1." in name for name in lora_a)  # the continued adapter keeps the first one's layers
    for name, value in lora_a.items():
        match = [v for k, v in saved.items() if k.replace(".weight", "") in name.replace(".default", "")]
        assert match and torch.equal(match[0], value)
    assert any(p.requires_grad for n, p in model.named_parameters() if "lora_" in n)  # trainable, not frozen
    saves = model.peft_config["default"].modules_to_save  # a continued adapter names each saved module once
    assert saves and len(saves) == len(set(saves))


@pytest.mark.slow
def test_continuing_an_adapter_on_a_headless_base_reports_no_missing_head(tmp_path, tiny_nli_path):
    """A base without a task head (all-MiniLM, the shipped head's) gets a fresh classifier that the adapter then
    replaces: transformers' "newly initialized" load report is a false alarm there and is not shown; loading that
    base for a fresh adapter still reports it."""
    import io
    import logging

    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ares_rerank.training.head import load_base, train_head

    bare = tmp_path / "bare"
    AutoModel.from_pretrained(tiny_nli_path).save_pretrained(bare)  # the encoder alone: no classifier weights
    AutoTokenizer.from_pretrained(tiny_nli_path).save_pretrained(bare)
    mix, args = _tiny_args(tmp_path, bare, max_steps=1)
    folder = train_head(mix, args).folder
    _, continued = _tiny_args(tmp_path, bare, init_adapter=str(folder))
    logger = hf_logging.get_logger("transformers")
    reports = []
    for each in (args, continued):
        seen = io.StringIO()
        handler = logging.StreamHandler(seen)
        logger.addHandler(handler)
        try:
            model, _ = load_base(each)
        finally:
            logger.removeHandler(handler)
        reports.append("LOAD REPORT" in seen.getvalue())
    assert reports == [True, False]  # a fresh head: the report is true and stays; a continued one: not shown
    assert "classifier" in " ".join(model.peft_config["default"].modules_to_save)  # the adapter brings the head


@pytest.mark.slow
def test_a_wider_lora_r_widens_init_adapter_with_its_function_kept(tmp_path, tiny_nli_path):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ares_rerank.training.head import load_base, train_head

    mix, args = _tiny_args(tmp_path, tiny_nli_path, max_steps=3, lora_r=2, lora_alpha=4, learning_rate=0.05)
    folder = train_head(mix, args).folder
    tokenizer = AutoTokenizer.from_pretrained(tiny_nli_path)
    batch = tokenizer(["A is true. B is true.", "C is true."], ["so D is true", "E"], return_tensors="pt",
                      padding=True)
    saved = PeftModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(tiny_nli_path), str(folder))
    assert any(p.abs().sum() > 0 for n, p in saved.named_parameters() if "lora_B" in n)  # the saved one learned
    with torch.no_grad():
        expected = saved.eval()(**batch).logits
    _, wide_args = _tiny_args(tmp_path, tiny_nli_path, init_adapter=str(folder), lora_r=6, lora_alpha=3)
    wide, _ = load_base(wide_args)
    assert wide.peft_config["default"].r == 6
    saves = wide.peft_config["default"].modules_to_save
    assert saves and len(saves) == len(set(saves))
    assert any(p.shape[0] == 6 for n, p in wide.named_parameters() if "lora_A" in n and p.requires_grad)
    with torch.no_grad():
        got = wide.eval()(**batch).logits
    assert not torch.allclose(expected, torch.zeros_like(expected))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)  # the same head, more rank to train

    _, narrow = _tiny_args(tmp_path, tiny_nli_path, init_adapter=str(folder), lora_r=1)
    with pytest.raises(ValueError, match=r"lora_r=1 is below the rank 2 .* cannot be narrowed"):
        load_base(narrow)
    _, missing = _tiny_args(tmp_path, tiny_nli_path, init_adapter=str(tmp_path / "no-head"))
    with pytest.raises(ValueError, match=r"init_adapter=.*no-head.* does not hold a saved adapter"):
        load_base(missing)


@pytest.mark.slow
def test_train_head_exports_only_a_head_that_passed_the_collapse_check(tmp_path, tiny_nli_path, monkeypatch):
    from ares_rerank.training import TrainingCollapsed
    from ares_rerank.training import export as export_module
    from ares_rerank.training import head as module

    def collapsed(stage, calibration):
        raise TrainingCollapsed(f"{stage}: collapsed")

    # a 2-step tiny head may or may not beat the majority
    monkeypatch.setattr(export_module, "check_not_collapsed", collapsed)
    export = tmp_path / "export"
    mix, args = _tiny_args(tmp_path, tiny_nli_path, max_steps=2, export_dir=str(export))
    with pytest.raises(TrainingCollapsed, match="collapsed"):
        module.train_head(mix, args)
    assert (tmp_path / "run" / "head" / "ares_calibration.json").is_file() and not export.exists()

    checked = []
    monkeypatch.setattr(export_module, "check_not_collapsed", lambda stage, calibration: checked.append(stage))
    with pytest.raises(ValueError, match=r"output_dir=.*run' holds an earlier run \(checkpoint-2, head\).*"
                                         r"--overwrite_output_dir true"):
        module.train_head(mix, args)  # before any work: the collapsed run's head is not silently replaced
    args.overwrite_output_dir = True
    module.train_head(mix, args)
    assert checked == [str(tmp_path / "run")]
    assert (export / "adapter_model.safetensors").read_bytes() == \
        (tmp_path / "run" / "head" / "adapter_model.safetensors").read_bytes()


def test_chunked_loss_matches_the_whole_batch_loss_and_gradients(tiny_nli_path):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from ares_rerank.training.head import chunked_loss

    tokenizer = AutoTokenizer.from_pretrained(tiny_nli_path)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_nli_path).eval()  # no dropout: exact comparison
    premises = ["A is true.", "A is true.\nIf A, then B.\nIf B, then C.\nIf C, then D.", "If A, then B.", "B is true.",
                "If A, then B.\nIf B, then C.", "A is true.\nIf A, then B.\nIf B, then C."]
    batch = tokenizer(premises, ["B is true."] * 6, padding=True, return_tensors="pt")
    assert tokenizer.padding_side == "right" and len(set(batch["attention_mask"].sum(-1).tolist())) > 2
    batch["labels"] = torch.tensor([0, 1, 0, 1, 1, 0])

    def loss_and_grads(compute):
        model.zero_grad()
        loss = compute()
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    whole, whole_grads = loss_and_grads(lambda: model(**batch).loss)
    for chunks in (2, 3, 6):
        chunked, grads = loss_and_grads(lambda: chunked_loss(model, batch, chunks))
        assert chunked == pytest.approx(whole, abs=1e-6)
        assert len(grads) == len(whole_grads)
        for a, b in zip(grads, whole_grads):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_length_chunks_refuses_a_left_padding_tokenizer(tmp_path, tiny_nli_path):
    import shutil

    from ares_rerank.training.head import train_head

    base = tmp_path / "left-padded"
    shutil.copytree(tiny_nli_path, base)
    config = json.loads((base / "tokenizer_config.json").read_text())
    (base / "tokenizer_config.json").write_text(json.dumps({**config, "padding_side": "left"}))
    mix, args = _tiny_args(tmp_path, base, length_chunks=2)
    with pytest.raises(ValueError, match="length_chunks=2 needs a right-padding tokenizer .*'left'"):
        train_head(mix, args)


def test_length_bucket_sampler_covers_every_index_once_in_length_sorted_batches():
    from ares_rerank.training.sampling import LengthBucketSampler, padding_ratio

    rng = np.random.default_rng(0)
    lengths = rng.integers(16, 190, size=1003).tolist()
    sampler = LengthBucketSampler(lengths, batch_size=16, bucket_batches=4, seed=1)
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(1003)) and first != second  # a new order each pass
    batches = [first[i:i + 16] for i in range(0, len(first), 16)]
    assert [len(b) for b in batches[:-1]] == [16] * 62 and len(batches[-1]) == 1003 % 16  # the short batch last
    layout = sampler.batches(np.random.default_rng([1, 0]))
    assert [b.tolist() for b in layout] == batches  # __iter__ lays out exactly these batches
    # Same pairs, far less padding than random batches of 16.
    random_batches = [list(range(i, min(i + 16, 1003))) for i in range(0, 1003, 16)]
    assert padding_ratio(lengths, batches) < 0.8 * padding_ratio(lengths, random_batches)
    # Batches come out in random order, not longest-first (the length schedule LengthGroupedSampler has).
    maxima = [max(lengths[i] for i in b) for b in batches[:-1]]
    assert maxima != sorted(maxima) and maxima != sorted(maxima, reverse=True)


def test_length_bucket_sampler_with_labels_keeps_each_batch_near_the_label_mix():
    from ares_rerank.training.sampling import LengthBucketSampler, padding_ratio

    rng = np.random.default_rng(0)
    labels = (rng.random(2048) < 0.35).astype(int)
    lengths = np.where(labels == 1, rng.integers(60, 190, 2048), rng.integers(16, 120, 2048))  # length ~ label
    by_length = LengthBucketSampler(lengths, 16, bucket_batches=16).batches(np.random.default_rng(0))
    stratified = LengthBucketSampler(lengths, 16, bucket_batches=16, labels=labels)
    batches = stratified.batches(np.random.default_rng(0))
    assert sorted(np.concatenate(batches).tolist()) == list(range(2048)) and {len(b) for b in batches} == {16}
    share = [labels[b].mean() for b in batches]
    # Sorting by raw length makes label-pure batches; the stratified layout keeps every batch near the bucket's mix,
    # tighter even than random batches of 16 (binomial spread ~0.12), at a fraction of their padding.
    assert np.std([labels[b].mean() for b in by_length]) > 0.25 and np.std(share) < 0.06
    random_batches = [np.arange(i, i + 16) for i in range(0, 2048, 16)]
    assert padding_ratio(lengths, batches) < 0.85 * padding_ratio(lengths, random_batches)
    with pytest.raises(ValueError, match="one label per example"):
        LengthBucketSampler(lengths, 16, labels=labels[:5])


def test_length_bucket_sampler_and_training_args_reject_bad_settings(tmp_path):
    from ares_rerank.training.sampling import LengthBucketSampler
    from ares_rerank.training.head import parse_args

    with pytest.raises(ValueError, match="bucket_batches=0"):
        LengthBucketSampler([3, 4], batch_size=2, bucket_batches=0)
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketSampler([3, 4], batch_size=0)
    with pytest.raises(ValueError, match="bucket_batches: 0"):
        parse_args(["--output_dir", str(tmp_path), "--train_sampling_strategy", "group_by_length",
                    "--bucket_batches", "8"])
    with pytest.raises(ValueError, match="lora_layers=\\[-1\\]"):
        parse_args(["--output_dir", str(tmp_path), "--lora_layers", "-1"])
    with pytest.raises(ValueError, match="length_chunks=32"):
        parse_args(["--output_dir", str(tmp_path), "--length_chunks", "32", "--per_device_train_batch_size", "16"])
    with pytest.raises(ValueError, match="bucket_batches=-1"):
        parse_args(["--output_dir", str(tmp_path), "--bucket_batches", "-1"])
    _, args = parse_args(["--output_dir", str(tmp_path), "--train_sampling_strategy", "group_by_length"])
    assert args.bucket_batches == 0  # the default: the Trainer's own sampler


@pytest.mark.slow
def test_default_head_recipe_runs_every_stage_in_one_command(tmp_path, tiny_nli_path, monkeypatch):
    from ares_rerank.training import TrainingCollapsed
    from ares_rerank.training import export as export_module
    from training import train_default_head

    common = (f"base_model: {tiny_nli_path}\nnum_chains: 24\nmax_steps: 2\nper_device_train_batch_size: 8\n"
              "eval_steps: 2\nsave_steps: 2\nmax_length: 256\nlora_target_modules: [query, value]\n"
              "disable_tqdm: true\nbucket_batches: 2\nlength_chunks: 2\n")  # also bucketed batches, chunked loss
    stage1, stage2, stage3 = tmp_path / "s1.yaml", tmp_path / "s2.yaml", tmp_path / "s3.yaml"
    stage1.write_text(common + "minimal_pairs: false\noutput_dir: elsewhere\n")
    stage2.write_text(common + "minimal_pairs: true\ninit_adapter: not/this/one\n")
    stage3.write_text(common + "minimal_pairs: true\nfirst_index: 4000000\ninit_adapter: nor/this/one\n")
    monkeypatch.setattr(train_default_head, "STAGES", (("stage1", stage1, "s1"), ("stage2", stage2, "s2"),
                                                        ("stage3", stage3, "s3")))
    checked = []  # a 2-step tiny head is no better than the majority class: record the guard's calls instead
    monkeypatch.setattr(train_default_head, "check_not_collapsed", lambda stage, calibration: checked.append(stage))
    monkeypatch.setattr(export_module, "check_not_collapsed", lambda stage, calibration: None)  # the export-time check
    runs, export = tmp_path / "runs", tmp_path / "export"
    assert train_default_head.main(["--runs_dir", str(runs), "--export_dir", str(export)]) == 0

    record = json.loads((runs / "recipe.json").read_text())
    assert set(record["seconds"]) == {"stage1", "stage2", "stage3", "total"}
    assert checked == ["stage1", "stage2", "stage3"] and record["head"] == str(runs / "s3" / "head")
    assert (runs / "s1" / "head" / "adapter_model.safetensors").is_file()
    assert not (tmp_path / "elsewhere").exists()  # the recipe's runs_dir overrides the stage config
    exported = json.loads((export / "ares_calibration.json").read_text())["training"]  # only the last stage exports
    assert exported["mix"]["first_index"] == 4_000_000 and exported["mix"]["minimal_pairs"] is True
    for stage in ("s2", "s3"):
        assert (runs / stage / "head" / "ares_calibration.json").is_file()

    def collapsed(stage, calibration):
        raise TrainingCollapsed(f"{stage}: collapsed")

    monkeypatch.setattr(export_module, "check_not_collapsed", collapsed)  # stage 2's head fails before it is exported
    with pytest.raises(TrainingCollapsed, match="collapsed"):
        train_default_head.main(["--runs_dir", str(tmp_path / "runs2"), "--export_dir", str(tmp_path / "export2")])
    assert (tmp_path / "runs2" / "s3" / "head").is_dir() and not (tmp_path / "export2").exists()


def test_default_head_recipe_stops_when_a_stage_collapsed():
    from ares_rerank.training.head import check_not_collapsed

    splits = {"training": {"splits": {"test": {"pairs": 200, "entailed": 70}}}}
    check_not_collapsed("stage1", {"test": {"accuracy": 0.90}, **splits})
    from ares_rerank.training import TrainingCollapsed

    with pytest.raises(TrainingCollapsed, match="stage1: held-out accuracy 0.650 .* majority class \\(0.650\\)"):
        check_not_collapsed("stage1", {"test": {"accuracy": 0.65}, **splits})


def test_recipes_parse_the_shipped_mix_and_the_varied_one_exports_nothing(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from training import train_default_head

    seen = []

    def fake_train(mix, args):
        seen.append((mix, args))
        return SimpleNamespace(calibration={})

    monkeypatch.setattr(train_default_head, "train_head", fake_train)
    assert train_default_head.main(["--recipe", "varied", "--runs_dir", str(tmp_path / "v")]) == 0
    (mix1, args1), (mix2, args2) = seen
    assert mix1.composed_share == 0 and mix1.distractor_share == 0 and not mix1.minimal_pairs
    assert mix2.composed_share == 0.5 and mix2.distractor_share == 0.3 and mix2.minimal_pairs
    assert set(mix2.name_styles) == set(NAME_STYLES) - {"quad"} and mix2.first_index == 2_000_000
    assert args2.export_dir in ("", None) and args2.init_adapter == str(tmp_path / "v" / "default_head_stage1" / "head")
    seen.clear()
    assert train_default_head.main(["--runs_dir", str(tmp_path / "d"), "--export_dir", ""]) == 0
    # the shipped recipe: v2's mix, pinned against generator defaults, stage 4's random wordings, then two GPU stages
    # on recipe chains
    (mix1, _), (mix2, args2), (mix3, args3), (mix4, args4), (mix5, args5), (mix6, args6) = seen
    assert args5.init_adapter == str(tmp_path / "d" / "default_head_stage4" / "head") and args5.export_dir == ""
    assert args6.init_adapter == str(tmp_path / "d" / "default_head_stage5" / "head") and args6.export_dir == ""
    assert mix5.recipe_share == mix6.recipe_share == 0.65 and args6.overwrite_default_head
    seen.clear()
    # the CPU stages alone: four stages, and by default no export (the shipped folder holds stage 6's head)
    assert train_default_head.main(["--runs_dir", str(tmp_path / "c"), "--last_stage", "stage4"]) == 0
    assert len(seen) == 4 and seen[-1][1].export_dir == ""
    assert json.loads((tmp_path / "c" / "recipe.json").read_text())["export_dir"] == ""
    with pytest.raises(SystemExit):
        train_default_head.main(["--runs_dir", str(tmp_path / "x"), "--last_stage", "stage9"])
    assert args2.init_adapter == str(tmp_path / "d" / "default_head_stage1" / "head")
    assert args3.init_adapter == str(tmp_path / "d" / "default_head" / "head") and args3.export_dir == ""
    assert args4.init_adapter == str(tmp_path / "d" / "default_head_stage3" / "head") and args4.export_dir == ""
    assert mix3.first_index == 4_000_000 and mix3.num_chains == 3000 and args3.max_steps == 2400
    assert mix4.first_index == 6_000_000 and mix4.random_wording_share == 0.5 and "multi" in mix4.name_styles
    assert args4.calibration_method == "temperature"  # Platt's bias moved long chains' decisions (training/README)
    for mix in (mix1, mix2, mix3, mix4):
        assert mix.templates == ["paper", "hold", "make", "implies"] and mix.composed_share == 0
        assert mix.distractor_share == 0 and mix.recipe_share == 0
    for mix in (mix1, mix2, mix3):
        assert mix.name_styles == ["letter", "pair", "quad", "word"] and mix.random_wording_share == 0
    assert json.loads((tmp_path / "d" / "recipe.json").read_text())["recipe"] == "default"


def test_recipe_bf16_flag_reaches_every_stage(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import torch

    from training import train_default_head

    seen = []
    monkeypatch.setattr(train_default_head, "train_head",
                        lambda mix, args: seen.append(args) or SimpleNamespace(calibration={}))
    assert train_default_head.main(["--runs_dir", str(tmp_path / "d"), "--export_dir", "", "--bf16"]) == 0
    assert len(seen) == len(train_default_head.STAGES) and all(args.bf16 for args in seen)
    assert all(args.use_cpu for args in seen) or torch.cuda.is_available()  # CPU autocast needs use_cpu
    assert json.loads((tmp_path / "d" / "recipe.json").read_text())["bf16"] is True
    seen.clear()
    assert train_default_head.main(["--runs_dir", str(tmp_path / "e"), "--export_dir", ""]) == 0
    assert not any(args.bf16 for args in seen)


@pytest.mark.slow
@pytest.mark.parametrize("continued", [False, True])
def test_modules_to_save_trains_the_position_embeddings_and_reloads_them(tmp_path, tiny_nli_path, continued):
    import torch
    from transformers import AutoModel

    from ares_rerank.backbones.nli import EntailmentHead
    from ares_rerank.training.head import train_head

    flags = {"modules_to_save": "position_embeddings", "learning_rate": 1e-2}
    if continued:  # an adapter trained without them, continued with them (a later stage of a curriculum)
        first, first_args = _tiny_args(tmp_path / "first", tiny_nli_path, max_steps=2)
        flags["init_adapter"] = str(train_head(first, first_args).folder)
    mix, args = _tiny_args(tmp_path, tiny_nli_path, **flags)
    trained = train_head(mix, args)
    folder = trained.folder
    config = json.loads((folder / "adapter_config.json").read_text())
    assert "position_embeddings" in config["modules_to_save"]
    assert len(config["modules_to_save"]) == len(set(config["modules_to_save"]))

    base = AutoModel.from_pretrained(tiny_nli_path).embeddings.position_embeddings.weight
    reloaded = EntailmentHead.from_pretrained(folder, premise_selection="relevant:6", max_length=256, device="cpu")
    tuned = reloaded.model.get_input_embeddings()  # word embeddings stay the base's; positions are the trained copy
    positions = [p for n, p in reloaded.model.named_parameters()  # the trained copy (peft keeps the original beside)
                 if "position_embeddings" in n and "original_module" not in n]
    assert torch.equal(tuned.weight, AutoModel.from_pretrained(tiny_nli_path).embeddings.word_embeddings.weight)
    assert len(positions) == 1 and not torch.allclose(positions[0], base)

    chains = load_claimtrees(2, 5, start=60)
    premises = [list(c.base_claims) for c in chains for _ in c.steps]
    hypotheses = [s for c in chains for s in c.steps]
    live = EntailmentHead(trained.model.eval(), trained.tokenizer, temperature=trained.calibration["temperature"],
                          premise_selection="relevant:6", max_length=256)
    np.testing.assert_allclose(reloaded.entailment_probs(premises, hypotheses),
                               live.entailment_probs(premises, hypotheses), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_max_train_seconds_stops_early_and_keeps_an_evaluated_checkpoint(tmp_path, tiny_nli_path):
    from ares_rerank.training.head import train_head

    # a budget far below one step: training stops after its first step, which is evaluated and checkpointed
    mix, args = _tiny_args(tmp_path, tiny_nli_path, max_steps=50, eval_steps=40, save_steps=40,
                           max_train_seconds=1e-6)
    trained = train_head(mix, args)
    record = trained.calibration["training"]
    assert record["steps"] == 1 and record["stopped_by_time_budget"] and record["best_step"] == 1
    assert (trained.folder / "ares_calibration.json").is_file()
    for bad in ("-1", "nan", "inf"):  # NaN compared false both ways and never stopped a run
        with pytest.raises(ValueError, match=f"max_train_seconds={bad}.* must be a finite number >= 0"):
            _tiny_args(tmp_path, tiny_nli_path, max_train_seconds=bad)


@pytest.mark.slow
def test_stop_at_step_replays_the_start_of_a_longer_schedule(tmp_path, tiny_nli_path):
    from ares_rerank.training.head import train_head

    # stopped at step 3 of a 50-step schedule: evaluated and checkpointed there, the learning rate still decaying
    # over 50 steps (not 3)
    mix, args = _tiny_args(tmp_path, tiny_nli_path, max_steps=50, eval_steps=40, save_steps=40, stop_at_step=3,
                           warmup_steps=0, logging_steps=1)
    trained = train_head(mix, args)
    record = trained.calibration["training"]
    assert record["steps"] == 3 and record["stop_at_step"] == 3 and record["best_step"] == 3
    state = json.loads((tmp_path / "run" / "checkpoint-3" / "trainer_state.json").read_text())
    rates = [entry["learning_rate"] for entry in state["log_history"] if "learning_rate" in entry]
    assert rates and min(rates) > 0.9 * args.learning_rate
    for bad in ("-1", "51"):
        with pytest.raises(ValueError, match=f"stop_at_step={bad} must be 0 .off. or a step in 1..max_steps"):
            _tiny_args(tmp_path, tiny_nli_path, max_steps=50, stop_at_step=bad)


def test_modules_to_save_must_name_a_module_and_outputs_stay_out_of_the_package(tmp_path, tiny_nli_path):
    import ares_rerank
    from ares_rerank.training.head import load_base

    _, args = _tiny_args(tmp_path, tiny_nli_path, modules_to_save="position_embedingz")
    with pytest.raises(ValueError, match=r"\['position_embedingz'\] names no module .*'position_embeddings'"):
        load_base(args)
    package = Path(ares_rerank.__file__).resolve().parent
    for flag in ("output_dir", "export_dir"):
        with pytest.raises(ValueError, match=f"{flag}: .* is inside the installed ares_rerank package"):
            _tiny_args(tmp_path, tiny_nli_path, **{flag: str(package / "runs")})
    from ares_rerank.training.prm import PRMTrainingArguments

    with pytest.raises(ValueError, match="output_dir: .* is inside the installed ares_rerank package"):
        PRMTrainingArguments(model_name_or_path=str(tiny_nli_path), output_dir=str(package / "prm-run"))
