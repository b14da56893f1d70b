"""Text a policy's chat template rendered, read back as the messages' contents (``ares_rerank.chat_templates``), on
mirrors of six families' tokenizers (tests/chat_mirrors.py): prompts rendered with the tokenizer's own
``apply_chat_template(..., add_generation_prompt=True)``, and responses decoded with their special tokens, as
OpenRLHF decodes a query (``skip_special_tokens=False``). The expected texts are the messages the test rendered,
never our own renderer's output.
"""

from __future__ import annotations

import pickle
import zlib

import pytest

from ares_rerank import AresReranker, ClaimTreesOracle, FunctionBackbone
from ares_rerank.chat_templates import (
    LAYOUTS,
    ChatLayout,
    detect_layout,
    layout_from_tokenizer,
    prompt_text,
    resolve_layout,
    response_text,
)
from ares_rerank.data.claimtrees import claimtrees_example
from ares_rerank.rewards import AresReward
from chat_mirrors import POLICY_FAMILIES, policy_tokenizer


FAMILIES = list(POLICY_FAMILIES)
QUESTION = "We have pepper.\nWe have garlic.\nLet x = 3."
RESPONSE = "Then 2x = 6.\n\nso x + 1 = 4.\n\nThe answer is 4."


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param, policy_tokenizer(request.param)


