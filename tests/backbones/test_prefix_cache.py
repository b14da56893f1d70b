"""Shared-prefix reuse on tiny Qwen2 models: a batch's common head runs once with a KV cache, and every value read
equals the full pass (float32, 1e-4), for the token-classifier PRM, the causal PRM and the LLM judge."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from ares_rerank import AresConfig, Chain, load_backbone, score_chains
from ares_rerank.backbones.hf import HFBackbone
from ares_rerank.backbones.prefix import causal_cache_argument, plan_batches, shared_prefix_length
from ares_rerank.backbones.prms import StepTagPRM
from tiny_models import STEP_TAG, tiny_remote_code_prm


BASE = ["Let x = 3.", "Let y = 4.", "We have pepper. We have garlic."]
STEPS = ["Then 2x = 6.", "So x + y = 7.", "We can now do the step.", "The answer is 7."]
CHAINS = [Chain(BASE, STEPS), Chain(["I have AB.", "Rule: AB -> CD"], ["I use rule (AB -> CD) to derive CD."])]
TOL = 1e-4


def _load(path, kind, **options):
    return load_backbone(path, kind=kind, device="cpu", dtype="float32", cache_size=0, **options)


@pytest.fixture(scope="module", params=["prm", "prm-causal"])
def prm_pair(request, tiny_prm_path, tiny_causal_lm_path):
    """(reuse on, reuse off) for a Qwen2 token classifier (StepTagPRM) and a Qwen2 causal LM (CausalPRM); the
    within-batch shared head only (the store across calls has its own tests)."""
    path = tiny_prm_path if request.param == "prm" else tiny_causal_lm_path
    options = {"prefix_store_mb": 0} if request.param == "prm" else {"step_tag": STEP_TAG, "prefix_store_mb": 0}
    return _load(path, request.param, **options), _load(path, request.param, prefix_cache=False, **options)


def _rows(prm, case):
    """Token rows of one batch shape: ``case`` names what they share."""
    long = prm.encode_chain(BASE, STEPS)["input_ids"]
    if case == "nothing":  # the first token already differs
        return [long[:30], [long[1]] + long[1:25], [long[2]] + long[2:40]]
    if case == "all-but-one":
        return [long[:50], long[:49] + [long[60]], long[:49] + [long[61]]]
    if case == "suffix-lengths":  # one shared head, suffixes of 1, 9 and 30 tokens
        return [long[:41], long[:40] + long[50:59], long[:40] + long[60:90]]
    if case == "one-is-a-prefix":  # a row that is a head of another: the head stops one token short of it
        return [long[:45], long[:70], long[:45]]
    raise ValueError(case)


@pytest.mark.parametrize("case", ["nothing", "all-but-one", "suffix-lengths", "one-is-a-prefix"])
def test_forward_logits_equal_the_full_pass_at_every_real_token(prm_pair, case):
    on, _ = prm_pair
    rows = _rows(on, case)
    batch = on.pad([{"input_ids": r} for r in rows])
    before = on.token_stats.shared_heads
    with torch.inference_mode():
        full = on.model(**batch).logits
        got = on.forward_logits(batch)
    real = batch["attention_mask"].bool()
    assert got.shape == full.shape
    assert (got - full)[real].abs().max().item() < TOL
    head = shared_prefix_length(rows)
    assert on.token_stats.shared_heads - before == (0 if case == "nothing" else 1)
    passes = on.stats.forward_passes
    on.score_encoded([{"input_ids": r, "tags": [len(r) - 1]} for r in rows])  # one batch; a shared head: 2 calls
    assert on.stats.forward_passes - passes == (1 if case == "nothing" else 2)
    assert head == {"nothing": 0, "all-but-one": 49, "suffix-lengths": 40, "one-is-a-prefix": 44}[case]


def test_tag_probs_read_tags_inside_the_shared_head(prm_pair):
    """A whole-chain item read at every tag, twice in one batch: most tags lie in the head both rows share."""
    on, off = prm_pair
    item = {**on.encode_chain(BASE, STEPS), "all_tags": True}
    got, want = on.tag_probs([item, item, {**item, "all_tags": False}]), off.tag_probs([item, item, item])
    assert got[0] == pytest.approx(want[0], abs=TOL) and got[1] == pytest.approx(want[1], abs=TOL)
    assert got[2] == pytest.approx(want[2][-1:], abs=TOL)


@pytest.mark.parametrize("mode", ["exact", "sample"])
def test_ares_scores_are_the_same_with_reuse_and_fewer_tokens_reach_the_model(prm_pair, mode):
    on, off = prm_pair
    on.reset_stats(), off.reset_stats()
    config = AresConfig(mode=mode, prior=0.7, seed=1)
    got, want = score_chains(CHAINS, on, config=config), score_chains(CHAINS, off, config=config)
    for g, w in zip(got, want):
        assert g.step_scores == pytest.approx(w.step_scores, abs=TOL)
    assert on.stats.pairs_computed == off.stats.pairs_computed
    assert on.token_stats.shared_heads > 0 and on.token_stats.reused > 0
    assert on.token_stats.tokens < off.token_stats.tokens and off.token_stats.reused == 0


@pytest.mark.parametrize("options", [{"answer_tokens": ("Yes", " No")}, {"mode": "likert"}], ids=["yes-no", "likert"])
def test_llm_judge_is_the_same_with_reuse(tiny_causal_lm_path, options):
    """Yes/No reads one next-token distribution; Likert scores multi-token labels as (prompt + label) sequences,
    whose shared head is the prompt."""
    on, off = _load(tiny_causal_lm_path, "judge", **options), _load(tiny_causal_lm_path, "judge", prefix_cache=False,
                                                                    **options)
    premises = [BASE, BASE[:2], BASE[:2] + STEPS[:1], BASE + STEPS[:1], []]  # masks keep the first claims' head
    hypotheses = [STEPS[1], STEPS[1], STEPS[1], STEPS[2], STEPS[3]]
    assert on.entailment_probs(premises, hypotheses) == pytest.approx(off.entailment_probs(premises, hypotheses),
                                                                      abs=TOL)
    assert on.token_stats.reused > 0 and on.token_stats.tokens < off.token_stats.tokens


def test_plan_batches_keeps_heads_together_and_still_fills_batches():
    a = [[1] * 60 + [k] for k in range(4)]  # four rows sharing a 60-token head
    b = [[2] * 60 + [k] for k in range(4)]  # four others sharing another
    batches = plan_batches(a + b, batch_size=8)
    assert sorted(map(sorted, batches)) == [[0, 1, 2, 3], [4, 5, 6, 7]]  # not one batch sharing nothing
    unrelated = [[k] * 5 for k in range(10)]
    batches = plan_batches(unrelated, batch_size=4)
    assert [len(b) for b in batches] == [4, 4, 2] and sorted(i for b in batches for i in b) == list(range(10))
    assert plan_batches([], batch_size=4) == []


def test_plan_batches_without_heads_cuts_where_padding_costs_more_than_a_call():
    lengths = [400] * 3 + [20] * 10 + [200] * 3  # one ARES wave: premise subsets of very different lengths
    rows = [[7] * n for n in lengths]
    batches = plan_batches(rows, batch_size=16, shared_heads=False)
    assert sorted(i for b in batches for i in b) == list(range(16)) and all(len(b) <= 16 for b in batches)
    widths = [sorted({lengths[i] for i in b}) for b in batches]
    assert widths == [[20], [200], [400]]  # the short ones are not padded to 400 (a fixed chunk of 16 would)
    same = plan_batches([[7] * 50] * 20, batch_size=8, shared_heads=False)
    assert len(same) == 3 and all(len(b) <= 8 for b in same)  # equal lengths: as few calls as batch_size allows
    assert plan_batches([], batch_size=4, shared_heads=False) == []


def test_an_encoder_cuts_waves_by_padding_on_a_cpu_and_keeps_the_fewest_calls_on_an_accelerator(
        tiny_nli_path, monkeypatch):
    head = load_backbone(tiny_nli_path, kind="nli", batch_size=16)
    items = [{"input_ids": [7] * n} for n in [400] * 3 + [20] * 10 + [200] * 3]
    on_cpu = head.batch_plan(items)
    assert len(on_cpu) == 3 and sorted(i for b in on_cpu for i in b) == list(range(16))
    monkeypatch.setattr(HFBackbone, "device", property(lambda self: torch.device("meta")))  # stands in for a GPU
    assert [sorted(b) for b in head.batch_plan(items)] == [list(range(16))]  # launch-bound: one call for 16
    wider = head.batch_plan(items + items[:4])
    assert len(wider) == 2 and max(map(len, wider)) <= 16  # ceil(20 / 16) calls, cut where they pad least


def test_shared_prefix_length_leaves_every_row_a_token():
    assert shared_prefix_length([[1, 2, 3]]) == 0
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3]]) == 2
    assert shared_prefix_length([[1, 2, 3], [1, 2, 4, 5]]) == 2
    assert shared_prefix_length([[1, 2], [3, 2]]) == 0


def test_the_option_defaults_on_for_decoders_and_off_for_encoders(tiny_prm_path, tiny_nli_path, tmp_path):
    assert _load(tiny_prm_path, "prm").prefix_cache is True
    assert load_backbone(tiny_prm_path, prefix_cache=False).prefix_cache is False  # flows through load_backbone
    bert = AutoModelForSequenceClassification.from_pretrained(tiny_nli_path).eval()
    assert causal_cache_argument(bert) is None and causal_cache_argument(None) is None
    tokenizer = AutoTokenizer.from_pretrained(tiny_nli_path)
    assert HFBackbone(bert, tokenizer).prefix_cache is False
    with pytest.raises(ValueError, match="prefix_cache=True.*BertForSequenceClassification.*not a causal decoder"):
        HFBackbone(bert, tokenizer, prefix_cache=True)
    with pytest.raises(TypeError, match="prefix_cache='yes'"):
        HFBackbone(bert, tokenizer, prefix_cache="yes")
    assert load_backbone(str(tiny_nli_path), kind="nli", prefix_cache=False).prefix_cache is False  # an NLI head too
    with pytest.raises(ValueError, match="not a causal decoder"):
        load_backbone(str(tiny_nli_path), kind="nli", prefix_cache=True)
    remote = load_backbone(tiny_remote_code_prm(tmp_path / "remote"), trust_remote_code=True)
    assert remote.prefix_cache is False  # its forward takes no cache


class _IgnoresCache(torch.nn.Module):
    """A decoder whose forward names a cache but never fills it."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.config = inner, inner.config

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=None):
        return self.inner(input_ids=input_ids, attention_mask=attention_mask)


