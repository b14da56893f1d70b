"""Each PRM family against its authors' published scoring code, re-written here, on an offline mirror of the model.

For every family: the same input ids and per-step scores (within 1e-6) on whole chains (``prm-chain``), and on
premise subsets rendered the way ARES renders them (``num_base``): the reference scores the chain made of the subset
(the included base claims as the question, the included earlier steps, the judged step). The references below follow
the model cards and reference code (Qwen2.5-Math-PRM's card; SkyworkAI/skywork-o1-prm-inference's ``prepare_input``
and ``PRM_MODEL``; Math-Shepherd's card; RLHFlow's ``prm_evaluate.py`` / search-and-learn's ``_score_single``; TRL's
``PRMTrainer.tokenize_row``), adapted only where transformers 5 changed an API (``apply_chat_template`` returns a dict
unless ``return_dict=False``). None of them calls the project's renderers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

from ares_rerank import load_backbone
from ares_rerank.backbones.loading import prm_family
from ares_rerank.backbones.prms import CausalPRM, MathShepherdPRM, QwenPRM, RLHFlowPRM, SkyworkPRM, TRLPRM
from prm_checks import (
    ATOL,
    STEPS,
    check_ares_first_step,
    check_premise_subsets,
    check_whole_chain,
)
from prm_mirrors import (
    LLAMA3_TEMPLATE,
    LLAMA31_TEMPLATE,
    math_shepherd_mirror,
    qwen_prm_mirror,
    rlhflow_mirror,
    skywork_mirror,
    trl_prm_mirror,
)
from tiny_models import hub_cache_repo




# -- the published scoring code, re-written ---------------------------------------------------------------------------
def qwen_reference(model, tokenizer, query: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """Qwen2.5-Math-PRM's model card."""
    def make_step_rewards(logits, token_masks):
        probabilities = F.softmax(logits, dim=-1)
        probabilities = probabilities * token_masks.unsqueeze(-1)  # bs, seq_len, num_labels
        all_scores_res = []
        for i in range(probabilities.size(0)):
            sample = probabilities[i]  # seq_len, num_labels
            positive_probs = sample[sample != 0].view(-1, 2)[:, 1]  # valid_tokens, num_labels
            all_scores_res.append(positive_probs.cpu().tolist())
        return all_scores_res

    messages = [
        {"role": "system", "content": "Please reason step by step, and put your final answer within \\boxed{}."},
        {"role": "user", "content": query},
        {"role": "assistant", "content": "<extra_0>".join(steps) + "<extra_0>"},
    ]
    conversation_str = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    input_ids = tokenizer.encode(conversation_str, return_tensors="pt")
    outputs = model(input_ids=input_ids)
    step_sep_id = tokenizer.encode("<extra_0>")[0]
    token_masks = input_ids == step_sep_id
    return input_ids[0].tolist(), make_step_rewards(outputs[0], token_masks)[0]


class SkyworkReference(torch.nn.Module):
    """Skywork's ``PRM_MODEL``: the checkpoint as ``AutoModelForCausalLM`` plus a ``ValueHead`` loaded from its
    ``v_head.*`` keys; the value of the last hidden state, sigmoid with ``return_probs=True``."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.pretrained_model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        hidden = self.pretrained_model.config.hidden_size
        self.v_head = torch.nn.ModuleDict({"summary": torch.nn.Linear(hidden, 1)})
        self.dropout = torch.nn.Dropout(0.1)
        state = torch.load(path / "pytorch_model.bin", weights_only=True)
        for k in list(state.keys()):
            if "v_head." in k:
                state[k.replace("v_head.", "")] = state.pop(k)
        self.v_head.load_state_dict(state, strict=False)
        self.eval()

    def forward(self, input_ids, attention_mask, return_probs=True):
        base = self.pretrained_model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        value = self.v_head["summary"](self.dropout(base.hidden_states[-1])).squeeze(-1)
        return torch.sigmoid(value) if return_probs else value


def skywork_prepare_input(problem, response, tokenizer, step_token):
    """skywork-o1-prm-inference ``model_utils/io_utils.prepare_input``."""
    prompt_ids = tokenizer.encode(tokenizer.bos_token + problem + "\n")
    response_ids = []
    steps = []
    reward_flags = [0] * len(prompt_ids)
    step_token_id = tokenizer.encode(step_token)[-1]
    for idx, step in enumerate(response.split(step_token)):
        if step != "":
            step_ids = tokenizer.encode(step)
        else:
            step_ids = []
        step_ids += [step_token_id]
        step = step + step_token
        flag = [0] * len(step_ids)
        flag[-1] = 1
        response_ids.extend(step_ids)
        reward_flags.extend(flag)
        steps.append(step)
    input_ids = prompt_ids + response_ids
    return input_ids, steps, reward_flags


def skywork_reference(model, tokenizer, problem: str, steps: list[str]) -> tuple[list[int], list[float]]:
    input_ids, _, reward_flags = skywork_prepare_input(problem, "\n".join(steps), tokenizer, step_token="\n")
    ids = torch.LongTensor([input_ids])
    rewards = model(input_ids=ids, attention_mask=torch.ones_like(ids), return_probs=True)
    flags = torch.LongTensor([reward_flags])
    indices = torch.nonzero(flags[0] == 1).view(-1)
    return input_ids, [rewards[0][indices[j]].item() for j in range(len(indices))]


def math_shepherd_reference(model, tokenizer, query: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """Math-Shepherd's model card."""
    good_token, bad_token, step_tag = "+", "-", "ки"
    candidate_tokens = tokenizer.encode(f"{good_token} {bad_token}")[1:]
    step_tag_id = tokenizer.encode(f"{step_tag}")[-1]
    output = "\n".join(f"{s} {step_tag}" for s in steps)
    input_for_prm = f"{query} {output}"
    input_id = torch.tensor([tokenizer.encode(input_for_prm)])
    logits = model(input_id).logits[:, :, candidate_tokens]
    scores = logits.softmax(dim=-1)[:, :, 0]
    step_scores = scores[input_id == step_tag_id]
    return input_id[0].tolist(), step_scores.tolist()


