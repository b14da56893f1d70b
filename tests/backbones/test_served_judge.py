"""The served judge (kind="openai") against response bodies in vLLM's / OpenAI's schema, served by a fake on
127.0.0.1: logprob parsing (top-k, token ids, chat), the requests it sends, errors, caching, and ARES end to end."""

from __future__ import annotations

import re

import pytest

from ares_rerank import AresConfig, score_chains
from ares_rerank.backbones import ClaimTreesOracle, load_backbone
from ares_rerank.backbones.judge import JUDGE_PROMPT
from ares_rerank.backbones.openai_judge import OpenAIJudge
from ares_rerank.backbones.served import ServerError, ServerResponseError
from ares_rerank.data.claimtrees import load_claimtrees
from fake_servers import FakeServer, Reply, load_fixture


MODELS = {"object": "list", "data": [{"id": "served-judge", "object": "model", "max_model_len": 4096}]}
NOT_FOUND = Reply({"detail": "Not Found"}, status=404)


def route(completions=None, chat=None, tokenize=None):
    """A fake OpenAI-compatible server: fixed answers per path; no /tokenize unless given (like llama.cpp)."""

    def respond(method, path, payload):
        if path == "/v1/models":
            return Reply(MODELS)
        if path == "/tokenize":
            return tokenize(payload) if tokenize else NOT_FOUND
        if path == "/v1/completions" and completions is not None:
            return completions(payload) if callable(completions) else Reply(completions)
        if path == "/v1/chat/completions" and chat is not None:
            return chat(payload) if callable(chat) else Reply(chat)
        return NOT_FOUND

    return respond


def judge(url, **kwargs) -> OpenAIJudge:
    return OpenAIJudge(url, **{"max_retries": 0, "timeout": 10.0, **kwargs})


def test_completions_top_k_fixture():
    fixture = load_fixture("openai_completions_topk.json")
    with FakeServer(route(completions=fixture["response"])) as server:
        j = judge(server.url)
        assert j.entailment_probs([["It rains."]], ["The street is wet."]) == pytest.approx([fixture["expected"]])
    # model from /v1/models, no /tokenize on this server -> top-k lookup by text, standard fields only
    assert server.paths() == ["/v1/models", "/tokenize", "/v1/completions"]
    body = server.requests[-1][2]
    assert body["model"] == "served-judge" and body["max_tokens"] == 1 and body["temperature"] == 0.0
    assert body["logprobs"] == 20 and "logprob_token_ids" not in body
    assert body["prompt"] == JUDGE_PROMPT.format(context="It rains.", hypothesis="The street is wet.") + "\nAnswer:"
    assert j.answer_token_ids is None


def test_token_ids_from_vllm_tokenize_are_requested_and_read_by_id():
    fixture = load_fixture("openai_completions_token_ids.json")
    yes_id, no_id = fixture["answer_token_ids"]

    def tokenize(payload):
        return Reply({"count": 1, "max_model_len": 4096, "tokens": [{" Yes": yes_id, " No": no_id}[payload["prompt"]]]})

    with FakeServer(route(completions=fixture["response"], tokenize=tokenize)) as server:
        j = judge(server.url, model="served-judge")
        assert j.entailment_probs([[]], ["h"]) == pytest.approx([fixture["expected"]])
    assert j.answer_token_ids == (yes_id, no_id)
    body = server.requests[-1][2]
    assert body["logprob_token_ids"] == [yes_id, no_id] and body["return_tokens_as_token_ids"] is True
    assert [p["add_special_tokens"] for _, path, p in server.requests if path == "/tokenize"] == [False, False]


def test_multi_token_answer_is_rejected_with_a_fix():
    tokenize = lambda payload: Reply({"count": 2, "tokens": [11, 12]})  # noqa: E731
    with FakeServer(route(completions={}, tokenize=tokenize)) as server:
        with pytest.raises(ValueError, match="must be a single token"):
            judge(server.url, model="m").entailment_probs([[]], ["h"])


def test_chat_fixture_and_system_prompt():
    fixture = load_fixture("openai_chat_topk.json")
    with FakeServer(route(chat=fixture["response"])) as server:
        j = judge(server.url, model="m", endpoint="chat", answer_token_ids=None, system_prompt="Be strict.")
        assert j.entailment_probs([["a", "b"]], ["c"]) == pytest.approx([fixture["expected"]])
    body = server.requests[-1][2]
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == JUDGE_PROMPT.format(context="a\nb", hypothesis="c")


def test_no_logprobs_is_a_clear_error():
    answer = {"choices": [{"index": 0, "text": " Yes", "logprobs": None, "finish_reason": "length"}]}
    with FakeServer(route(completions=answer)) as server:
        with pytest.raises(ServerResponseError, match="returned no logprobs"):
            judge(server.url, model="m").entailment_probs([[]], ["h"])


def test_missing_answer_token_error_and_floor():
    top = {" Yes": -0.1, " The": -3.0, " A": -5.0}  # " No" is not in the top-k
    answer = {"choices": [{"index": 0, "text": " Yes", "logprobs": {"tokens": [" Yes"], "token_logprobs": [-0.1],
                                                                     "top_logprobs": [top]}}]}
    with FakeServer(route(completions=answer)) as server:
        with pytest.raises(ServerResponseError, match=r"answer ' No' is not among the 3 logprobs.*top_logprobs="):
            judge(server.url, model="m").entailment_probs([[]], ["h"])
        floor = judge(server.url, model="m", missing_answer="floor")
        assert floor.entailment_probs([[]], ["h"]) == pytest.approx([1 / (1 + 2.718281828459045 ** (-5.0 + 0.1))])
        neither = {"choices": [{"logprobs": {"top_logprobs": [{" The": -1.0}]}}]}
    with FakeServer(route(completions=neither)) as server:
        with pytest.raises(ServerResponseError, match="answer ' Yes' is not among"):
            judge(server.url, model="m", missing_answer="floor").entailment_probs([[]], ["h"])


