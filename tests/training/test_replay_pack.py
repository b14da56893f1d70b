"""The replay pack: what adapting a recipe-trained head replays on a pip install, which has no recipe graphs."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from ares_rerank.backbones.loading import DEFAULT_HEAD_DIR
from ares_rerank.training.adapt import AdaptArguments, head_settings, replay_mix
from ares_rerank.training.head import claimtrees_oracle_for, split_mix
from ares_rerank.training.mix import chain_source
from ares_rerank.training.pairs import build_pairs
from ares_rerank.training.replay_pack import PACK_NAME, build_replay_pack, read_replay_pack


def _shipped_mix():
    return replay_mix(head_settings(DEFAULT_HEAD_DIR, "default")["record"])


def test_the_shipped_head_ships_a_small_pack_of_its_own_mix_with_the_source_named():
    path = DEFAULT_HEAD_DIR / PACK_NAME
    assert path.is_file() and path.stat().st_size < 400_000
    header = json.loads(gzip.decompress(path.read_bytes()).decode().splitlines()[0])
    assert "fallcat/ares" in header["source"] and "MIT" in header["source"]
    pack = read_replay_pack(DEFAULT_HEAD_DIR, _shipped_mix())
    assert pack is not None
    assert sorted(pack.pool) == ["fixed wordings", "random wordings", "recipe graphs"]
    assert all(len(ids) == 100 for ids in pack.pool.values())
    record = head_settings(DEFAULT_HEAD_DIR, "default")["record"]
    # the card's test split is what the before / after table measures: every one of its pairs is in the pack
    assert len(pack.splits["test"]) == record["test"]["num_pairs"] == 443
    assert len(pack.splits["val"]) == record["val"]["num_pairs"] == 399
    card = (DEFAULT_HEAD_DIR / "README.md").read_text()
    assert PACK_NAME in card and "fallcat/ares" in card and "MIT" in card


def test_the_shipped_pack_holds_the_pairs_the_mix_rebuilds_from_the_recipe_graphs():
    from helpers import shared_data

    data = str(shared_data("recipe_graphs").parent)
    mix = _shipped_mix()
    pack = read_replay_pack(DEFAULT_HEAD_DIR, mix)
    parts = split_mix(mix, data)
    by_id = {c.id: c for c in parts["train"]}

    def rebuilt(chains):
        return build_pairs(chains, mix.premise_selection, claimtrees_oracle_for, mix.subsets_per_step, mix.mix_seed,
                           mix.minimal_pairs, data_dir=data)

    for source, ids in pack.pool.items():
        assert {chain_source(by_id[i]) for i in ids} == {source}  # the pool is of the training split, by source
        picked = ids[:3] + ids[-2:]
        assert pack.train_pairs(picked) == rebuilt([by_id[i] for i in picked])
    assert pack.splits["test"] == rebuilt(parts["test"])
    assert pack.splits["val"] == rebuilt(parts["val"])


def test_a_pack_of_another_mix_is_not_read_and_a_broken_one_is_named(tmp_path):
    from dataclasses import replace

    shutil.copy(DEFAULT_HEAD_DIR / PACK_NAME, tmp_path / PACK_NAME)
    assert read_replay_pack(tmp_path, replace(_shipped_mix(), mix_seed=1)) is None
    assert read_replay_pack(tmp_path / "nothing", _shipped_mix()) is None
    (tmp_path / PACK_NAME).write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a readable replay pack"):
        read_replay_pack(tmp_path, _shipped_mix())


def test_without_recipe_graphs_the_shipped_head_replays_from_its_pack(monkeypatch):
    """What `adapt default` replays on a pip install: chains drawn evenly from the pack's pools, the test split whole;
    more chains than the pack holds say so (the command adds --data_dir and --replay_share 0)."""
    from ares_rerank.training import adapt

    monkeypatch.delenv("ARES_DATA_DIR", raising=False)
    args = AdaptArguments(chains_file="mine.jsonl", output_dir="out")
    replay = adapt.replay_parts(_shipped_mix(), args, DEFAULT_HEAD_DIR)
    assert replay["pack"] is True and len(replay["chains"]) == 100
    assert set(replay["sources"]) == {"fixed wordings", "random wordings", "recipe graphs"}
    assert len(set(replay["sources"].values())) == 1 and replay["sources"]["recipe graphs"] > 100  # even by source
    assert len(replay["test"]) == 443 and replay["val"] == []
    again = adapt.replay_parts(_shipped_mix(), AdaptArguments(chains_file="m", output_dir="o", seed=1),
                               DEFAULT_HEAD_DIR)
    assert again["chains"] != replay["chains"]  # another seed draws other chains of the pool
    with pytest.raises(FileNotFoundError, match="more than the head's replay pack holds"):
        adapt.replay_parts(_shipped_mix(), AdaptArguments(chains_file="m", output_dir="o", replay_chains=301),
                           DEFAULT_HEAD_DIR)
    with pytest.raises(FileNotFoundError):  # a head without a pack still needs the graphs
        adapt.replay_parts(_shipped_mix(), args, None)


@pytest.mark.slow
def test_adapt_runs_without_the_data_folder_on_a_head_that_ships_a_pack(tmp_path, tiny_nli_path, monkeypatch):
    """The done-when of issue 50 part 3 in small: a recipe-trained head with a pack adapts with no data folder, the
    adapted head records that the replay came from the pack, and carries the pack (adapting it again works too)."""
    from ares_rerank.cli import main
    from helpers import shared_data
    from test_adapt import _tiny_head, _write_chains

    head = tmp_path / "recipe-head"
    shutil.copytree(_tiny_head(tmp_path, tiny_nli_path), head)
    path = head / "ares_calibration.json"
    record = json.loads(path.read_text())
    record["training"]["mix"]["recipe_share"] = 0.5
    path.write_text(json.dumps(record))
    build_replay_pack(head, replay_mix(record), str(shared_data("recipe_graphs").parent), pool_per_source=4)
    monkeypatch.delenv("ARES_DATA_DIR", raising=False)
    chains = _write_chains(tmp_path / "mine.jsonl")
    flags = ["--chains_file", str(chains), "--max_steps", "1", "--batch_size", "4", "--replay_chains", "4",
             "--progress", "false"]
    out = tmp_path / "adapted"
    assert main(["adapt", str(head), "--output_dir", str(out), *flags]) == 0
    adaptation = json.loads((out / "head" / "ares_calibration.json").read_text())["adaptation"]
    assert adaptation["replay"]["from_pack"] is True and "recipe graphs" in adaptation["replay"]["sources"]
    assert (out / "head" / PACK_NAME).read_bytes() == (head / PACK_NAME).read_bytes()
    assert main(["adapt", str(out / "head"), "--output_dir", str(tmp_path / "again"), *flags]) == 0
