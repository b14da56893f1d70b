"""CaptainCookRecipes generator: the spec's golden vector, fold fingerprint, claim formats and data-dir resolution."""

from __future__ import annotations

import numpy as np
import pytest

from ares_rerank.data.paths import DATA_DIR_ENV, shared_data_dir
from helpers import shared_data

from ares_rerank.data.recipes import NUM_RECIPE_ENTRIES, load_recipe_graphs, load_recipes, recipe_example


@pytest.fixture(scope="module")
def recipe_dir():
    """The recipe graphs folder; tests that need it skip (with the reason) when the shared data is absent."""
    return shared_data("recipe_graphs")


@pytest.fixture(scope="module")
def first100(recipe_dir):
    return load_recipes(100)


def test_golden_vector_idx0(first100):
    chain = first100[0]
    assert chain.num_base == 22 and chain.num_steps == 17
    assert list(chain.base_claims[:3]) == ["We have pepper.", "We have garlic.", "We have onion."]
    assert chain.base_claims[3].startswith("Only after the necessary preceding steps (")
    assert chain.base_claims[-1] == "We now START."
    assert chain.meta["dropped_claim"] == "We have carrot." and "We have carrot." not in chain.base_claims
    assert chain.labels == (0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
    assert chain.id == "captaincook-0" and chain == recipe_example(0)


def test_fold_prevalence_matches_spec(first100):
    kfold = pytest.importorskip("sklearn.model_selection").KFold(n_splits=5, shuffle=True, random_state=42)
    prevalence = [
        round(float(np.mean([label for i in test for label in first100[i].labels])), 4)
        for _, test in kfold.split(np.arange(len(first100)))
    ]
    assert prevalence == [0.5749, 0.6398, 0.5413, 0.5199, 0.5506]


def test_claim_formats(first100):
    chain = first100[0]
    rules = [c for c in chain.base_claims if c.startswith("Only after")]
    assert all(", And if we have all the ingredients, we can then " in c and c.endswith(".") for c in rules)
    assert chain.steps[0] == (
        "Because we have completed all previous steps (START), and have all necessary ingredients (garlic clove), we "
        "can now do the step Peel-Peel 1 garlic clove. And now we have completed this step Peel-Peel 1 garlic clove."
    )
    # no ingredient list: the clause is left out, leaving two spaces
    assert chain.steps[2].startswith("Because we have completed all previous steps (START),  we can now do the step")
    assert chain.steps[-1].endswith("we can now do the step END. And now we have completed this step END.")
    for c in first100:
        assert c.base_claims.count("We now START.") == 1 and c.base_claims[-1] == "We now START."
        assert c.steps[-1].endswith("this step END.") and "step START." not in " ".join(c.steps)


def test_dataset_structure(recipe_dir, first100):
    graphs = load_recipe_graphs()
    assert len(graphs) == 24 and [name for name, _ in graphs] == sorted(name for name, _ in graphs)
    by_recipe = {}
    for chain in first100:
        graph = dict(graphs)[chain.meta["recipe"]]
        assert chain.num_steps == len(graph["topo_order"]) - 1
        assert chain.meta["step_ids"] == graph["topo_order"][1:]
        by_recipe.setdefault(chain.meta["recipe"], []).append(chain)
    for chains in by_recipe.values():  # one recipe -> one dropped ingredient, same steps and labels
        assert len({(c.steps, c.labels, c.meta["dropped_ingredient"]) for c in chains}) == 1
        assert len({frozenset(c.base_claims) for c in chains}) == 1
    assert len(load_recipes()) == NUM_RECIPE_ENTRIES
    assert load_recipes(3, start=10) == first100[10:13]


def test_unsound_steps_follow_the_dropped_ingredient_downstream(first100):
    graphs = dict(load_recipe_graphs())
    for chain in first100[:30]:
        graph, dropped = graphs[chain.meta["recipe"]], chain.meta["dropped_ingredient"]
        ids = sorted(int(k) for k in graph["steps"])
        uses = {s for s, m in zip(ids, graph["step_mapped_ingredients"]) if m and dropped in m}
        unsound = {s for s, label in zip(chain.meta["step_ids"], chain.labels) if label}
        assert uses <= unsound
        for src, dst in graph["edges"]:  # unsoundness is closed under successors
            assert src not in unsound or dst in unsound


def test_data_dir_variants(recipe_dir, monkeypatch):
    direct = load_recipes(2, data_dir=recipe_dir)  # the recipe_graphs folder itself
    assert direct == load_recipes(2, data_dir=recipe_dir.parent)
    monkeypatch.setenv(DATA_DIR_ENV, str(recipe_dir.parent))
    assert load_recipes(2) == direct


def test_missing_data_dir_error_names_parameter_path_and_fix(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="data_dir=") as info:
        load_recipes(1, data_dir=tmp_path / "nowhere")
    assert str(tmp_path / "nowhere" / "recipe_graphs") in str(info.value) and DATA_DIR_ENV in str(info.value)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match=DATA_DIR_ENV):
        load_recipes(1)


@pytest.mark.parametrize(("kwargs", "match"), [({"n": 1001}, "n=1001"), ({"n": 5, "start": 998}, "n=5"),
                                                ({"start": -1}, "start=-1")])
def test_bad_arguments(recipe_dir, kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_recipes(**kwargs)
    with pytest.raises(ValueError, match="idx=1000"):
        recipe_example(1000)
