"""The public seams of the backbones: the HF encode / pad / score API, the kind registry, ``"module:attr"`` specs,
the shared pair cache, :class:`PairBatch`, and the judge logic the local and served judges share."""

from __future__ import annotations

import textwrap

import pytest

from ares_rerank import load_backbone
from ares_rerank.backbones.base import FunctionBackbone, PairBatch
from ares_rerank.backbones.cache import LRUCache, ScoringStats, cached_value, cached_values, pair_keys
from ares_rerank.backbones.judge import JudgeBase, LLMJudge
from ares_rerank.backbones.loading import BACKBONE_KINDS, KINDS, SERVED_KINDS, backbone_class
from ares_rerank.backbones.oracle import ClaimTreesOracle
from ares_rerank.backbones.openai_judge import OpenAIJudge
from ares_rerank.backbones.selection import get_selector


PREMISES = [["Let x = 3.", "Then 2x = 6."], ["Let x = 3."], []]
HYPOTHESES = ["so x + 1 = 4.", "so x + 1 = 4.", "The answer is 5."]
NUM_BASE = [1, 1, 0]


# -- the HF backbones' public encode / pad / score API ---------------------------------------------------------------
@pytest.mark.parametrize("kind", ["nli", "prm", "judge"])
def test_encode_pair_then_score_encoded_is_entailment_probs(kind, tiny_nli_path, tiny_prm_path, tiny_causal_lm_path):
    path = {"nli": tiny_nli_path, "prm": tiny_prm_path, "judge": tiny_causal_lm_path}[kind]
    options = {"answer_tokens": ("Yes", " No")} if kind == "judge" else {}  # single-token answers: one pass each
    backbone = load_backbone(path, kind=kind, device="cpu", dtype="float32", **options)
    if kind == "prm":
        want = backbone.entailment_probs(PREMISES, HYPOTHESES, num_base=NUM_BASE)
        items = [backbone.encode_pair(p, h, num_base=n) for p, h, n in zip(PREMISES, HYPOTHESES, NUM_BASE)]
    else:
        want = backbone.entailment_probs(PREMISES, HYPOTHESES)
        items = [backbone.encode_pair(p, h) for p, h in zip(PREMISES, HYPOTHESES)]
    assert backbone.score_encoded(items) == pytest.approx(want, abs=1e-6)
    batch = backbone.pad(items)
    assert set(batch) == {k for k in backbone.input_keys if k in items[0]} | {"attention_mask"}
    width = max(len(item["input_ids"]) for item in items)
    assert tuple(batch["input_ids"].shape) == (len(items), width)
    assert batch["attention_mask"].sum(dim=1).tolist() == [len(item["input_ids"]) for item in items]


def test_encode_pair_applies_selection_and_the_window_policy(tiny_nli_path):
    head = load_backbone(tiny_nli_path, kind="nli", device="cpu", premise_selection="relevant")
    claims = ["x = 3", "the sky is blue", "y = 5"]
    assert head.encode_pair(claims, "x + 1 = 4") == head.encode_pair(["x = 3"], "x + 1 = 4")  # selection first
    narrow = load_backbone(tiny_nli_path, kind="nli", device="cpu", max_length=24)
    item = narrow.encode_pair([f"claim number {i} about x" for i in range(20)], "x + 1 = 4")
    assert len(item["input_ids"]) <= 24 and narrow.stats.pairs_windowed == 1


def test_prm_encode_chain_and_tag_probs(tiny_prm_path):
    prm = load_backbone(tiny_prm_path, device="cpu", dtype="float32")
    item = prm.encode_chain(["Let x = 3."], ["Then 2x = 6.", "so x + 1 = 4."])
    assert len(item["tags"]) == 2 and [item["input_ids"][t] for t in item["tags"]] == [prm.tag_id] * 2
    every, last = prm.tag_probs([{**item, "all_tags": True}, item])
    assert len(every) == 2 and last == [every[-1]]
    assert prm.chain_step_probs(["Let x = 3."], ["Then 2x = 6.", "so x + 1 = 4."]) == pytest.approx(every)


# -- one registry of kinds, "module:attr" specs ----------------------------------------------------------------------
def test_every_kind_resolves_from_the_one_table():
    assert KINDS == tuple(BACKBONE_KINDS) and set(SERVED_KINDS) <= set(KINDS)
    for kind in KINDS:
        cls = backbone_class(kind)
        assert BACKBONE_KINDS[kind].endswith(":" + cls.__name__) and callable(cls.from_pretrained)
    with pytest.raises(ValueError, match="kind='reward' is unknown"):
        backbone_class("reward")


