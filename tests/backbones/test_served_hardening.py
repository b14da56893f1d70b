"""Hardening of the served backbones (issue 15): every answer bounded in size and time, no invalid value scored or
cached, credentials sent only where asked and never shown, and property-based tests (Hypothesis) that throw
generated server answers at the response parsers of the OpenAI judge and the vLLM pooling PRM.

The contract the properties check: a finite probability in [0, 1] of the right shape, or a ``ServerError`` (its
subclass ``ServerResponseError`` for an answer that came but cannot be used); never another exception type, never a
hang. All servers are fakes on 127.0.0.1 (tests/fake_servers.py).
"""

from __future__ import annotations

import base64
import json
import math
import time
import tracemalloc
import warnings
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ares_rerank.backbones.openai_judge import OpenAIJudge
from ares_rerank.backbones.served import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TOTAL_TIMEOUT,
    InsecureCredentialsWarning,
    JsonClient,
    ServerError,
    ServerResponseError,
)
from ares_rerank.backbones.vllm_pooling import VLLMPoolingPRM
from fake_servers import FakeServer, Reply, free_port, load_fixture, scripted


MiB = 2**20
TOPK = load_fixture("openai_completions_topk.json")  # " Yes": -0.2876821, " No": -1.3862944 -> 0.75
FAST = {"timeout": 5.0, "max_retries": 0, "backoff": 0.01}
# No example database (nothing written into the checkout); short deadlines: a parser call takes microseconds.
PARSER = settings(max_examples=200, deadline=timedelta(milliseconds=500), database=None,
                  suppress_health_check=[HealthCheck.too_slow])
