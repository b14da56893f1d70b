"""PRM backbones on tiny Qwen2 models loaded through from_pretrained: the premise mask is applied, always."""

from __future__ import annotations

import itertools

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

from ares_rerank import AresConfig, Chain, load_backbone, score_chains
from ares_rerank.backbones.prms import CausalPRM, StepTagPRM
from tiny_models import STEP_TAG, tiny_qwen2_token_classifier, tiny_remote_code_prm


BASE = ["Let x = 3.", "Let y = 4."]
STEPS = ["Then 2x = 6.", "So x + y = 7.", "The answer is 7."]


@pytest.fixture(scope="module")
def prm(tiny_prm_path):
    return load_backbone(tiny_prm_path)  # Qwen2ForTokenClassification -> kind "prm"


def test_rendering_follows_the_qwen_layout(prm):
    text = prm.render(BASE, STEPS[:2])
    assert isinstance(prm, StepTagPRM) and text.count(STEP_TAG) == 2
    assert "<|im_start|>system\nPlease reason step by step" in text
    assert "<|im_start|>user\nLet x = 3.\nLet y = 4.<|im_end|>" in text
    assert f"<|im_start|>assistant\nThen 2x = 6.{STEP_TAG}So x + y = 7.{STEP_TAG}<|im_end|>" in text
    item = prm.encode_chain(BASE, STEPS[:2])
    assert [item["input_ids"][t] for t in item["tags"]] == [prm.tag_id] * 2
    assert item["input_ids"].count(prm.tag_id) == 2


def test_score_is_the_positive_probability_at_the_last_tag(prm, tiny_prm_path):
    model = AutoModelForTokenClassification.from_pretrained(tiny_prm_path).eval()
    ids = prm.tokenizer.encode(prm.render(BASE, STEPS[:2]), add_special_tokens=False)
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    last_tag = max(i for i, t in enumerate(ids) if t == prm.tag_id)
    expected = torch.softmax(logits[last_tag], dim=-1)[1].item()
    got = prm.entailment_probs([BASE + STEPS[:1]], [STEPS[1]], num_base=[2])
    assert got == pytest.approx([expected], abs=1e-5)


def test_the_mask_matters_every_mask_renders_a_different_input_and_score(prm):
    """The research code rendered one prompt for every mask; here two masks that differ only in an excluded earlier
    step give different inputs and different scores, and all 16 masks over 4 earlier claims are distinct."""
    earlier = BASE + STEPS[:2]
    full = prm.entailment_probs([earlier], [STEPS[2]], num_base=[2])[0]
    without_step1 = prm.entailment_probs([BASE + STEPS[1:2]], [STEPS[2]], num_base=[2])[0]
    assert prm.render(BASE, STEPS) != prm.render(BASE, STEPS[1:])
    assert full != without_step1
    texts, premises, num_base = set(), [], []
    for alpha in itertools.product((0, 1), repeat=4):
        base = [c for c, a in zip(BASE, alpha[:2]) if a]
        steps = [c for c, a in zip(STEPS[:2], alpha[2:]) if a]
        texts.add(prm.render(base, steps + [STEPS[2]]))
        premises.append(base + steps)
        num_base.append(len(base))
    scores = prm.entailment_probs(premises, [STEPS[2]] * 16, num_base=num_base)
    assert len(texts) == 16 and len(set(scores)) == 16


def test_ares_with_a_prm_evaluates_one_model_input_per_distinct_mask(tiny_prm_path):
    prm = load_backbone(tiny_prm_path)
    chain = Chain(BASE, STEPS)
    out = score_chains([chain], prm, config=AresConfig(mode="sample", prior=0.5, seed=3))
    assert out[0].evaluations > chain.num_steps  # several masks per step ...
    assert prm.stats.pairs_computed == out[0].evaluations  # ... each one a different model input
    passes = prm.stats.forward_passes
    score_chains([chain], prm, config=AresConfig(mode="sample", prior=0.5, seed=3))
    assert prm.stats.forward_passes == passes  # the same chain again: zero new forward passes