def test_a_model_that_ignores_the_cache_falls_back_to_the_full_pass(tiny_causal_lm_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_causal_lm_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_causal_lm_path)
    prm = StepTagPRM(_IgnoresCache(model), tokenizer, positive_index=0, cache_size=0)
    assert prm.prefix_cache is True
    item = prm.encode_chain(BASE, STEPS)
    with pytest.warns(UserWarning, match="did not fill it"):
        got = prm.tag_probs([item, item])
    assert prm.prefix_cache is False and got[0] == got[1]


# -- the prefix store: inputs that extend an input read earlier ------------------------------------------------------
def test_an_input_that_extends_a_stored_one_runs_only_its_new_tokens(tiny_causal_lm_path):
    prm = _load(tiny_causal_lm_path, "prm-causal", step_tag=STEP_TAG)
    long = prm.encode_chain(BASE, STEPS)["input_ids"]
    with torch.inference_mode():
        first = prm.forward_logits(prm.pad([{"input_ids": long[:60]}]), transform_key="all")
        tokens = prm.token_stats.tokens
        batch = prm.pad([{"input_ids": long}, {"input_ids": long[:20] + long[40:70]}])
        got = prm.forward_logits(batch, transform_key="all")
        full = prm.model(**batch).logits
    real = batch["attention_mask"].bool()
    assert (got - full)[real].abs().max().item() < TOL and (first[0] - full[0, :60]).abs().max().item() < TOL
    # row 0 extends the stored 60 tokens: only its rest ran; row 1 shares 20 (not worth a call): it ran whole
    assert prm.token_stats.reused == 60 and prm.token_stats.tokens - tokens == (len(long) - 60) + 50
    assert len(prm.prefix_store) == 2  # the 60 tokens were dropped: the input that extends them holds them
    with torch.inference_mode():  # no transform_key: nothing stored or reused
        prm.forward_logits(prm.pad([{"input_ids": long + [5]}]))
    assert prm.token_stats.reused == 60