def test_answers_without_choices_and_model_listing_errors():
    with FakeServer(route(completions={"object": "error"})) as server:
        with pytest.raises(ServerResponseError, match="without choices"):
            judge(server.url, model="m").entailment_probs([[]], ["h"])

    def empty_models(method, path, payload):
        return Reply({"object": "list", "data": []})

    with FakeServer(empty_models) as server:
        with pytest.raises(ServerResponseError, match="lists no model.*pass model="):
            judge(server.url).entailment_probs([[]], ["h"])


def test_cache_and_dedup_send_each_distinct_pair_once():
    fixture = load_fixture("openai_completions_topk.json")
    with FakeServer(route(completions=fixture["response"])) as server:
        j = judge(server.url, model="m", answer_token_ids=None, concurrency=3)
        j.entailment_probs([["a"], ["a"], ["b"]], ["h", "h", "h"])
        j.entailment_probs([["b"], ["a"]], ["h", "h"])
    assert server.paths().count("/v1/completions") == 2
    assert j.stats.pairs_computed == 2 and j.stats.cache_hits == 3


def test_relevant_selection_changes_the_prompt_sent():
    fixture = load_fixture("openai_completions_topk.json")
    with FakeServer(route(completions=fixture["response"])) as server:
        j = judge(server.url, model="m", answer_token_ids=None, premise_selection="relevant")
        j.entailment_probs([["I have AB", "Rule: AB -> CD", "Rule: XY -> ZW"]], ["I have CD"])
    prompt = server.requests[-1][2]["prompt"]
    assert "Rule: AB -> CD" in prompt and "XY" not in prompt


def oracle_judge_server():
    """A fake judge that parses the prompt back and answers as the ClaimTrees rule oracle, with vLLM's -9999.0 for
    an impossible token: so the served judge must reproduce the oracle's ARES scores exactly."""
    oracle = ClaimTreesOracle()
    pattern = re.compile(r"Context:\n(.*)\n\nHypothesis:\n(.*)\n\nDoes the context", re.DOTALL)

    def completions(payload):
        context, hypothesis = pattern.search(payload["prompt"]).groups()
        premises = [] if context == "(none)" else context.split("\n")
        yes = oracle.entailment_probs([premises], [hypothesis])[0] == 1.0
        top = {" Yes": 0.0, " No": -9999.0} if yes else {" Yes": -9999.0, " No": 0.0}
        return Reply({"choices": [{"index": 0, "text": "", "logprobs": {"top_logprobs": [top]}}]})

    return route(completions=completions)


@pytest.mark.parametrize("mode", ["exact", "sample"])
def test_ares_through_the_served_judge_equals_the_oracle(mode):
    chains = load_claimtrees(4, length=5)
    config = AresConfig(mode=mode, prior=0.95 if mode == "sample" else 1.0)
    with FakeServer(oracle_judge_server()) as server:
        served = load_backbone(server.url + "/v1", kind="openai", model="m", concurrency=4)
        got = score_chains(chains, served, config=config)
    want = score_chains(chains, ClaimTreesOracle(), config=config)
    assert [s.step_scores for s in got] == [s.step_scores for s in want]
    assert [s.evaluations for s in got] == [s.evaluations for s in want]
    assert isinstance(served, OpenAIJudge)


def test_llm_judge_baseline_over_chat():
    text = "Step 1: Very Likely\nStep 3: Unlikely\nStep 2: Neutral"
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None}]}
    with FakeServer(route(chat=answer)) as server:
        j = judge(server.url, model="m", endpoint="chat", answer_token_ids=None)
        assert j.chain_step_probs(["ctx"], ["s1", "s2", "s3", "s4"]) == [1.0, 0.5, 0.2, 0.5]
        assert j.chain_step_probs(["ctx"], ["s1", "s2", "s3", "s4"]) == [1.0, 0.5, 0.2, 0.5]  # cached
    body = server.requests[-1][2]
    assert "logprobs" not in body and body["max_tokens"] == 12 * 4 + 16
    assert server.paths().count("/v1/chat/completions") == 1
    assert j.last_ratings == [1.0, 0.5, 0.2, None]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"endpoint": "responses"}, "endpoint='responses'"),
        ({"answers": ("Yes", "Yes")}, "two different strs"),
        ({"answer_token_ids": (1,)}, "two different ints"),
        ({"missing_answer": "zero"}, "missing_answer='zero'"),
        ({"top_logprobs": 0}, "top_logprobs=0"),
        ({"concurrency": 0}, "concurrency=0"),
    ],
)
def test_bad_judge_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OpenAIJudge("http://127.0.0.1:8000", **kwargs)


def test_unreachable_server_is_a_server_error():
    with pytest.raises(ServerError, match="connection refused"):
        judge("http://127.0.0.1:9", model="m", answer_token_ids=None).entailment_probs([[]], ["h"])


def test_request_for_shows_the_body_after_selection():
    with FakeServer(route()) as server:
        j = judge(server.url, model="m", premise_selection="relevant")
        path, body = j.request_for(["I have AB", "Rule: AB -> CD", "Rule: XY -> ZW"], "I have CD")
    assert path == "/v1/completions" and "XY" not in body["prompt"] and "Rule: AB -> CD" in body["prompt"]
    assert server.paths() == ["/tokenize"]  # model given; the answer ids were asked for (and not found)
