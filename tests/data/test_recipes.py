"""CaptainCookRecipes generator: the spec's golden vector, fold fingerprint, claim formats and data-dir resolution."""

from __future__ import annotations

import numpy as np
import pytest

from ares_rerank.data.paths import DATA_DIR_ENV
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


def test_every_evaluation_entry_is_unchanged(recipe_dir):
    """The training additions (recipe_steps, recipe_variant) share the builder: the 1000 entries stay byte for byte."""
    import hashlib
    import json

    chains = load_recipes()
    record = json.dumps([[c.base_claims, c.steps, c.labels, c.id, c.meta] for c in chains])
    assert hashlib.sha256(record.encode()).hexdigest() == (
        "46672bc4ee4bc3afb5c7d094fe7570c92ef0f274273762e98bb129d4e660409d")


def test_recipe_steps_give_the_graph_as_the_chains_write_it(recipe_dir, first100):
    from ares_rerank.data.recipes import recipe_steps

    chain = first100[0]
    steps = recipe_steps(dict(load_recipe_graphs())[chain.meta["recipe"]])
    assert [s.claim for s in steps] == list(chain.steps) and [s.id for s in steps] == chain.meta["step_ids"]
    assert steps[0].predecessors == ("START",) and steps[0].ingredients == ("garlic clove",)
    assert all(s.rule in chain.base_claims for s in steps if s.rule is not None)
    assert steps[-1].text == "END" and steps[-1].ingredients == ()


@pytest.mark.parametrize("delete", ["ingredient", "rule", "start", "none"])
def test_recipe_variants_delete_one_claim_and_label_what_depends_on_it(recipe_dir, delete):
    from ares_rerank.backbones.oracle import RecipeOracle
    from ares_rerank.data.recipes import START_CLAIM, recipe_variant

    for name, graph in load_recipe_graphs()[::3]:
        chain = recipe_variant(name, graph, seed=7, delete=delete)
        assert chain == recipe_variant(name, graph, seed=7, delete=delete)  # deterministic
        missing = chain.meta["deleted_claim"]
        assert (missing is None) == (delete == "none") and missing not in chain.base_claims
        assert (START_CLAIM in chain.base_claims) == (delete != "start")
        if delete == "none":
            assert set(chain.labels) == {0}
        if delete == "start":
            assert set(chain.labels) == {1}  # nothing can start
        oracle = RecipeOracle(graph)
        for k, step in enumerate(chain.steps):  # the labels are the truth of each sound prefix
            sound = list(chain.base_claims) + [s for s, y in zip(chain.steps[:k], chain.labels[:k]) if y == 0]
            assert oracle.entailment_probs([sound], [step]) == [1.0 - chain.labels[k]]
    with pytest.raises(ValueError, match="not a recipe deletion"):
        recipe_variant(name, graph, 0, delete="step")