def test_ares_with_the_store_gives_the_same_scores_from_fewer_tokens(tiny_causal_lm_path):
    chains = CHAINS * 2  # the second copy of each chain is read from its first one's stored inputs
    runs = {}
    for mb in (0, 64):
        prm = _load(tiny_causal_lm_path, "prm-causal", step_tag=STEP_TAG, prefix_store_mb=mb)
        scores = score_chains(chains, prm, config=AresConfig(prior=1.0, seed=0))
        runs[mb] = ([s for c in scores for s in c.step_scores], prm.token_stats.tokens, prm.token_stats.reused)
    assert runs[64][0] == pytest.approx(runs[0][0], abs=TOL)
    assert runs[64][1] < runs[0][1] and runs[64][2] > runs[0][2]


def test_the_store_is_bounded_and_can_be_off(tiny_causal_lm_path, tiny_nli_path):
    from ares_rerank.backbones.kv_store import PrefixStore

    store = PrefixStore(max_bytes=4000)
    for i in range(5):
        ids = list(range(i, i + 40))
        layers = [(torch.zeros(1, 1, 40, 4), torch.zeros(1, 1, 40, 4))]  # 1,280 bytes with the logits
        store.put("k", ids, layers, torch.zeros(40, 2))
        assert store.nbytes <= 4000
    assert len(store) == 2 and store.longest("k", list(range(4, 50)))[1] == 40
    assert store.longest("other", list(range(4, 50))) == (None, 0)  # another transform's logits are not reused
    assert _load(tiny_causal_lm_path, "prm-causal", step_tag=STEP_TAG, prefix_store_mb=0).prefix_store is None
    assert load_backbone(tiny_nli_path, kind="nli").prefix_store is None  # an encoder: no prefix to reuse
    with pytest.raises(ValueError, match="prefix_store_mb=-1"):
        _load(tiny_causal_lm_path, "prm-causal", step_tag=STEP_TAG, prefix_store_mb=-1)
