"""The newer layouts of known PRM kinds (ReasonFlux-PRM-7B, PURE-PRM-7B, Math-psa, VersaPRM, ActPRM, Universal-PRM)
against their authors' published code, and the ``window`` choice for premises that do not fit.

As tests/backbones/test_prm_families.py does for the older families: an offline mirror of each model
(tests/prm_mirrors.py), the published scoring code re-written here (none of it calls the project's renderers), the
same input ids and per-step scores within 1e-6 on a whole chain (``prm-chain``) and on premise subsets rendered the
way ARES renders them. The references:

- ReasonFlux-PRM-7B: the card's usage (Gen-Verse/ReasonFlux ``ReasonFlux_PRM/README.md``: user + assistant messages,
  no system message, ``apply_chat_template(tokenize=False)``, ``tokenizer.encode``, the model as ``AutoModel`` with
  its remote code) and ``utils/rm_utils.make_step_rewards`` (softmax, column 1, at each ``<extra_0>``).
- PURE-PRM-7B: the input PURE's RL code builds for its PRM (CJReinforce/PURE
  ``openrlhf/trainer/ppo_utils/experience_maker.py``, ``make_experience``: the problem's ids, then each step's ids
  followed by the ids of ``prm_step_separator = '\\n'``, read at that separator) and the card's reward
  (``probs[:, 1] - probs[:, 0]`` of the softmax at those positions), which is ``2 p - 1`` of the family's ``p``.
- Math-psa: OpenR's reward-model path (openreasoner/openr ``reason/evaluation/evaluate.py``: ``prm_step_tag =
  "\n\n\n\n\n "``, ``prm_format_str = "{question} {answer}"``; ``reason/inference/rm_call.replace_step_tag`` on the
  policy's text joined by its step tag ``"\n\n"``; ``prm/infer_fns._qwen_math_infer_fn``) on the adapter loaded with
  peft onto its base, as OpenR's and VersaPRM's scripts load it.
- VersaPRM: mtzig/MultiDomainPRM ``evaluation/get_rewards_reasoning_step.py`` (the VersaPRM branch's text) and
  ``evaluation/prm_models/prm_llama.LlamaPRM`` (softmax over the ``"-"`` / ``"+"`` logits, column 1, at the
  ``" \n\n\n\n"`` tag; its hard-coded Llama-3 ids 12, 10 and 23535 are looked up by their text here).
- ActPRM: sail-sg/ActivePRM ``examples/py_scripts/test_actprm_on_processbench.EnsemblePRMWorker`` (``prompt2message``,
  ``apply_chat_template``, ``generate`` with ``reduce="mean"``) on the published ``Qwen2ForEnsemblePRM`` run as remote
  code (``inference``: each member's sigmoid).
- Universal-PRM-7B: the model card's usage code (its ``evaluate_steps`` loop, with no reference answer: one input per
  prefix, ``sigmoid(model(input_ids)[0])``) on a mirror run as remote code; its own modeling file was not readable,
  so the mirror's head is only what the card reads (one value per input).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from peft import PeftModel
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from ares_rerank import Chain, load_backbone, score_chains
from ares_rerank.backbones.loading import prm_family
from ares_rerank.backbones.prms import (
    PUREPRM,
    TRLPRM,
    ActPRM,
    MathPSAPRM,
    QwenPRM,
    ReasonFluxPRM,
    UniversalPRM,
    VersaPRM,
)
from prm_checks import (
    ATOL,
    BASE,
    STEPS,
    SUBSETS,
    check_ares_first_step,
    check_premise_subsets,
    check_whole_chain,
    question,
    subset_pairs,
)
from prm_mirrors import (
    QWEN_INSTRUCT_TEMPLATE,
    QWEN_TEMPLATE,
    actprm_mirror,
    math_psa_mirror,
    pure_mirror,
    reasonflux_mirror,
    universal_prm_mirror,
    versaprm_mirror,
)
from tiny_models import hub_cache_repo




# -- the published code, re-written -----------------------------------------------------------------------------------
def reasonflux_reference(model, tokenizer, problem: str, completion: list[str]) -> tuple[list[int], list[float]]:
    """ReasonFlux-PRM-7B's card and ``make_step_rewards``."""
    def make_step_rewards(logits, token_masks):
        probabilities = F.softmax(logits, dim=-1)
        probabilities = probabilities * token_masks.unsqueeze(-1)
        all_scores_res = []
        for i in range(probabilities.size(0)):
            sample = probabilities[i]
            positive_probs = sample[sample != 0].view(-1, 2)[:, 1]
            all_scores_res.append(positive_probs.cpu().tolist())
        return all_scores_res

    messages = [
        {"role": "user", "content": problem},
        {"role": "assistant", "content": "<extra_0>".join(completion) + "<extra_0>"},
    ]
    conversation_str = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    input_ids = tokenizer.encode(conversation_str, return_tensors="pt")
    outputs = model(input_ids=input_ids)
    step_sep_id = tokenizer.encode("<extra_0>")[0]
    token_masks = input_ids == step_sep_id
    return input_ids[0].tolist(), make_step_rewards(outputs[0], token_masks)[0]