@pytest.fixture
def spec_module(tmp_path, monkeypatch):
    (tmp_path / "my_backbones.py").write_text(textwrap.dedent("""
        from ares_rerank.backbones.base import FunctionBackbone

        READY = FunctionBackbone(lambda P, H: [0.25] * len(H), name="ready")

        def make():
            return FunctionBackbone(lambda P, H: [0.75] * len(H), name="made")

        class Own:
            def entailment_probs(self, premises, hypotheses):
                return [1.0] * len(hypotheses)

        NOT_A_BACKBONE = 3

        def needs(model_name, *, device):
            return None

        def broken():
            raise OSError("weights not found")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_backbones"


def test_load_backbone_takes_a_module_attr_spec(spec_module):
    assert load_backbone(f"{spec_module}:READY").entailment_probs([[]], ["h"]) == [0.25]  # an object, as is
    assert load_backbone(f"{spec_module}:make").entailment_probs([[]], ["h"]) == [0.75]  # a factory, called
    assert type(load_backbone(f"{spec_module}:Own")).__name__ == "Own"  # a class, instantiated
    assert isinstance(load_backbone("ares_rerank.backbones.oracle:ClaimTreesOracle"), ClaimTreesOracle)


def test_module_attr_spec_errors_say_what_to_change(spec_module):
    with pytest.raises(ValueError, match=r"got \['batch_size'\].*do not apply"):
        load_backbone(f"{spec_module}:make", batch_size=4)
    with pytest.raises(ValueError, match=r"got \['kind'\]"):
        load_backbone(f"{spec_module}:make", kind="nli")
    with pytest.raises(ValueError, match="cannot import 'MISSING' from 'my_backbones'"):
        load_backbone(f"{spec_module}:MISSING")
    with pytest.raises(ValueError, match="cannot import 'x' from 'no_such_module_here'"):
        load_backbone("no_such_module_here:x")
    with pytest.raises(TypeError, match="has no entailment_probs"):
        load_backbone(f"{spec_module}:NOT_A_BACKBONE")
    # a factory is called with no arguments: one that needs some is refused before it runs, naming them
    with pytest.raises(TypeError, match=r"'my_backbones:needs'\) names a factory that needs arguments "
                                        r"\(model_name, device\)"):
        load_backbone(f"{spec_module}:needs")
    with pytest.raises(RuntimeError, match=r"'my_backbones:broken'\): the factory raised OSError: weights not found"):
        load_backbone(f"{spec_module}:broken")


# -- one pair cache, one pair batch, one judge -----------------------------------------------------------------------
def test_cached_values_computes_each_missing_key_once_in_one_call():
    cache, stats, calls = LRUCache(2), ScoringStats(), []

    def compute(keys):
        calls.append(list(keys))
        return [k * 10 for k in keys]

    assert cached_values(cache, stats, [1, 2, 1], compute) == [10, 20, 10]
    assert calls == [[1, 2]] and stats.cache_hits == 1
    assert cached_values(cache, stats, [2, 3], compute) == [20, 30]
    assert calls[-1] == [3] and stats.cache_hits == 2 and 1 not in cache  # 1 was the least recently used
    assert cached_value(cache, stats, 3, lambda: pytest.fail("cached")) == 30
    with pytest.raises(ValueError, match="cache_size=-1"):
        LRUCache(-1)


def test_pair_keys_select_premises_and_check_lengths():
    keys = pair_keys(get_selector("relevant"), [["x = 3", "sky"]], ["x + 1 = 4"], [("base", "step")])
    assert keys == [(("x = 3",), ("base",), "x + 1 = 4")]
    with pytest.raises(ValueError, match="2 premise lists for 1 hypotheses"):
        pair_keys(get_selector("all"), [[], []], ["h"])


def test_pair_batch_asks_each_pair_once():
    seen = []
    backbone = FunctionBackbone(lambda P, H: seen.append(len(H)) or [0.1 * (i + 1) for i in range(len(H))])
    batch = PairBatch()
    a = batch.add(["p"], "h", 1)
    b = batch.add(["p", "q"], "h", 1, key=(("p",), "h", 1))  # reads what a reads: the same pair
    c = batch.add(["q"], "h", 0)
    assert (a, b, c) == (0, 0, 1) and batch.premises == [["p"], ["q"]] and batch.num_base == [1, 0]
    assert batch.call(backbone).tolist() == pytest.approx([0.1, 0.2]) and seen == [2]


def test_the_two_judges_share_prompts_and_the_whole_chain_baseline():
    for name in ("render", "render_chain", "chain_step_probs"):
        assert getattr(LLMJudge, name) is getattr(JudgeBase, name) is getattr(OpenAIJudge, name)
    with pytest.raises(ValueError, match="missing_rating=2"):
        OpenAIJudge("http://127.0.0.1:9", missing_rating=2)


def test_entailment_probs_refuses_flat_premises_and_non_text_instead_of_scoring_them():
    """``(["Bob is a cat."], [...])`` was read as one premise per character; None was scored as the text "None"."""
    from ares_rerank.backbones.oracle import ClaimTreesOracle

    oracle = ClaimTreesOracle()
    with pytest.raises(TypeError, match=r"premises\[0\]='I have A' must be a list of claims"):
        oracle.entailment_probs(["I have A"], ["I have A"])
    with pytest.raises(TypeError, match="pair 0 holds NoneType None where text is expected"):
        oracle.entailment_probs([["I have A"]], [None])
    with pytest.raises(TypeError, match="not a single string"):
        oracle.entailment_probs("I have A", ["I have A"])


def test_an_aresconfig_field_set_later_is_checked_and_a_bad_one_leaves_it_as_it_was():
    from ares_rerank import AresConfig

    config = AresConfig(mode="sample")
    for name, value, match in (("mode", "bogus", "is not one of"), ("eps", 5.0, r"eps=5.0\) must be a number"),
                               ("seed", -5, "non-negative integer"), ("max_masks", 10**9, "max_masks=")):
        with pytest.raises(ValueError, match=match):
            setattr(config, name, value)
    assert config == AresConfig(mode="sample")  # unchanged
    config.eps = 0.2
    assert config.eps == 0.2 and config == AresConfig(mode="sample", eps=0.2)


def test_function_backbone_checks_its_function_takes_premises_and_hypotheses():
    from ares_rerank import FunctionBackbone

    with pytest.raises(TypeError, match=r"must take \(premises, hypotheses\), two lists"):
        FunctionBackbone(lambda premises: [0.5])  # failed with a bare TypeError at the first scoring call
    assert FunctionBackbone(lambda P, H, **kw: [0.5] * len(H)).entailment_probs([[]], ["x"]) == [0.5]