OVER_HTTP = settings(max_examples=100, deadline=timedelta(seconds=5), database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def topk_answer(top: dict) -> dict:
    return {"choices": [{"index": 0, "text": "", "logprobs": {"top_logprobs": [top]}}]}


def judge(url: str, **kwargs) -> OpenAIJudge:
    return OpenAIJudge(url, **{"model": "m", "answer_token_ids": None, **FAST, **kwargs})


# -- bounds: response size and total time ---------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_an_endless_body_stops_at_max_response_bytes_and_memory_stays_bounded():
    with FakeServer(scripted(Reply(b'{"choices": [', endless=True))) as server:
        client = JsonClient(server.url, max_response_bytes=1 * MiB, **FAST)
        tracemalloc.start()
        try:
            with pytest.raises(ServerResponseError, match=r"more than max_response_bytes=1048576.*raise max_resp"):
                client.post("/v1/completions", {})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 4 * MiB, f"reading a body capped at 1 MiB allocated {peak / MiB:.1f} MiB at peak"
    assert len(server.requests) == 1  # an oversized answer is not retried


@pytest.mark.timeout(30)
def test_a_large_content_length_is_refused_before_the_body_is_read():
    big = b'{"pad": "' + b"x" * (2 * MiB) + b'"}'
    with FakeServer(scripted(Reply(big))) as server:
        with pytest.raises(ServerResponseError, match=f"Content-Length: {len(big)}") as info:
            JsonClient(server.url, max_response_bytes=MiB, **FAST).get("/v1/models")
        assert info.value.status == 200 and info.value.attempts == 1
        assert JsonClient(server.url, max_response_bytes=3 * MiB, **FAST).get("/v1/models")["pad"] == "x" * (2 * MiB)


def test_bounds_have_documented_defaults_and_reach_the_client(tiny_prm_path):
    assert DEFAULT_MAX_RESPONSE_BYTES == 32 * MiB and DEFAULT_TOTAL_TIMEOUT == 300.0
    client = JsonClient("http://127.0.0.1:8000")
    assert (client.max_response_bytes, client.total_timeout, client.timeout) == (32 * MiB, 300.0, 60.0)
    j = OpenAIJudge("http://127.0.0.1:8000", max_response_bytes=1000, total_timeout=5.0)
    assert (j.client.max_response_bytes, j.client.total_timeout) == (1000, 5.0)
    prm = VLLMPoolingPRM("http://127.0.0.1:8000", tiny_prm_path, max_response_bytes=2000)
    assert (prm.client.max_response_bytes, prm.client.total_timeout, prm.client.timeout) == (2000, 600.0, 120.0)
    for bad in ({"max_response_bytes": 0}, {"max_response_bytes": 1.5}, {"total_timeout": 0},
                {"total_timeout": float("nan")}, {"timeout": float("inf")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            JsonClient("http://127.0.0.1:8000", **bad)


@pytest.mark.timeout(30)
def test_total_timeout_bounds_one_request_with_all_its_retries():
    with FakeServer(scripted(Reply({}, delay=2.0))) as server:
        client = JsonClient(server.url, timeout=0.4, max_retries=50, backoff=0.01, total_timeout=1.5)
        start = time.monotonic()
        with pytest.raises(ServerError, match=r"total_timeout=1.5") as info:
            client.post("/v1/completions", {})
        elapsed = time.monotonic() - start
    assert info.value.attempts < 10 and len(server.requests) < 10  # not 51 attempts x 0.4 s
    assert elapsed < 5.0


@pytest.mark.timeout(30)
def test_a_retry_after_past_total_timeout_gives_up_at_once():
    with FakeServer(scripted(Reply({}, status=503, headers={"Retry-After": "120"}))) as server:
        client = JsonClient(server.url, timeout=5.0, max_retries=3, max_backoff=600.0, total_timeout=2.0)
        with pytest.raises(ServerError, match=r"total_timeout=2 s would pass before the next one.*HTTP 503"):
            client.get("/v1/models")
    assert len(server.requests) == 1


# -- truncated and malformed bodies -----------------------------------------------------------------------------------
ANSWER = json.dumps(TOPK["response"]).encode()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("send_length", [True, False], ids=["short-of-content-length", "json-ends-mid-way"])
def test_a_body_cut_off_mid_way_is_retried_as_incomplete(send_length):
    cut = Reply(ANSWER, cut_at=len(ANSWER) // 2, send_length=send_length)
    with FakeServer(scripted(cut, Reply(ANSWER))) as server:
        assert judge(server.url, max_retries=1).entailment_probs([[]], ["h"]) == pytest.approx([0.75])
    assert server.paths() == ["/v1/completions", "/v1/completions"]
    with FakeServer(scripted(cut)) as server:
        with pytest.raises(ServerError, match="incomplete response") as info:
            judge(server.url, max_retries=2).entailment_probs([[]], ["h"])
    assert "not JSON" not in str(info.value) and info.value.attempts == 3


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "body",
    [b"1" * 5000, b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe{}", b"<html>502</html>"],
    ids=["int-of-5000-digits", "nested-too-deep", "bad-encoding", "html"],
)
def test_bodies_that_are_not_usable_json_are_a_server_error(body):
    with FakeServer(scripted(Reply(body))) as server:
        with pytest.raises(ServerError, match="not JSON"):
            JsonClient(server.url, **FAST).get("/v1/models")


# -- no invalid value is scored or cached -----------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_a_nan_answer_is_an_error_and_not_cached_so_the_recovered_server_is_asked_again():
    bad = topk_answer({" Yes": math.nan, " No": -1.0})
    with FakeServer(scripted(Reply(bad), Reply(TOPK["response"]))) as server:
        j = judge(server.url)
        with pytest.raises(ServerResponseError, match=r"logprob nan .*finite number <= 0"):
            j.entailment_probs([["a"]], ["h"])
        assert j.entailment_probs([["a"]], ["h"]) == pytest.approx([0.75])
        assert j.entailment_probs([["a"]], ["h"]) == pytest.approx([0.75])  # now cached
    assert server.paths().count("/v1/completions") == 2 and len(j.cache) == 1


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": Infinity, " No": Infinity}]}}]}',
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": -Infinity, " No": -Infinity}]}}]}',
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": 7.0, " No": 3.0}]}}]}',
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": 1e400, " No": -1.0}]}}]}',
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": "-0.5", " No": -1.0}]}}]}',
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": true, " No": -1.0}]}}]}',
        b'{"choices": [{"logprobs": {"top_logprobs": [{" Yes": -0.1, " No": -1.0}], "tokens": [" Yes"], '
        b'"token_logprobs": [NaN]}}]}',
    ],
    ids=["inf-inf", "-inf-inf", "positive", "1e400", "string", "bool", "nan-sampled-token"],
)
def test_logprobs_must_be_finite_and_not_above_zero(body):
    with FakeServer(scripted(Reply(body))) as server:
        with pytest.raises(ServerResponseError, match="finite number <= 0"):
            judge(server.url).entailment_probs([[]], ["h"])


def test_a_logprob_a_rounding_error_above_zero_reads_as_zero():
    j = judge("http://127.0.0.1:9")
    assert j.prob_from_answer(topk_answer({" Yes": 1e-7, " No": -9999.0})) == 1.0


@pytest.mark.parametrize(
    ("endpoint", "answer"),
    [
        ("chat", {"choices": [{"logprobs": {"content": "No"}}]}),  # was AttributeError: 'str' ... 'get'
        ("chat", {"choices": [{"logprobs": {"content": [{"token": "No", "top_logprobs": [5]}]}}]}),  # AttributeError
        ("chat", {"choices": [{"logprobs": {"content": {"0": 1}}}]}),  # was KeyError: 0
        ("completions", {"choices": [{"logprobs": {"top_logprobs": ["ab"]}}]}),  # was AttributeError
        ("completions", {"choices": [{"logprobs": {"top_logprobs": [{" Yes": "abc", " No": -1}]}}]}),  # float()
        ("completions", {"choices": [{"logprobs": {"top_logprobs": [{" Yes": 10**400, " No": -1}]}}]}),  # Overflow
        ("completions", {"choices": [{"logprobs": {"top_logprobs": [{}], "tokens": 5, "token_logprobs": 3}}]}),
    ],
)
def test_malformed_logprob_shapes_are_our_error_not_a_crash(endpoint, answer):
    with pytest.raises(ServerResponseError):
        judge("http://127.0.0.1:9", endpoint=endpoint).prob_from_answer(answer)


@pytest.mark.timeout(30)
def test_malformed_tokenize_models_and_generation_answers():
    def respond(method, path, payload):
        if path == "/v1/models":
            return Reply({"data": ["not-a-card", {"id": 5}]})
        if path == "/tokenize":
            return Reply({"tokens": ["abc"]})  # was a bare ValueError from int("abc")
        return Reply({"choices": [{"text": ["not", "text"]}]})

    with FakeServer(respond) as server:
        with pytest.raises(ServerResponseError, match="lists no model"):
            OpenAIJudge(server.url, **FAST).entailment_probs([[]], ["h"])
        with pytest.raises(ServerResponseError, match="tokens"):
            OpenAIJudge(server.url, model="m", **FAST).entailment_probs([[]], ["h"])
        with pytest.raises(ServerResponseError, match="without generated text"):
            judge(server.url).chain_step_probs(["c"], ["s1"])


def _prm_item(prm: VLLMPoolingPRM) -> dict:
    t = prm.tag_id
    return {"input_ids": [5, 6, t, 7, t], "tags": [2, 4], "all_tags": True}


@pytest.mark.parametrize(
    ("rows", "probabilities"),
    [
        ([[math.nan, 1.0], [0.5, 0.5]], "logits"),  # was NaN out of the softmax
        ([[0.0, math.inf], [0.5, 0.5]], "auto"),  # was NaN (inf - inf)
        ([[0, 10**400], [0.5, 0.5]], "auto"),  # was OverflowError from float()
        ([[True, False], [0.5, 0.5]], "auto"),  # a bool is not a number
    ],
)
def test_pooling_rows_must_be_finite_numbers(tiny_prm_path, rows, probabilities):
    prm = VLLMPoolingPRM("http://127.0.0.1:9", tiny_prm_path, model="m", max_length=64, probabilities=probabilities)
    with pytest.raises(ServerResponseError, match="all finite"):
        prm.tag_probs_from_answer({"data": [{"index": 0, "data": rows}]}, [_prm_item(prm)])


def test_pooling_entry_indexes_must_match_the_inputs(tiny_prm_path):
    prm = VLLMPoolingPRM("http://127.0.0.1:9", tiny_prm_path, model="m", max_length=64)
    entry = {"index": 0, "data": [[0.5, 0.5], [0.2, 0.8]]}
    with pytest.raises(ServerResponseError, match="entry indexes"):
        prm.tag_probs_from_answer({"data": [entry, dict(entry)]}, [_prm_item(prm)] * 2)


@pytest.mark.timeout(30)
def test_a_nan_pooling_answer_is_an_error_and_not_cached(tiny_prm_path):
    def rows(positive: float) -> Reply:  # the per-tag layout: one row for the one tag of a pair without premises
        return Reply({"data": [{"index": 0, "data": [[1 - positive, positive]]}]})

    with FakeServer(scripted(rows(math.nan), rows(0.25))) as server:
        prm = VLLMPoolingPRM(server.url, tiny_prm_path, model="m", max_length=128, **FAST)
        with pytest.raises(ServerResponseError, match="all finite"):
            prm.entailment_probs([[]], ["a"])
        assert prm.entailment_probs([[]], ["a"]) == pytest.approx([0.25])
        assert prm.entailment_probs([[]], ["a"]) == pytest.approx([0.25])  # now cached
    assert len(server.requests) == 2


@pytest.mark.timeout(30)
def test_malformed_model_listing_for_the_prm(tiny_prm_path):
    with FakeServer(scripted(Reply({"data": ["x", {"id": "m", "max_model_len": True}]}))) as server:
        prm = VLLMPoolingPRM(server.url, tiny_prm_path, **FAST)
        prm._resolve()  # was AttributeError: 'str' object has no attribute 'get'
    assert prm.served_model == "m" and prm.max_length > 1  # a bool is not a window length


# -- credentials ------------------------------------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_userinfo_is_sent_as_basic_auth_and_never_shown(tiny_prm_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeServer(scripted(Reply({"ok": True}))) as server:
        url = server.url.replace("http://", "http://ann:s3cr%40t@")
        client = JsonClient(url, **FAST)
        assert client.post("/v1/completions", {}) == {"ok": True}
    sent = server.request_headers[0]["Authorization"]
    assert sent == "Basic " + base64.b64encode(b"ann:s3cr@t").decode()
    shown = [client.root, repr(client), repr(OpenAIJudge(url)), repr(VLLMPoolingPRM(url, tiny_prm_path))]
    dead = f"http://ann:s3cr%40t@127.0.0.1:{free_port()}"
    with pytest.raises(ServerError) as info:
        JsonClient(dead, **FAST).get("/v1/models")
    shown += [str(info.value), info.value.url]
    for bad, error in ((dead, {"api_key": "k"}), ("ftp://ann:s3cr%40t@host", {}), ("http://ann:s3cr%40t@h:x", {})):
        with pytest.raises(ValueError) as refused:
            JsonClient(bad, **error)
        shown.append(str(refused.value))
    for text in shown:
        assert "s3cr" not in text and "ann" not in text, text


@pytest.mark.parametrize(
    ("url", "api_key", "sent", "warns"),
    [
        ("http://127.0.0.1:8000", None, "Bearer env-key", None),
        ("http://localhost:8000/v1", None, "Bearer env-key", None),
        ("http://[::1]:8000", None, "Bearer env-key", None),
        ("https://api.example.invalid/v1", None, "Bearer env-key", None),
        ("http://10.1.2.3:8000", None, None, "NOT sent"),
        ("http://10.1.2.3:8000", "given", "Bearer given", "clear text"),
        ("http://ann:pw@10.1.2.3:8000", None, "Basic " + base64.b64encode(b"ann:pw").decode(), "clear text"),
        ("https://api.example.invalid", "given", "Bearer given", None),
        ("http://10.1.2.3:8000", "", None, None),
    ],
)
def test_api_key_rule(monkeypatch, url, api_key, sent, warns):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = JsonClient(url, api_key=api_key)
    assert client.headers.get("Authorization") == sent
    messages = [str(w.message) for w in caught if issubclass(w.category, InsecureCredentialsWarning)]
    if warns is None:
        assert messages == []
    else:
        assert len(messages) == 1 and warns in messages[0] and "env-key" not in messages[0]


@pytest.mark.timeout(30)
def test_the_environment_key_reaches_a_loopback_server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    with FakeServer(scripted(Reply({"ok": True}))) as server:
        JsonClient(server.url, **FAST).get("/v1/models")
        JsonClient(server.url, api_key="", **FAST).get("/v1/models")
    assert [h.get("Authorization") for h in server.request_headers] == ["Bearer env-key", None]


def test_an_api_key_with_a_line_break_is_refused():
    with pytest.raises(TypeError, match="control characters"):
        JsonClient("https://example.invalid", api_key="sk-1\r\nX-Injected: 1")
    with pytest.raises(TypeError, match="api_key must be a string"):
        JsonClient("https://example.invalid", api_key=123)


# -- property-based: generated answers against the parsers -----------------------------------------------------------
NUMBERS = (
    st.floats()  # NaN, +-inf, subnormals, huge, positive
    | st.integers(min_value=-(10**400), max_value=10**400)  # beyond float range too
    | st.sampled_from([-9999.0, 0, -0.0, 1e-7, 7.0, 1e308])
)
JUNK = st.none() | st.booleans() | NUMBERS | st.text(max_size=4) | st.just([]) | st.just({}) | st.lists(
    st.integers(), max_size=2) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
VALID_LOGPROB = st.floats(min_value=-50.0, max_value=0.0) | st.just(-9999.0)
BAD_LOGPROB = st.one_of(  # not a finite number <= 0 (a null logprob is skipped, as servers send for unscored tokens)
    st.sampled_from([math.nan, math.inf, -math.inf, 7.0, "-0.5", True, False, [-0.5], {}]),
    st.floats(min_value=1e-3, allow_nan=False),
    st.integers(1, 10**400),
    st.integers(-(10**400), -(10**309)),  # beyond a float: float() overflows
)


def maybe(strategy: st.SearchStrategy, weight: int = 8) -> st.SearchStrategy:
    """Mostly ``strategy`` (``weight`` to 1), else a JSON value of another type: each level of an answer may break."""
    # Not st.one_of(strategy, ..., JUNK): one_of flattens JUNK's own branches, so junk would win most draws.
    return st.sampled_from(range(weight + 1)).flatmap(lambda i: JUNK if i == 0 else strategy)


LOGPROB = st.sampled_from(range(12)).flatmap(lambda i: NUMBERS if i == 0 else JUNK if i == 1 else VALID_LOGPROB)
CHAT_ENTRY = st.fixed_dictionaries({"token": maybe(st.sampled_from(["Yes", "No", "The"])), "logprob": LOGPROB})
CHAT_LOGPROBS = st.fixed_dictionaries({"content": maybe(st.lists(maybe(st.fixed_dictionaries({
    "token": maybe(st.sampled_from(["Yes", "No"])),
    "logprob": LOGPROB,
    "top_logprobs": maybe(st.lists(maybe(CHAT_ENTRY), min_size=1, max_size=4)),
})), min_size=1, max_size=2))})
COMPLETION_TOP = st.one_of(
    st.fixed_dictionaries({" Yes": LOGPROB, " No": LOGPROB}, optional={" The": LOGPROB}),
    st.fixed_dictionaries({" Yes": LOGPROB, " No": LOGPROB}, optional={" The": LOGPROB}),
    st.dictionaries(st.sampled_from([" Yes", " No", " The"]), LOGPROB, max_size=3),
    st.lists(maybe(st.fixed_dictionaries({"token": maybe(st.sampled_from([" Yes", " No"])), "logprob": LOGPROB})),
             max_size=3),
    JUNK,
)
COMPLETION_LOGPROBS = st.fixed_dictionaries(
    {"top_logprobs": maybe(st.lists(COMPLETION_TOP, min_size=1, max_size=2))},
    optional={"tokens": maybe(st.lists(maybe(st.sampled_from([" Yes", " No"])), max_size=2)),
              "token_logprobs": maybe(st.lists(LOGPROB, max_size=2))},
)


def answers(logprobs: st.SearchStrategy) -> st.SearchStrategy:
    """A completions / chat answer in the OpenAI schema, where any level may be missing or of the wrong type."""
    choice = st.fixed_dictionaries({"index": st.just(0), "logprobs": maybe(logprobs)})
    return maybe(st.fixed_dictionaries({"choices": maybe(st.lists(maybe(choice), min_size=1, max_size=2))}))


def assert_contract(call) -> object:
    """Run ``call``: a finite probability in [0, 1], or one of OUR errors; any other exception or value fails."""
    try:
        value = call()
    except ServerError as err:
        event(f"error: {type(err).__name__}")
        return err
    event("probability")
    assert isinstance(value, float) and math.isfinite(value) and 0.0 <= value <= 1.0, value
    return value


@pytest.mark.parametrize(("endpoint", "strategy"), [("chat", CHAT_LOGPROBS), ("completions", COMPLETION_LOGPROBS)])
@pytest.mark.parametrize("missing_answer", ["error", "floor"])
def test_property_judge_parser_gives_a_probability_or_our_error(endpoint, strategy, missing_answer):
    j = judge("http://127.0.0.1:9", endpoint=endpoint, missing_answer=missing_answer)

    @PARSER
    @given(answers(strategy))
    def check(answer):
        assert_contract(lambda: j.prob_from_answer(answer))

    check()


@PARSER
@given(yes=VALID_LOGPROB, no=VALID_LOGPROB, other=VALID_LOGPROB)
def test_property_valid_logprobs_give_the_sigmoid_of_their_difference(yes, no, other):
    answer = topk_answer({" Yes": yes, " The": other, " No": no})
    expected = 1.0 / (1.0 + math.exp(min(no - yes, 700.0)))
    assert judge("http://127.0.0.1:9").prob_from_answer(answer) == pytest.approx(expected, abs=1e-12)


@PARSER
@given(st.data())
def test_property_one_invalid_logprob_anywhere_is_an_error(data):
    endpoint = data.draw(st.sampled_from(["completions", "chat"]))
    prefix = " " if endpoint == "completions" else ""
    tokens = [prefix + t for t in ("Yes", "No", "The", "A")]
    values = data.draw(st.lists(VALID_LOGPROB, min_size=4, max_size=4))
    bad = data.draw(st.integers(0, 3))
    values[bad] = data.draw(BAD_LOGPROB)
    if endpoint == "completions":
        logprobs = {"top_logprobs": [dict(zip(tokens, values))]}
    else:
        entries = [{"token": t, "logprob": v} for t, v in zip(tokens, values)]
        logprobs = {"content": [{**entries[0], "top_logprobs": entries}]}
    answer = {"choices": [{"index": 0, "logprobs": logprobs}]}
    with pytest.raises(ServerResponseError, match="finite number <= 0"):
        judge("http://127.0.0.1:9", endpoint=endpoint, missing_answer="floor").prob_from_answer(answer)


PROBS_ROW = st.floats(0.0, 1.0).map(lambda p: [1.0 - p, p])
LOGITS_ROW = st.lists(st.floats(-1e4, 1e4), min_size=2, max_size=2)
BAD_NUMBER = st.sampled_from([math.nan, math.inf, -math.inf, 10**400, -(10**400), True, "0.5", None])
SPOILED_ROW = st.tuples(PROBS_ROW | LOGITS_ROW, st.integers(0, 1), BAD_NUMBER).map(
    lambda t: [t[2] if i == t[1] else v for i, v in enumerate(t[0])])  # a valid row with one value broken
ROW = st.sampled_from(range(30)).flatmap(  # rows mostly valid (each answer has several): 1/30 junk, 4/30 broken
    lambda i: JUNK if i == 0 else st.lists(maybe(NUMBERS, 2), max_size=3) if i < 3 else SPOILED_ROW if i < 5
    else (PROBS_ROW, LOGITS_ROW)[i % 2])


def pooling_entry(index: int, tokens: int, tags: int) -> st.SearchStrategy:
    rows = st.sampled_from([tokens, tags, None]).flatmap(  # one row per token, one per tag, or any count
        lambda n: st.lists(ROW, max_size=6) if n is None else st.lists(ROW, min_size=n, max_size=n))
    return st.fixed_dictionaries({"index": maybe(st.just(index), 4), "data": maybe(rows)})


# Two inputs: 4 tokens with 2 tags (read at both), 2 tokens with 1 tag (read at its last).
POOLING = maybe(st.fixed_dictionaries({"data": maybe(st.one_of(
    st.tuples(pooling_entry(0, 4, 2), pooling_entry(1, 2, 1)).map(list),
    st.tuples(pooling_entry(1, 2, 1), pooling_entry(0, 4, 2)).map(list),  # vLLM may answer in any order
    st.lists(maybe(pooling_entry(0, 4, 2)), max_size=3),
))}))


@pytest.mark.parametrize("probabilities", ["auto", "probs", "logits"])
def test_property_pooling_parser_gives_probabilities_of_the_right_shape_or_our_error(tiny_prm_path, probabilities):
    prm = VLLMPoolingPRM("http://127.0.0.1:9", tiny_prm_path, model="m", max_length=64, probabilities=probabilities)
    t = prm.tag_id
    items = [{"input_ids": [5, t, 6, t], "tags": [1, 3], "all_tags": True}, {"input_ids": [t, 7], "tags": [0]}]

    @PARSER
    @given(POOLING)
    def check(answer):
        try:
            out = prm.tag_probs_from_answer(answer, items)
        except ServerError as err:
            event(f"error: {type(err).__name__}")
            return
        event("probabilities")
        assert [len(p) for p in out] == [2, 1]
        assert all(isinstance(v, float) and math.isfinite(v) and 0.0 <= v <= 1.0 for p in out for v in p), out

    check()


@pytest.fixture(scope="module")
def echo_server():
    """A fake server that answers every request with ``state["reply"]`` (set by each generated example)."""
    state = {"reply": Reply({})}
    with FakeServer(lambda method, path, payload: state["reply"]) as server:
        yield server, state


def bodies() -> st.SearchStrategy:
    """Raw answer bytes: valid and malformed JSON answers (NaN / Infinity as Python writes them), arbitrary bytes, a
    known good answer; then maybe cut anywhere, with or without a Content-Length."""
    encoded = answers(COMPLETION_LOGPROBS).map(lambda a: json.dumps(a).encode())
    raw = st.one_of(encoded, encoded, st.binary(max_size=64), st.just(ANSWER))
    return st.tuples(raw, st.none() | st.integers(0, 400), st.booleans())


@pytest.mark.timeout(120)
def test_property_judge_over_http_never_hangs_or_crashes(echo_server):
    server, state = echo_server
    j = judge(server.url, timeout=2.0, total_timeout=3.0, max_response_bytes=4096)

    @OVER_HTTP
    @given(bodies())
    def check(case):
        body, cut_at, send_length = case
        cut_at = None if cut_at is None or cut_at >= len(body) else cut_at
        state["reply"] = Reply(body, cut_at=cut_at, send_length=send_length)
        j.cache.clear()
        assert_contract(lambda: j.entailment_probs([["p"]], ["h"])[0])

    check()


@pytest.mark.timeout(120)
def test_property_an_answer_cut_anywhere_is_reported_incomplete_never_as_not_json(echo_server):
    server, state = echo_server
    client = JsonClient(server.url, **FAST)
    whole = answers(COMPLETION_LOGPROBS).filter(lambda a: isinstance(a, (dict, list))).map(lambda a: json.dumps(a))

    @OVER_HTTP
    @given(whole, st.floats(0.0, 1.0), st.booleans())
    @example('{"\\u001f": 0}', 0.5, False)  # found by this test: a cut inside a \\uXXXX escape was "not JSON"
    def check(text, where, send_length):
        body = text.encode()
        cut = min(len(body) - 1, max(1, int(where * len(body))))
        state["reply"] = Reply(body, cut_at=cut, send_length=send_length)
        with pytest.raises(ServerError, match="incomplete response") as info:
            client.post("/v1/completions", {})
        assert "not JSON" not in str(info.value)

    check()