def rlhflow_reference(model, tokenizer, query: str, steps: list[str]) -> tuple[list[int], list[float]]:
    """RLHFlow's ``prm_evaluate.py`` (search-and-learn ``RLHFFlow._score_single``)."""
    candidate_tokens = [tokenizer.encode("+")[-1], tokenizer.encode("-")[-1]]
    single_step_score, conversation = [], []
    for k in range(len(steps)):
        text = query + " " + steps[0] if k == 0 else steps[k]
        conversation.append({"content": text, "role": "user"})
        conversation.append({"content": "+", "role": "assistant"})
        input_ids = tokenizer.apply_chat_template(conversation, return_tensors="pt", return_dict=False)
        logits = model(input_ids).logits[:, -3, candidate_tokens]  # the +/- is predicted by the '-3' position
        step_scores = logits.softmax(dim=-1)[:, 0]  # 0 means the prob of +
        single_step_score.append(step_scores[0].item())
    return input_ids[0].tolist(), single_step_score


def trl_reference(model, tokenizer, prompt: str, steps: list[str], step_separator: str) -> tuple[list[int], list]:
    """TRL's ``PRMTrainer.tokenize_row`` (every step labelled), read where the labels sit."""
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completions_ids = [tokenizer(completion, add_special_tokens=False)["input_ids"] for completion in steps]
    labels = [1] * len(steps)
    separator_ids = tokenizer.encode(step_separator, add_special_tokens=False)
    completions_ids = [completion + separator_ids for completion in completions_ids]
    labels = [[-100] * (len(completion) - 1) + [label] for completion, label in zip(completions_ids, labels)]
    completion_ids = [t for c in completions_ids for t in c]
    labels = [t for lab in labels for t in lab]
    if tokenizer.bos_token_id is not None:
        prompt_ids = [tokenizer.bos_token_id] + prompt_ids
    input_ids = prompt_ids + completion_ids
    labels = [-100] * len(prompt_ids) + labels
    probs = model(input_ids=torch.tensor([input_ids])).logits[0].softmax(dim=-1)[:, 1]
    return input_ids, [probs[i].item() for i, lab in enumerate(labels) if lab != -100]


# -- the mirrors, the families and their references -------------------------------------------------------------------
def _qwen(root: Path):
    path = qwen_prm_mirror(root / "qwen")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=torch.float32).eval()
    return path, {}, lambda q, s: qwen_reference(model, tokenizer, q, s)


def _skywork(root: Path):
    path = skywork_mirror(root / "skywork")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = SkyworkReference(path)
    return path, {}, lambda q, s: skywork_reference(model, tokenizer, q, s)


def _math_shepherd(root: Path):
    path = math_shepherd_mirror(root / "math-shepherd")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return path, {"kind": "prm-math-shepherd"}, lambda q, s: math_shepherd_reference(model, tokenizer, q, s)


def _rlhflow(root: Path, template: str = LLAMA31_TEMPLATE):
    path = rlhflow_mirror(root / f"rlhflow-{len(template)}", template=template)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return path, {"kind": "prm-rlhflow"}, lambda q, s: rlhflow_reference(model, tokenizer, q, s)


def _trl(root: Path, bos: str | None = None, separator: str = "\n"):
    path = trl_prm_mirror(root / f"trl-{bos}", bos=bos)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForTokenClassification.from_pretrained(path, dtype=torch.float32).eval()
    options = {"step_separator": separator} if separator != "\n" else {}
    return path, options, lambda q, s: trl_reference(model, tokenizer, q, s, separator)


