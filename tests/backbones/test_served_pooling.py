"""The served PRM (kind="vllm-pooling") against vLLM's ``/pooling`` response shapes.

vLLM cannot run here (no GPU). Two kinds of evidence instead: (1) response bodies written from vLLM's
``PoolingResponse`` schema (tests/fixtures/vllm_pooling_*.json, both row layouts) are parsed to the expected
probabilities; (2) a fake ``/pooling`` server on 127.0.0.1 runs a real tiny Qwen2 token classifier on the token ids it
receives and answers in that schema, and the served PRM must then reproduce the local StepTagPRM's scores, including
ARES scores, for every mask.
"""

from __future__ import annotations

import math

import pytest

from ares_rerank import AresConfig, score_chains
from ares_rerank.backbones import StepTagPRM
from ares_rerank.backbones.served import ServerError, ServerResponseError
from ares_rerank.backbones.vllm_pooling import VLLMPoolingPRM
from ares_rerank.data.claimtrees import load_claimtrees
from fake_servers import FakeServer, Reply, load_fixture, vllm_pooling


def pooling_server(model_path, layout="token", output="probs", calls=None):
    """A fake vLLM ``/pooling`` server running the tiny token classifier (tests/fake_servers.py); ``layout``: one row
    per token or per tag."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    model = AutoModelForTokenClassification.from_pretrained(model_path).eval()
    tag_id = AutoTokenizer.from_pretrained(model_path).convert_tokens_to_ids("<extra_0>")
    return vllm_pooling(model, tag_id, layout, output, name="tiny-prm", max_model_len=256, calls=calls)


@pytest.fixture(scope="module")
def local_prm(tiny_prm_path):
    return StepTagPRM.from_pretrained(tiny_prm_path, device="cpu", batch_size=4)


PREMISES = [["Let x = 3.", "Then 2x = 6."], ["Let x = 3."], [], ["Let x = 3.", "Then 2x = 6.", "so x + 1 = 4."]]
HYPOTHESES = ["so x + 1 = 4.", "so x + 1 = 4.", "The answer is 5.", "The answer is 5."]
NUM_BASE = [1, 1, 0, 1]


@pytest.mark.parametrize(("layout", "output"), [("token", "probs"), ("tag", "probs"), ("token", "logits")])
def test_served_scores_equal_the_local_prm(tiny_prm_path, local_prm, layout, output):
    calls = []
    with FakeServer(pooling_server(tiny_prm_path, layout, output, calls)) as server:
        probabilities = "logits" if output == "logits" else "auto"
        served = VLLMPoolingPRM(server.url, tiny_prm_path, batch_size=3, concurrency=2, max_retries=0,
                                probabilities=probabilities)
        got = served.entailment_probs(PREMISES, HYPOTHESES, num_base=NUM_BASE)
        chain = served.chain_step_probs(["Let x = 3."], ["Then 2x = 6.", "so x + 1 = 4.", "The answer is 5."])
    want = local_prm.entailment_probs(PREMISES, HYPOTHESES, num_base=NUM_BASE)
    assert got == pytest.approx(want, abs=1e-5)
    assert chain == pytest.approx(local_prm.chain_step_probs(["Let x = 3."], ["Then 2x = 6.", "so x + 1 = 4.",
                                                                              "The answer is 5."]), abs=1e-5)
    assert len(set(round(x, 6) for x in want)) > 1  # a non-degenerate model: the comparison means something
    assert sorted(calls[:2]) == [1, 3]  # 4 distinct pairs in batches of 3, one request each (concurrently)
    assert served.served_model == "tiny-prm" and served.max_length == 256  # from /v1/models


def test_requests_carry_the_local_prms_token_ids_and_masks_differ(tiny_prm_path, local_prm):
    with FakeServer(pooling_server(tiny_prm_path)) as server:
        served = VLLMPoolingPRM(server.url, tiny_prm_path, model="tiny-prm", max_length=512, max_retries=0)
        served.entailment_probs(PREMISES[:2], HYPOTHESES[:2], num_base=NUM_BASE[:2])
    body = server.requests[-1][2]
    assert server.paths() == ["/pooling"]  # model and window given: nothing else asked
    assert body["model"] == "tiny-prm" and body["task"] == "token_classify"
    want = [local_prm.encode_pair(p, h, num_base=n)["input_ids"]
            for p, h, n in zip(PREMISES[:2], HYPOTHESES[:2], NUM_BASE[:2])]
    assert sorted(body["input"]) == sorted(want)
    assert body["input"][0] != body["input"][1]  # the excluded step is absent from the input: the mask matters


def test_ares_through_the_served_prm_equals_local(tiny_prm_path, local_prm):
    chains = load_claimtrees(2, length=4)
    config = AresConfig(mode="exact", max_masks=8)
    with FakeServer(pooling_server(tiny_prm_path, layout="tag")) as server:
        served = VLLMPoolingPRM(server.url, tiny_prm_path, max_length=local_prm.max_length, max_retries=0)
        got = score_chains(chains, served, config=config)
    want = score_chains(chains, local_prm, config=config)
    for g, w in zip(got, want):
        assert g.step_scores == pytest.approx(w.step_scores, abs=1e-5)
        assert g.evaluations == w.evaluations


@pytest.mark.parametrize("name", ["vllm_pooling_per_token.json", "vllm_pooling_step_tag.json"])
def test_recorded_response_shapes_parse_to_the_positive_probabilities(tiny_prm_path, name):
    fixture = load_fixture(name)
    ids = fixture["request"]["input"][0]
    tags = fixture["expected"]["tag_positions"]

    def respond(method, path, payload):
        assert payload["input"] == [ids]
        return Reply(fixture["response"])

    with FakeServer(respond) as server:
        served = VLLMPoolingPRM(server.url, tiny_prm_path, model="Qwen/Qwen2.5-Math-PRM-7B", max_length=4096)
        served.tag_id = 151651  # the Qwen2.5 tokenizer's id of <extra_0>, as in the recorded input
        probs = served.tag_probs([{"input_ids": ids, "tags": tags, "all_tags": True}])
    assert probs == [pytest.approx(fixture["expected"]["positive"], abs=1e-6)]


def test_vllm_error_body_is_shown(tiny_prm_path):
    error = load_fixture("vllm_error_400.json")
    with FakeServer(lambda m, p, b: Reply(error["response"], status=error["status"])) as server:
        served = VLLMPoolingPRM(server.url, tiny_prm_path, model="m", max_length=512)
        with pytest.raises(ServerError, match="maximum context length is 4096"):
            served.entailment_probs([["a"]], ["b"])


def test_row_count_mismatch_is_a_clear_error(tiny_prm_path):
    answer = {"object": "list", "data": [{"index": 0, "object": "pooling", "data": [[0.5, 0.5]] * 3}]}
    with FakeServer(lambda m, p, b: Reply(answer)) as server:
        served = VLLMPoolingPRM(server.url, tiny_prm_path, model="m", max_length=512)
        with pytest.raises(ServerResponseError, match=r"returned 3 rows for an input of \d+ tokens with 1 step tags"):
            served.entailment_probs([["a"]], ["b"])


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ({"object": "list", "data": []}, "0 data entries for 1 inputs"),
        ({"data": [{"index": 0, "data": "AAAA"}]}, "not a list of rows"),
        ({"data": [{"index": 0, "data": [["x", "y"]]}]}, "expected numbers"),
    ],
)
def test_malformed_pooling_answers(tiny_prm_path, answer, match):
    with FakeServer(lambda m, p, b: Reply(answer)) as server:
        served = VLLMPoolingPRM(server.url, tiny_prm_path, model="m", max_length=512)
        with pytest.raises(ServerResponseError, match=match):
            served.entailment_probs([["a"]], ["b"])


def test_bad_arguments(tiny_prm_path):
    with pytest.raises(ValueError, match="probabilities='softmax'"):
        VLLMPoolingPRM("http://127.0.0.1:8000", tiny_prm_path, probabilities="softmax")
    with pytest.raises(ValueError, match="step_tag="):
        VLLMPoolingPRM("http://127.0.0.1:8000", tiny_prm_path, step_tag="<not one token>")
    with pytest.raises(ValueError, match="needs tokenizer="):
        VLLMPoolingPRM.from_pretrained("http://127.0.0.1:8000")
    with pytest.raises(TypeError, match="not a tokenizer"):
        VLLMPoolingPRM("http://127.0.0.1:8000", 42)


def test_load_backbone_kinds_for_servers(tiny_prm_path):
    from ares_rerank.backbones import load_backbone

    prm = load_backbone("http://127.0.0.1:8000", kind="vllm-pooling", tokenizer=tiny_prm_path, model="m")
    assert isinstance(prm, VLLMPoolingPRM) and prm.served_model == "m" and prm.client.root == "http://127.0.0.1:8000"
    with pytest.raises(ValueError, match="is a server URL: say what it serves"):
        load_backbone("http://127.0.0.1:8000/v1")


def test_rows_that_are_not_probabilities_are_refused_unless_said_to_be_logits(tiny_prm_path):
    """vLLM's STEP pooling with returned_token_ids returns hidden-state rows for a causal PRM (issue 16545): 'auto'
    must not softmax two such numbers into a score."""
    items = [{"input_ids": [5, 6], "tags": [1]}]
    hidden = {"data": [{"index": 0, "data": [[3.7, -12.2], [0.4, 2.9]]}]}
    auto = VLLMPoolingPRM("http://127.0.0.1:9", tiny_prm_path, model="m", max_length=64)
    auto.tag_id = 6
    with pytest.raises(ServerResponseError, match="not a probability vector.*16545.*prm-math-shepherd"):
        auto.tag_probs_from_answer(hidden, items)
    logits = VLLMPoolingPRM("http://127.0.0.1:9", tiny_prm_path, model="m", max_length=64, probabilities="logits")
    logits.tag_id = 6
    assert logits.tag_probs_from_answer(hidden, items)[0][0] == pytest.approx(1 / (1 + math.exp(0.4 - 2.9)))