def pure_reference(model, tokenizer, problem: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """PURE's PRM input (``make_experience``) and the card's reward ``p1 - p0`` at each step's separator."""
    prm_step_separator_token = tokenizer.encode("\n", return_tensors="pt", add_special_tokens=False).squeeze(0)
    input_ids = tokenizer(problem, return_tensors="pt", add_special_tokens=False)["input_ids"][0]
    score_positions = []
    for step in steps:
        step_tokens = tokenizer(step, return_tensors="pt", add_special_tokens=False)["input_ids"][0]
        input_ids = torch.cat([input_ids, step_tokens, prm_step_separator_token])
        score_positions.append(input_ids.numel() - 1)
    logits = model(input_ids=input_ids[None], attention_mask=torch.ones_like(input_ids)[None]).logits
    token_mask = torch.zeros_like(input_ids, dtype=torch.bool)
    token_mask[score_positions] = True
    probs = logits[0][token_mask].softmax(dim=-1)  # (num_steps, 2)
    process_reward = probs[:, 1] - probs[:, 0]
    return input_ids.tolist(), process_reward.tolist()


def openr_replace_step_tag(answer: str, lm_step_tag: str, step_tag: str = "\n\n\n\n\n ") -> str:
    """OpenR's ``RewardModelCallingFunction.replace_step_tag`` (``step_tag`` is evaluate.py's ``prm_step_tag``)."""
    splits = answer.split(lm_step_tag)
    splits = [s.strip() for s in splits]
    response = f" {step_tag}".join([s for s in splits if s != ""])
    response += f" {step_tag}"
    return response


def math_psa_reference(model, tokenizer, question: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """OpenR: the policy's steps joined by its step tag, rendered by rm_call, read by ``_qwen_math_infer_fn``."""
    input_str = "{question} {answer}".format(question=question, answer=openr_replace_step_tag("\n\n".join(steps),
                                                                                           "\n\n"))
    candidate_tokens = tokenizer.encode(" + -")
    step_tag_id = torch.tensor([tokenizer.encode(" \n\n\n\n\n")])
    input_id = torch.tensor([tokenizer.encode(input_str)])
    logits = model(input_id).logits[:, :, candidate_tokens]
    scores = logits.softmax(dim=-1)[:, :, 0]
    mask = input_id == step_tag_id
    return input_id[0].tolist(), scores[mask].tolist()


def versaprm_reference(model, tokenizer, question: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """VersaPRM's evaluation text and ``LlamaPRM.__call_single``."""
    steps = [step.strip().replace(" \n\n\n\n", "") for step in steps]
    question = question.strip().replace(" \n\n\n\n", "")
    steps_all = f"{question} \n\n" + "".join(f"{step} \n\n\n\n" for step in steps)
    candidate_tokens = [tokenizer.encode("-", add_special_tokens=False)[-1],
                        tokenizer.encode("+", add_special_tokens=False)[-1]]  # Llama-3's 12, 10
    tag_id = tokenizer.encode(" \n\n\n\n", add_special_tokens=False)[-1]  # Llama-3's 23535
    input_id = torch.tensor([tokenizer.encode(steps_all)])
    logits = model(input_id).logits[:, :, candidate_tokens]
    scores = logits.softmax(dim=-1)[:, :, 1]
    return input_id[0].tolist(), scores[input_id == tag_id].tolist()


def actprm_reference(model, tokenizer, question: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """ActPRM's ``EnsemblePRMWorker`` for one [question, steps] prompt (steps stripped as its ``_process_data``)."""
    rr_token = model.rr_token if model.rr_token is not None else " \n\n"
    rr_token_id = tokenizer(rr_token).input_ids[0]
    messages = [
        {"role": "system", "content": "You are a helpful and harmless assistant. You should think step-by-step and "
                                      "put your final answer within \\boxed{}."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": rr_token.join(s.strip() for s in steps) + rr_token},
    ]
    text = tokenizer.apply_chat_template([messages[:-1]], tokenize=False, add_generation_prompt=True)
    text = [t + messages[-1]["content"] for t in text]
    model_inputs = tokenizer(text, return_tensors="pt", padding=True)
    pred_mask = model_inputs["input_ids"] == rr_token_id
    outputs = model.inference(**model_inputs)
    logits = outputs.logits[:, 0, pred_mask[0]].mean(dim=0)
    return model_inputs["input_ids"][0].tolist(), logits.tolist()


# -- the mirrors, the families and their references -------------------------------------------------------------------
def _reasonflux(root: Path, template: str = QWEN_TEMPLATE):
    path = reasonflux_mirror(root / f"reasonflux-{len(template)}", template=template)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=torch.float32).eval()
    return path, {"kind": "prm-reasonflux"}, lambda q, s: reasonflux_reference(model, tokenizer, q, s)


def _pure(root: Path):
    path = pure_mirror(root / "pure")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForTokenClassification.from_pretrained(path, dtype=torch.float32).eval()

    def as_probability(q, s):  # the card's reward r = p1 - p0 is 2 p1 - 1
        ids, rewards = pure_reference(model, tokenizer, q, s)
        return ids, [(r + 1) / 2 for r in rewards]

    return path, {"kind": "prm-pure"}, as_probability


def _math_psa(root: Path):
    adapter, base = math_psa_mirror(root / "math-psa")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()
    options = {"kind": "prm-math-psa", "base_model": base}
    return adapter, options, lambda q, s: math_psa_reference(model, tokenizer, q, s)


def _versaprm(root: Path):
    path = versaprm_mirror(root / "versaprm")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return path, {"kind": "prm-versaprm"}, lambda q, s: versaprm_reference(model, tokenizer, q, s)


def _actprm(root: Path):
    path = actprm_mirror(root / "actprm")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=torch.float32).eval()
    return path, {}, lambda q, s: actprm_reference(model, tokenizer, q, s)


FAMILIES = {
    "reasonflux-math-template": (_reasonflux, ReasonFluxPRM),
    "reasonflux-instruct-template": (lambda root: _reasonflux(root, QWEN_INSTRUCT_TEMPLATE), ReasonFluxPRM),
    "pure": (_pure, PUREPRM),
    "math-psa": (_math_psa, MathPSAPRM),
    "versaprm": (_versaprm, VersaPRM),
    "actprm": (_actprm, ActPRM),  # detected from its architecture, Qwen2ForEnsemblePRM
}


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    build, cls = FAMILIES[request.param]
    path, options, reference = build(tmp_path_factory.mktemp(request.param))
    prm = load_backbone(path, device="cpu", dtype="float32", **options)  # trust_remote_code off
    assert type(prm) is cls
    return prm, reference


@torch.inference_mode()
def test_whole_chain_matches_the_published_code(family):
    check_whole_chain(*family)


@torch.inference_mode()
def test_premise_subsets_match_the_published_code_on_the_subset_chain(family):
    check_premise_subsets(*family)


@torch.inference_mode()
def test_ares_on_a_preset_reads_the_subset_inputs(family):
    check_ares_first_step(*family)


def test_presets_are_picked_from_their_hub_ids(tmp_path, monkeypatch):
    """The hub ids name their presets (offline, from a hub cache). A local copy of ReasonFlux is Qwen's architecture,
    so without its hub id it is read as prm-qwen, which passes Qwen's system turn: the same input under Qwen2.5-Math's
    template (its default system turn is that one), another under a template with another default."""
    cache = tmp_path / "hub"
    flux = reasonflux_mirror(tmp_path / "flux", template=QWEN_INSTRUCT_TEMPLATE)
    hub_cache_repo(cache, "Gen-Verse/ReasonFlux-PRM-7B", flux)
    hub_cache_repo(cache, "jinachris/PURE-PRM-7B", pure_mirror(tmp_path / "pure"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert prm_family("gen-verse/reasonflux-prm-7b") == "prm-reasonflux"
    assert prm_family("jinachris/PURE-PRM-7B") == "prm-pure"
    rf = load_backbone("Gen-Verse/ReasonFlux-PRM-7B", cache_dir=cache, device="cpu")
    pure = load_backbone("jinachris/PURE-PRM-7B", cache_dir=cache, device="cpu")
    assert (type(rf), type(pure)) == (ReasonFluxPRM, PUREPRM)
    assert rf.system_prompt is None and pure.step_separator == "\n"
    assert type(rf.model).__module__.startswith("ares_rerank.")  # native: no remote code ran
    local = load_backbone(flux, device="cpu")
    assert type(local) is QwenPRM
    assert local.encode_chain(BASE, STEPS)["input_ids"] != rf.encode_chain(BASE, STEPS)["input_ids"]
    math = reasonflux_mirror(tmp_path / "flux-math")
    as_qwen = load_backbone(math, device="cpu")
    as_flux = load_backbone(math, kind="prm-reasonflux", device="cpu")
    assert as_qwen.encode_chain(BASE, STEPS)["input_ids"] == as_flux.encode_chain(BASE, STEPS)["input_ids"]
    assert type(load_backbone(pure_mirror(tmp_path / "local-pure"), device="cpu")) is TRLPRM  # same reading


@torch.inference_mode()
def test_math_psa_and_versaprm_by_hub_id_with_the_adapter_on_its_base(tmp_path, monkeypatch):
    """Math-psa's hub id loads the adapter with peft onto Qwen2.5-Math-7B-Instruct (from the hub cache, offline): the
    scores are the adapted model's, not the base's. VersaPRM's ids (the published evaluation's) name their family."""
    cache = tmp_path / "hub"
    adapter, base = math_psa_mirror(tmp_path / "psa")
    hub_cache_repo(cache, "openreasoner/Math-psa", adapter)
    hub_cache_repo(cache, "Qwen/Qwen2.5-Math-7B-Instruct", base)
    for repo in ("UW-Madison-Lee-Lab/VersaPRM", "UW-Madison-Lee-Lab/Llama-PRM800K"):
        hub_cache_repo(cache, repo, versaprm_mirror(tmp_path / repo.split("/")[1]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    psa = load_backbone("openreasoner/Math-psa", cache_dir=cache, device="cpu", dtype="float32")
    assert type(psa) is MathPSAPRM
    tokenizer = AutoTokenizer.from_pretrained(base)
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()
    _, expected = math_psa_reference(adapted, tokenizer, question(BASE), STEPS)
    assert psa.chain_step_probs(BASE, STEPS) == pytest.approx(expected, abs=ATOL)
    bare = load_backbone(base, kind="prm-math-psa", device="cpu", dtype="float32")  # the base without the adapter
    assert max(abs(a - b) for a, b in zip(bare.chain_step_probs(BASE, STEPS), expected)) > 1e-3
    for repo in ("UW-Madison-Lee-Lab/VersaPRM", "UW-Madison-Lee-Lab/Llama-PRM800K"):
        assert type(load_backbone(repo, cache_dir=cache, device="cpu")) is VersaPRM
    assert prm_family("uw-madison-lee-lab/versaprm-aug") == "prm-versaprm"
    assert prm_family("OpenReasoner/Math-PSA") == "prm-math-psa"


def test_a_local_causal_prm_folder_names_the_new_kinds(tmp_path):
    """A local VersaPRM / Math-psa copy has no hub id to go by: the causal-LM error names their kinds."""
    with pytest.raises(ValueError, match="kind='prm-versaprm'.*kind='prm-math-psa'"):
        load_backbone(versaprm_mirror(tmp_path / "local"))


@torch.inference_mode()
def test_math_psa_reads_a_step_holding_the_policy_step_tag_at_its_last_piece(tmp_path):
    """OpenR splits the policy's text at "\n\n": a step holding one is two pieces, each followed by a tag; the step
    is read at its last piece's tag, which is where the reference scores that piece."""
    path, options, reference = _math_psa(tmp_path)
    prm = load_backbone(path, device="cpu", dtype="float32", **options)
    steps = ["Step 1: 16 - 3 = 13 eggs left.\n\nSo 13 remain.", "Step 2: 13 - 4 = 9."]
    ids, pieces = reference(question(BASE), steps)
    assert len(pieces) == 3 and prm.encode_chain(BASE, steps)["input_ids"] == ids
    assert prm.chain_step_probs(BASE, steps) == pytest.approx([pieces[1], pieces[2]], abs=ATOL)
    with pytest.raises(ValueError, match="empty once split"):
        prm.encode_chain(BASE, ["\n\n", "Step 2."])


@torch.inference_mode()
def test_actprm_loads_natively_by_hub_id_and_averages_its_members(tmp_path, monkeypatch):
    """ActPRM's ids pick the family; the model is the package's own class (no remote code runs), reg_model unread;
    the score is the members' mean sigmoid, which no single member gives."""
    cache = tmp_path / "hub"
    path = actprm_mirror(tmp_path / "act")
    hub_cache_repo(cache, "ActPRM/ActPRM-X", path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    prm = load_backbone("ActPRM/ActPRM-X", cache_dir=cache, device="cpu", dtype="float32")
    assert type(prm) is ActPRM and prm_family("sail/actprm") == "prm-actprm"
    assert type(prm.model).__module__.startswith("ares_rerank.") and prm.prefix_cache
    assert not any(name.startswith("score.reg_model") for name, _ in prm.model.named_parameters())
    items = [{**prm.encode_chain(BASE, STEPS), "all_tags": True}]
    members = torch.sigmoid(prm.forward_logits(prm.pad(items))[0, items[0]["tags"]])  # (steps, members)
    assert prm.chain_step_probs(BASE, STEPS) == pytest.approx(members.mean(dim=-1).tolist(), abs=ATOL)
    assert (members.max(dim=-1).values - members.min(dim=-1).values).min() > 1e-3  # the members disagree


# -- Universal-PRM: one input per prefix, the checkpoint's own code ---------------------------------------------------
def universal_reference(model, tokenizer, question: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """The card's ``evaluate_steps`` (no reference answer): per prefix, the tokenized chat query, the prefix's steps
    joined and closed by a blank line, the eos id; ``sigmoid(model(input_ids)[0])``. Returns the last prefix's ids
    (the whole chain's input) and every prefix's score. The card targets transformers 4, where a tokenized
    ``apply_chat_template`` is a list of ids: ``return_dict=False`` asks transformers 5 for the same."""
    user = question + "\n\n###\n\nThe reference answer is: There is no reference answer for this question."
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": user}]
    query = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    scores, ids = [], []
    for k in range(1, len(steps) + 1):
        ids = query + tokenizer("\n\n".join(steps[:k]) + "\n\n")["input_ids"] + [tokenizer.eos_token_id]
        scores.append(torch.sigmoid(model(input_ids=torch.tensor([ids]).long())[0]).item())
    return ids, scores


@pytest.fixture(scope="module")
def universal(tmp_path_factory):
    path = universal_prm_mirror(tmp_path_factory.mktemp("universal"))
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=torch.float32).eval()
    return path, lambda q, s: universal_reference(model, tokenizer, q, s)


@torch.inference_mode()
def test_universal_prm_matches_the_card_on_the_chain_and_premise_subsets(universal):
    """Same ids and scores as the card's loop: every prefix of the whole chain (one input each, so one model call
    per step), each premise subset as the chain made of it, and ARES's first step."""
    path, reference = universal
    prm = load_backbone(path, kind="prm-universal", trust_remote_code=True, device="cpu", dtype="float32")
    assert type(prm) is UniversalPRM
    ids, expected = reference(question(BASE), STEPS)
    assert prm.encode_chain(BASE, STEPS)["input_ids"] == ids
    assert len(set(round(p, 3) for p in expected)) == len(STEPS) and all(0.02 < p < 0.98 for p in expected)
    (whole,) = score_chains([Chain(BASE, STEPS)], prm, method="prm-chain")
    assert whole.step_scores == pytest.approx(expected, abs=ATOL)
    assert whole.evaluations == len(STEPS)  # the card's cost: one input per prefix
    check_premise_subsets(prm, reference)
    check_ares_first_step(prm, reference)
    assert prm.render(BASE, STEPS[:1]).endswith(STEPS[0] + "\n\n<|im_end|>")


def test_universal_prm_by_hub_id_needs_its_own_code(universal, tmp_path, monkeypatch):
    """The hub id picks the family; without trust_remote_code the error says to pass it (a plain Qwen2 would
    return hidden states, not a score), and a batch size other than one is refused by name."""
    path, reference = universal
    cache = tmp_path / "hub"
    hub_cache_repo(cache, "infly/Universal-PRM-7B", path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert prm_family("INFLY/universal-prm-7b") == "prm-universal"
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        load_backbone("infly/Universal-PRM-7B", cache_dir=cache, device="cpu")
    prm = load_backbone("infly/Universal-PRM-7B", cache_dir=cache, device="cpu", dtype="float32",
                        trust_remote_code=True)
    assert type(prm) is UniversalPRM and not prm.prefix_cache
    _, expected = reference(question(BASE), STEPS)
    assert prm.chain_step_probs(BASE, STEPS) == pytest.approx(expected, abs=ATOL)
    with pytest.raises(ValueError, match="batch_size=4"):
        UniversalPRM(prm.model, prm.tokenizer, batch_size=4)


# -- the window choice ------------------------------------------------------------------------------------------------
LONG_BASE = [f"Fact {i}: the box number {i} holds {i * 3} red and {i + 7} blue marbles." for i in range(8)]


@pytest.fixture(scope="module")
def pure_parts(tmp_path_factory):
    path, _, reference = _pure(tmp_path_factory.mktemp("window"))
    return path, reference


def _windowed(path: Path, window: str | None, claims: list[str], step: str):
    """The PURE mirror with a window that holds the step and some, not all, of ``claims``."""
    probe = load_backbone(path, kind="prm-pure", device="cpu", dtype="float32")
    whole = len(probe.encode_chain(claims, [step])["input_ids"])
    bare = len(probe.encode_chain([], [step])["input_ids"])
    max_length = (whole + bare) // 2
    options = {} if window is None else {"window": window}
    return load_backbone(path, kind="prm-pure", device="cpu", dtype="float32", max_length=max_length, **options)


@torch.inference_mode()
def test_window_truncate_drops_the_earliest_premises_first(pure_parts):
    path, reference = pure_parts
    step = STEPS[0]
    prm = _windowed(path, "truncate", LONG_BASE, step)
    # the expected input, found independently: the fewest earliest claims left out so that the rest fit
    first = next(k for k in range(len(LONG_BASE) + 1)
                 if len(prm.encode_chain(LONG_BASE[k:], [step])["input_ids"]) <= prm.max_length)
    assert 0 < first < len(LONG_BASE)
    ids, scores = reference(question(LONG_BASE[first:]), [step])
    with pytest.warns(UserWarning, match=r"window='truncate'.*'refuse'"):
        (got,) = prm.entailment_probs([LONG_BASE], [step], num_base=[len(LONG_BASE)])
    assert prm.encode_pair(LONG_BASE, step, num_base=len(LONG_BASE))["input_ids"] == ids
    assert got == pytest.approx(scores[-1], abs=ATOL)
    assert prm.stats.premises_dropped == 2 * first and prm.stats.pairs_windowed == 2  # scored, then encoded again
    # the whole-chain pass keeps the latest base claims too; its steps are never cut
    ids, scores = reference(question(LONG_BASE[first:]), [step])
    assert prm.chain_step_probs(LONG_BASE, [step]) == pytest.approx(scores, abs=ATOL)


@torch.inference_mode()
def test_window_refuse_names_the_option_and_scores_nothing(pure_parts):
    path, _ = pure_parts
    prm = _windowed(path, "refuse", LONG_BASE, STEPS[0])
    with pytest.raises(ValueError, match=r"window of \d+.*window='refuse' drops none.*window='truncate'"):
        prm.entailment_probs([LONG_BASE], [STEPS[0]], num_base=[len(LONG_BASE)])
    with pytest.raises(ValueError, match="window='refuse'"):
        prm.chain_step_probs(LONG_BASE, [STEPS[0]])
    assert prm.stats.premises_dropped == 0 and prm.stats.pairs_windowed == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pair that fits is scored as before, without a warning
        assert len(prm.entailment_probs([LONG_BASE[:1]], [STEPS[0]], num_base=[1])) == 1


@torch.inference_mode()
def test_window_relevant_is_the_default_and_bad_values_are_named(pure_parts):
    path, reference = pure_parts
    step = "Box 2 holds 6 red marbles."  # shares words with fact 2 most
    prm = _windowed(path, None, LONG_BASE, step)
    assert prm.window == "relevant"
    with pytest.warns(UserWarning, match="most relevant kept"):
        item = prm.encode_pair(LONG_BASE, step, num_base=len(LONG_BASE))
    kept = [c for c in LONG_BASE if prm.tokenizer.decode(prm.tokenizer.encode(c)) in prm.tokenizer.decode(
        item["input_ids"])]
    assert LONG_BASE[2] in kept and 0 < len(kept) < len(LONG_BASE)
    assert item["input_ids"] == reference(question(kept), [step])[0]  # the kept claims, in their order
    with pytest.raises(ValueError, match=r"window='cut' is unknown.*'truncate'.*'refuse'"):
        load_backbone(path, kind="prm-pure", device="cpu", window="cut")


# -- served over vLLM's /pooling --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "layout"), [("reasonflux", "token"), ("reasonflux", "tag"), ("pure", "token"),
                                              ("pure", "tag")])
@torch.inference_mode()
def test_token_classifier_presets_served_over_pooling_match_the_published_code(tmp_path, name, layout):
    from fake_servers import FakeServer, vllm_pooling

    if name == "reasonflux":
        path, _, reference = _reasonflux(tmp_path)
        model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        row_token = tokenizer.encode("<extra_0>")[0]
    else:
        path, _, reference = _pure(tmp_path)
        model = AutoModelForTokenClassification.from_pretrained(path, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        row_token = tokenizer.encode("\n", add_special_tokens=False)[-1]
    with FakeServer(vllm_pooling(model, row_token, layout)) as server:
        prm = load_backbone(server.url, kind="vllm-pooling", family=f"prm-{name}", tokenizer=path, max_retries=0)
        assert type(prm).__name__ == {"reasonflux": "ServedReasonFluxPRM", "pure": "ServedPUREPRM"}[name]
        (whole,) = score_chains([Chain(BASE, STEPS)], prm, method="prm-chain")
        premises, hypotheses, num_base, _, wanted = subset_pairs(reference, SUBSETS[:3])
        got = prm.entailment_probs(premises, hypotheses, num_base=num_base)
    ids, expected = reference(question(BASE), STEPS)
    sent = [body for _, p, body in server.requests if p == "/pooling"]
    assert ids in sent[0]["input"]  # the published code's ids, rendered and tokenized here
    assert whole.step_scores == pytest.approx(expected, abs=1e-5)
    assert got == pytest.approx(wanted, abs=1e-5)
    assert prm.served_model == "prm" and "/v1/models" in server.paths()  # the name and window asked once


def test_pooling_refuses_a_family_it_cannot_read():
    from ares_rerank.backbones.vllm_pooling import served_pooling_family

    for family in ("prm-actprm", "prm-math-shepherd", "prm-skywork"):
        with pytest.raises(ValueError, match=rf"family='{family}' is not a token-classifier PRM.*'prm-pure'"):
            served_pooling_family(family)