FAMILIES = {
    "qwen": (_qwen, QwenPRM),
    "skywork": (_skywork, SkyworkPRM),
    "math-shepherd": (_math_shepherd, MathShepherdPRM),
    "rlhflow-llama3.1": (_rlhflow, RLHFlowPRM),
    "rlhflow-llama3": (lambda root: _rlhflow(root, LLAMA3_TEMPLATE), RLHFlowPRM),
    "trl": (_trl, TRLPRM),
    "trl-bos-double-newline": (lambda root: _trl(root, bos="<|im_start|>", separator="\n\n"), TRLPRM),
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
def test_ares_on_a_published_family_reads_the_subset_inputs(family):
    check_ares_first_step(*family)


def test_math_shepherd_tags_inside_words_and_the_old_renderer(tmp_path):
    """A step with "ки" inside a word ("Такие") keeps its text; each step is read at its own tag. The configurable
    CausalPRM tokenized the text between tags apart, which starts each piece with a lone "▁" (the ids differ)."""
    path, _, reference = _math_shepherd(tmp_path)
    prm = load_backbone(path, kind="prm-math-shepherd", device="cpu", dtype="float32")
    steps = ["Такие задачи решаются просто.", "Ответ: 5."]
    item = prm.encode_chain(["What is 2 + 3?"], steps)
    assert "Такие" in prm.render(["What is 2 + 3?"], steps)
    with torch.inference_mode():
        ids, expected = reference("What is 2 + 3?", steps)
        assert item["input_ids"] == ids
        assert prm.chain_step_probs(["What is 2 + 3?"], steps) == pytest.approx(expected, abs=ATOL)
    old = CausalPRM.from_pretrained(path, step_tag="ки", device="cpu")  # "+" alone encodes as "▁+"
    old_ids = old.encode_chain(["What is 2 + 3?"], STEPS)["input_ids"]
    assert old_ids != prm.encode_chain(["What is 2 + 3?"], STEPS)["input_ids"]


def test_families_are_picked_from_hub_ids_and_presets_apply(tmp_path, monkeypatch):
    """A known hub id (from the local hub cache, offline) picks its family; the H4 PRM's separator comes with it."""
    cache = tmp_path / "hub"
    hub_cache_repo(cache, "peiyi9979/math-shepherd-mistral-7b-prm", math_shepherd_mirror(tmp_path / "ms"))
    hub_cache_repo(cache, "RLHFlow/Llama3.1-8B-PRM-Deepseek-Data", rlhflow_mirror(tmp_path / "rl"))
    hub_cache_repo(cache, "HuggingFaceH4/Qwen2.5-Math-7B-Instruct-PRM-0.2", trl_prm_mirror(tmp_path / "h4"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ms = load_backbone("peiyi9979/math-shepherd-mistral-7b-prm", cache_dir=cache, device="cpu")
    rl = load_backbone("RLHFlow/Llama3.1-8B-PRM-Deepseek-Data", cache_dir=cache, device="cpu")
    assert prm_family("rlhflow/llama3.1-8b-prm-deepseek-data") == "prm-rlhflow"  # the Hub's ids are any case
    h4 = load_backbone("HuggingFaceH4/Qwen2.5-Math-7B-Instruct-PRM-0.2", cache_dir=cache, device="cpu")
    assert (type(ms), type(rl), type(h4)) == (MathShepherdPRM, RLHFlowPRM, TRLPRM)
    assert h4.step_separator == "\n\n"  # what that PRM was trained with
    snapshot = next((cache / "models--peiyi9979--math-shepherd-mistral-7b-prm" / "snapshots").iterdir())
    assert type(load_backbone(snapshot, device="cpu")) is MathShepherdPRM  # a downloaded snapshot folder


def test_native_loading_runs_no_remote_code(tmp_path):
    """Qwen2.5-Math-PRM and Skywork load with the package's own classes, trust_remote_code off; Skywork's mirror has
    no remote code files at all."""
    qwen = load_backbone(qwen_prm_mirror(tmp_path / "qwen"), device="cpu")
    sky = load_backbone(skywork_mirror(tmp_path / "sky"), device="cpu")
    assert type(qwen.model).__name__ == "Qwen2ForProcessRewardModel"
    assert type(sky.model).__name__ == "Qwen2ForPrmModel"
    for prm in (qwen, sky):
        assert type(prm.model).__module__.startswith("ares_rerank.")
        assert prm.prefix_cache  # a decoder: shared heads run once


def test_a_causal_lm_without_a_family_says_which_kinds(tmp_path):
    path = math_shepherd_mirror(tmp_path / "local")  # a local folder: no hub id to go by
    with pytest.raises(ValueError, match="prm-math-shepherd.*prm-rlhflow"):
        load_backbone(path)


def test_the_configurable_kind_on_a_published_prm_warns(tmp_path):
    cache = tmp_path / "hub"
    hub_cache_repo(cache, "Qwen/Qwen2.5-Math-PRM-7B", qwen_prm_mirror(tmp_path / "qwen"))
    with pytest.warns(UserWarning, match="family kind='prm-qwen'"), pytest.raises(ValueError):
        load_backbone("Qwen/Qwen2.5-Math-PRM-7B", kind="prm", cache_dir=cache)  # a token classifier it is not
    assert type(load_backbone("Qwen/Qwen2.5-Math-PRM-7B", cache_dir=cache, device="cpu")) is QwenPRM