def test_score_chains_renders_base_claims_and_steps_in_their_turns(tiny_prm_path):
    prm = load_backbone(tiny_prm_path)
    chain = Chain(BASE, STEPS)
    explicit = [prm.entailment_probs([BASE + STEPS[:k]], [STEPS[k]], num_base=[2])[0] for k in range(3)]
    all_user_turn = prm.entailment_probs([BASE + STEPS[:2]], [STEPS[2]])[0]  # no roles given
    (prev,) = score_chains([chain], prm, method="entail-prev")
    assert prev.step_scores == explicit  # score_chains passes num_base: earlier steps go to the assistant turn
    assert all_user_turn != explicit[2]
    (ares,) = score_chains([chain], prm, config=AresConfig(mode="exact", prior=1.0, max_masks=1024, prune_mass=0.0))
    assert ares.step_scores[0] == explicit[0]  # step 1 has a single mask: all base claims
    with pytest.raises(ValueError, match="num_base"):
        prm.entailment_probs([BASE], [STEPS[0]], num_base=[3])


def test_whole_chain_pass_matches_per_step_scores(prm):
    chain = Chain(BASE, STEPS)
    whole = score_chains([chain], prm, method="prm-chain")[0]
    per_step = [prm.entailment_probs([BASE + STEPS[:k]], [STEPS[k]], num_base=[2])[0] for k in range(3)]
    assert whole.step_scores == pytest.approx(per_step, abs=1e-5)
    assert whole.evaluations == 1


def test_empty_premises_and_claims_containing_the_tag(prm):
    (value,) = prm.entailment_probs([[]], [STEPS[0]])
    assert 0.0 < value < 1.0
    item = prm.encode_chain([f"a {STEP_TAG} b"], [f"c {STEP_TAG}", "d"])
    assert item["input_ids"].count(prm.tag_id) == 2  # the tag inside claims was replaced, only ours remain


def test_tokenizer_without_the_step_tag_is_an_error(tiny_prm_path):
    with pytest.raises(ValueError, match="step_tag='<extra_9>' is not a single token"):
        load_backbone(tiny_prm_path, step_tag="<extra_9>")


def test_hypothesis_longer_than_the_window_is_an_error(tiny_prm_path):
    prm = load_backbone(tiny_prm_path, max_length=160)  # the system turn alone is ~80 tokens
    with pytest.raises(ValueError, match="not cut unless asked"):
        prm.entailment_probs([BASE], ["a very long step " * 60])
    long_base = [f"Fact {i}: z{i} = {i}." for i in range(40)]
    (value,) = prm.entailment_probs([long_base], ["So z3 = 3."], num_base=[40])
    assert prm.stats.pairs_windowed == 1 and 0 < prm.stats.premises_dropped < 40 and 0 < value < 1


def test_causal_prm_is_p_plus_over_plus_minus_at_the_tag(tiny_causal_lm_path):
    cprm = load_backbone(tiny_causal_lm_path, kind="prm-causal", step_tag=STEP_TAG)
    assert isinstance(cprm, CausalPRM)
    model = AutoModelForCausalLM.from_pretrained(tiny_causal_lm_path).eval()
    item = cprm.encode_chain(BASE, STEPS[:2])
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([item["input_ids"]])).logits[0, item["tags"][-1]]
    plus, minus = cprm.tokenizer.encode("+")[0], cprm.tokenizer.encode("-")[0]
    expected = torch.softmax(logits[[plus, minus]], dim=-1)[0].item()
    assert cprm.entailment_probs([BASE + STEPS[:1]], [STEPS[1]], num_base=[2]) == pytest.approx([expected], abs=1e-5)
    whole = cprm.chain_step_probs(BASE, STEPS)
    assert len(whole) == 3 and whole[1] == pytest.approx(expected, abs=1e-5)