def render(tokenizer, question: str, system: str | None = None) -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def decoded_response(tokenizer, prompt: str, response: str) -> str:
    """What follows the prompt in the query OpenRLHF decodes: prompt ids + response ids + EOS, special tokens kept."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids += tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    query = tokenizer.decode(ids, skip_special_tokens=False)
    assert query.startswith(prompt)
    return query[len(prompt):]


def test_each_family_prompt_reads_back_as_its_question_detected_and_from_the_tokenizer(family):
    name, tokenizer = family
    prompt = render(tokenizer, QUESTION)
    assert prompt != QUESTION and QUESTION in prompt  # the template wrote headers around it
    assert detect_layout(prompt).name == POLICY_FAMILIES[name][-1]
    assert prompt_text(prompt) == QUESTION
    assert prompt_text(prompt, layout_from_tokenizer(tokenizer)) == QUESTION


def test_a_system_turn_is_not_part_of_the_prompt(family):
    name, tokenizer = family
    try:
        prompt = render(tokenizer, QUESTION, system="You are a careful checker.")
    except Exception:  # noqa: BLE001 -- the family's template refuses a system turn (Gemma, Mistral)
        pytest.skip(f"{name}'s template has no system role")
    assert prompt_text(prompt) == QUESTION
    assert prompt_text(prompt, layout_from_tokenizer(tokenizer)) == QUESTION
    assert "You are a careful checker." in prompt_text(prompt, roles=("system", "user"))


def test_the_layout_read_from_a_tokenizer_has_the_known_layouts_headers(family):
    name, tokenizer = family
    layout = layout_from_tokenizer(tokenizer)
    known = LAYOUTS[POLICY_FAMILIES[name][-1]]
    assert layout.headers["user"] == known.headers["user"]
    assert layout.headers["assistant"] == known.headers["assistant"]
    assert tokenizer.eos_token in layout.ends


def test_a_decoded_response_loses_its_end_markers_and_think_tags(family):
    name, tokenizer = family
    prompt = render(tokenizer, QUESTION)
    tail = decoded_response(tokenizer, prompt, RESPONSE)
    assert tail != RESPONSE and tail.startswith(RESPONSE)  # the EOS marker is there
    assert response_text(tail) == RESPONSE
    assert response_text(tail, layout_from_tokenizer(tokenizer)) == RESPONSE
    thinking = "<think>\nLet me see.\n\nx is 3.\n</think>\n\n" + RESPONSE
    assert response_text(decoded_response(tokenizer, prompt, thinking)) == "Let me see.\n\nx is 3.\n\n" + RESPONSE


def test_plain_text_is_kept_as_it_is():
    assert prompt_text(QUESTION) == QUESTION
    assert response_text(RESPONSE) == RESPONSE
    text = "Compare <s> and </s> tags in HTML.\n\nThey strike text through."
    assert response_text(text) == text  # an end marker inside plain text is not an end
    assert response_text(text + "</s>") == text


def hashed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """A 'probability' that changes with any character of the premises or the hypothesis."""
    return [0.05 + 0.9 * (zlib.crc32(("\x01".join(p) + "\x02" + h).encode()) / 2**32)
            for p, h in zip(premises, hypotheses)]


def _rewards(backbone, prompts, responses, prompt_split, chat_layout="auto", tokenizer=None):
    reranker = AresReranker(backbone, step_separator="\n\n", prompt_split=prompt_split, chat_layout=chat_layout,
                            tokenizer=tokenizer)
    return AresReward(reranker)(prompts, responses)


def _templated(tokenizer, questions, responses):
    prompts = [render(tokenizer, q) for q in questions]
    return prompts, [decoded_response(tokenizer, p, r) for p, r in zip(prompts, responses)]


def test_templated_prompts_get_exactly_the_oracles_rewards_of_the_plain_question(family):
    """The ClaimTrees rule oracle on chains with and without an unsound step: the templated pairs (prompt rendered,
    response decoded with its EOS) score as the plain ones, auto-detected and with the tokenizer's layout; read as
    they are (``chat_layout="none"``), the end marker glued to the last rule changes rewards."""
    name, tokenizer = family
    chains = [claimtrees_example(i, 6, variant="vanilla" if i % 2 else "insertion") for i in range(8)]
    questions = ["\n".join(c.base_claims) for c in chains]
    responses = ["\n\n".join(c.steps) for c in chains]
    plain = _rewards(ClaimTreesOracle(), questions, responses, "lines")
    assert min(plain) < 0.5 < max(plain)  # sound and unsound chains both present
    prompts, tails = _templated(tokenizer, questions, responses)
    assert _rewards(ClaimTreesOracle(), prompts, tails, "lines") == plain
    assert _rewards(ClaimTreesOracle(), prompts, tails, "lines", tokenizer=tokenizer) == plain
    assert _rewards(ClaimTreesOracle(), prompts, tails, "lines", chat_layout="none") != plain


@pytest.mark.parametrize("prompt_split", ["none", "lines", "sentences"])
def test_templated_prompts_reach_the_backbone_as_the_plain_question(family, prompt_split):
    """A backbone whose output moves with any character: equal rewards mean equal premises and steps."""
    name, tokenizer = family
    backbone = FunctionBackbone(hashed, name="hashed")
    questions = [QUESTION, "I have AB.\nRule: AB -> CD.", "The quick brown fox. Let x = 3."]
    responses = [RESPONSE, "I have AB, I use rule (AB -> CD) to derive CD, now I have CD", "so x + 1 = 4."]
    plain = _rewards(backbone, questions, responses, prompt_split)
    prompts, tails = _templated(tokenizer, questions, responses)
    assert _rewards(backbone, prompts, tails, prompt_split) == plain
    assert _rewards(backbone, prompts, tails, prompt_split, tokenizer=tokenizer) == plain


def test_the_setting_is_checked_and_the_reranker_stays_picklable():
    with pytest.raises(ValueError, match=r"chat_layout='chatmlx'.*'auto', 'none', 'phi4', 'chatml'"):
        AresReranker(FunctionBackbone(lambda p, h: [1.0] * len(h)), chat_layout="chatmlx")
    tokenizer = policy_tokenizer("qwen2.5")
    with pytest.raises(ValueError, match="both given"):
        resolve_layout("chatml", tokenizer)
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="has no chat template"):
        resolve_layout("auto", tokenizer)
    reranker = AresReranker(FunctionBackbone(hashed), tokenizer=policy_tokenizer("llama3.1"))
    assert isinstance(reranker.chat_layout, ChatLayout)
    copy = pickle.loads(pickle.dumps(reranker))
    assert copy.chat_layout == reranker.chat_layout and copy.texts(render(policy_tokenizer("llama3.1"), "q"), "a")
    with pytest.raises(ValueError, match="no 'user' header"):
        ChatLayout("mine", {"assistant": "A:"})


def test_a_tokenizer_folder_is_loaded_for_its_layout(tmp_path):
    tokenizer = policy_tokenizer("deepseek-r1")
    tokenizer.save_pretrained(tmp_path)
    layout = resolve_layout("auto", str(tmp_path))
    assert {role: layout.headers[role] for role in ("user", "assistant")} == {
        role: LAYOUTS["deepseek"].headers[role] for role in ("user", "assistant")}
    with pytest.raises(ValueError, match="cannot be loaded"):
        resolve_layout("auto", str(tmp_path / "missing"))