def test_causal_prm_plain_text_with_a_newline_tag(tiny_causal_lm_path):
    cprm = load_backbone(tiny_causal_lm_path, kind="prm-causal", step_tag="\n", use_chat_template=False,
                         step_separator="")
    assert cprm.render(BASE, STEPS[:2]) == "Let x = 3.\nLet y = 4.\nThen 2x = 6.\nSo x + y = 7.\n"
    item = cprm.encode_chain(BASE, STEPS[:2])
    assert [item["input_ids"][t] for t in item["tags"]] == [cprm.tag_id] * 2
    assert item["tags"][-1] == len(item["input_ids"]) - 1  # nothing after the judged step's tag
    with pytest.raises(ValueError, match="good_token"):
        load_backbone(tiny_causal_lm_path, kind="prm-causal", step_tag=STEP_TAG, good_token="++ yes")


def test_remote_code_prm_needs_trust_remote_code(tmp_path):
    """A PRM shipping its own modeling code (auto_map with AutoModel only, as Qwen2.5-Math-PRM) loads when opted in."""
    path = tiny_remote_code_prm(tmp_path / "remote")
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_backbone(path, kind="prm")
    remote = load_backbone(path, trust_remote_code=True)  # kind detected: ...ForProcessRewardModel -> prm
    assert type(remote.model).__name__ == "TinyQwen2ForProcessRewardModel"
    # The same seed gives the same weights; the tokenizer is the remote one (AutoTokenizer picks a different class
    # for model_type qwen2 than for an unknown model_type).
    plain = AutoModelForTokenClassification.from_pretrained(tiny_qwen2_token_classifier(tmp_path / "plain")).eval()
    expected = StepTagPRM(plain, remote.tokenizer).entailment_probs([BASE], [STEPS[0]])
    assert remote.entailment_probs([BASE], [STEPS[0]]) == pytest.approx(expected, abs=1e-6)


def test_predict_on_a_prm_scores_each_step_after_its_premises(prm):
    pairs = [(BASE, STEPS[0]), (BASE + STEPS[:1], STEPS[1]), ("Let x = 3.", "Then 2x = 6.")]
    expected = prm.entailment_probs([BASE, BASE + STEPS[:1], ["Let x = 3."]], [STEPS[0], STEPS[1], "Then 2x = 6."])
    assert prm.predict(pairs, batch_size=2).tolist() == pytest.approx(expected)


def test_only_whole_tags_are_cleaned_from_claims():
    from ares_rerank.backbones.tokenization import clean_claim

    assert clean_claim("Такие задачи: ки x ки. кит", ["ки"]) == "Такие задачи:   x  . кит"  # inside words: kept
    assert clean_claim("a<extra_0>b", ["<extra_0>"]) == "a b"  # a tag of punctuation is whole wherever it stands


def test_window_drops_warn_once_with_counts(tiny_prm_path):
    prm = load_backbone(tiny_prm_path, max_length=160)
    long_base = [f"Fact {i}: z{i} = {i}." for i in range(40)]
    with pytest.warns(UserWarning, match=r"window of 160 tokens, so \d+ of its 40 premises were left out") as seen:
        prm.entailment_probs([long_base], ["So z3 = 3."], num_base=[40])
    assert len([w for w in seen if "window" in str(w.message)]) == 1
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per backbone
        prm.entailment_probs([long_base], ["So z4 = 4."], num_base=[40])
    assert prm.stats.pairs_windowed == 2


def test_whole_chain_that_cannot_fit_says_what_to_do(tiny_prm_path):
    """overlong_steps='truncate' cuts one judged step; a whole chain's steps are never cut: a clear error, not
    'cannot hold even an empty hypothesis'."""
    prm = load_backbone(tiny_prm_path, max_length=160, overlong_steps="truncate")
    steps = [f"Then z{i} = {i} + {i}." for i in range(30)]
    with pytest.raises(ValueError, match=r"30 steps need \d+ tokens.*never cuts steps.*method='ares'"):
        prm.chain_step_probs(BASE, steps)
    (value,) = prm.entailment_probs([BASE], [" ".join(steps)], num_base=[2])  # one step: truncated, scored
    assert 0 < value < 1 and prm.stats.hypotheses_truncated == 1
