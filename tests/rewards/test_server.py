"""The ARES reward server (``ares-rerank serve``, OpenRLHF's ``POST /get_reward``): concurrent clients get exactly
their own rewards, equal to ``AresReward``'s; requests are batched across clients; a query that does not start with
its prompt is matched by the prompt's longest ending; the server listens while its backbone loads and holds requests
meanwhile; every bound (queue, body size, items, connections, time) answers a JSON error, logged with its reason, and
the server keeps running; SIGTERM / Ctrl-C answer the requests in flight and exit 0.

What OpenRLHF's own client sends and reads (its rollout code, retries, truncation, chat templates) is tested with
that client in tests/frameworks/test_openrlhf_client.py; here the server's own behaviour is driven over raw HTTP.
Servers run in-process on 127.0.0.1 with deterministic fake backbones, except the command tests, which run the real
command as a subprocess. Timeouts are hang guards only: nothing asserts how long anything took.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import logging

import pytest
from hypothesis import given, settings, strategies as st

from ares_rerank import AresReranker, ClaimTreesOracle, FunctionBackbone
from ares_rerank.chat_templates import strip_end_markers
from ares_rerank.cli import main
from ares_rerank.rewards.openrlhf import DEFAULT_END_MARKERS, split_query
from ares_rerank.rewards import AresReward
from ares_rerank.rewards.server import RewardServer, ServeConfig


REPO_ROOT = Path(__file__).resolve().parents[2]
MiB = 2**20
GUARD = 30  # seconds: hang guard for every socket and wait


def hashed(premises: list[list[str]], hypotheses: list[str]) -> list[float]:
    """A deterministic 'probability' per (premises, hypothesis); raises on a hypothesis containing BOOM."""
    out = []
    for p, h in zip(premises, hypotheses):
        if "BOOM" in h:
            raise RuntimeError("the backbone failed on this step")
        digest = hashlib.sha256(("\x01".join(p) + "\x02" + h).encode("utf-8", "surrogatepass")).digest()
        out.append(0.05 + 0.9 * int.from_bytes(digest[:4], "big") / 2**32)
    return out


def make_reranker(fn=hashed) -> AresReranker:
    return AresReranker(FunctionBackbone(fn, name="hashed"), step_separator="\n\n")


class Gate:
    """A backbone function that blocks every call until ``release()``; ``entered`` is set by the first call."""

    def __init__(self) -> None:
        self.entered, self.open = threading.Event(), threading.Event()

    def __call__(self, premises, hypotheses):
        self.entered.set()
        assert self.open.wait(GUARD), "the test never released the gate"
        return hashed(premises, hypotheses)

    def release(self) -> None:
        self.open.set()


def post(server: RewardServer, body, path: str = "/get_reward", method: str = "POST", headers: dict | None = None):
    """(status, headers, decoded JSON) of one request on a new connection."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=GUARD)
    try:
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        conn.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read())
    finally:
        conn.close()


def health(server: RewardServer) -> dict:
    return post(server, None, "/health", "GET")[2]


def wait_for(predicate, what: str) -> None:
    event = threading.Event()
    for _ in range(GUARD * 100):
        if predicate():
            return
        event.wait(0.01)
    raise AssertionError(f"hang guard: {what} did not happen within {GUARD} s")


def raw_response(sock: socket.socket) -> tuple[int, dict, dict]:
    """Read one HTTP response from a raw socket."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, dict(response.getheaders()), json.loads(response.read())


# -- correctness under concurrency --------------------------------------------------------------------------------
def _request(rid: int, rng: random.Random) -> tuple[list[str], list[str], list[str]]:
    """A request's prompts, queries (as OpenRLHF decodes them) and the clean responses AresReward should score."""
    prompts, queries, clean = [], [], []
    for j in range(rng.randint(1, 4)):
        prompt = f"<|im_start|>user\nProblem {rid}.{j}: we have {rng.choice(['a', 'b', 'c'])}.<|im_end|>\n"
        kind = rng.random()
        if kind < 0.1:
            response = rng.choice(["", "   ", "\n\n"])  # unscorable: no step
        elif kind < 0.15:
            response = f"we use {rid}.\n\nBOOM {j}"  # the backbone raises on it: unscorable
        else:
            steps = [f"step {k} of {rid}.{j} uses {rng.choice(['a', 'b', 'c', 'd'])}" for k in range(rng.randint(1, 4))]
            response = " " + "\n\n".join(steps)
        marker = rng.choice(["", "", "<|im_end|>", "<|im_end|>\n<|endoftext|>"])
        prompts.append(prompt)
        queries.append(prompt + response + marker)
        clean.append(response)
    return prompts, queries, clean


@pytest.mark.timeout(300)
def test_eight_concurrent_clients_get_exactly_their_own_rewards_equal_to_ares_reward():
    rng = random.Random(7)
    clients, per_client = 8, 100
    requests = {(c, i): _request(c * per_client + i, rng) for c in range(clients) for i in range(per_client)}
    reranker = make_reranker()
    # What AresReward gives on the same (prompt, clean response) pairs, computed before the server runs.
    flat_prompts = [p for prompts, _, _ in requests.values() for p in prompts]
    flat_clean = [r for _, _, clean in requests.values() for r in clean]
    logged: dict = {}
    reward = AresReward(reranker, unscorable_value=0.0)
    flat_expected = reward(flat_prompts, flat_clean, log_extra=lambda key, values: logged.update({key: values}))
    scorable = [n is not None for n in logged["ares_final/num_steps"]]  # None where AresReward could not score
    expected, start = {}, 0
    for key, (prompts, _, _) in requests.items():
        expected[key] = (flat_expected[start:start + len(prompts)], scorable[start:start + len(prompts)])
        start += len(prompts)
    assert 0 < sum(scorable) < len(scorable)  # both kinds are exercised

    answers: dict = {}
    lock = threading.Lock()

    def client(c: int, server: RewardServer) -> None:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=GUARD)  # kept alive across requests
        for i in range(per_client):
            prompts, queries, _ = requests[(c, i)]
            body = json.dumps({"query": queries, "prompts": prompts, "labels": [None] * len(prompts)})
            conn.request("POST", "/get_reward", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = (response.status, json.loads(response.read()))
            with lock:
                assert (c, i) not in answers
                answers[(c, i)] = answer
        conn.close()

    with RewardServer(reranker, ServeConfig(port=0, max_batch=32, max_wait_ms=5)) as server:
        threads = [threading.Thread(target=client, args=(c, server)) for c in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD * 8)
        assert not any(thread.is_alive() for thread in threads), "hang guard: a client never finished"
        assert server.answered == clients * per_client

    assert sorted(answers) == sorted(requests)  # none lost, none duplicated (checked on insert)
    for key, (status, answer) in answers.items():
        rewards, scored = expected[key]
        assert status == 200, answer
        assert answer["rewards"] == rewards, key
        assert answer["scores"] == rewards
        logs = answer["extra_logs"]
        assert set(logs) == {"ares_scored", "ares_num_steps", "ares_first_error", "ares_flagged_frac",
                             "ares_evaluations"}
        assert all(len(values) == len(rewards) for values in logs.values())
        assert logs["ares_scored"] == [int(s) for s in scored]
        assert [len(s) for s in answer["step_scores"]] == logs["ares_num_steps"]
        assert [len(e) for e in answer["step_ends"]] == logs["ares_num_steps"]


def test_requests_queued_together_are_scored_in_one_reranker_call():
    gate = Gate()
    reranker = make_reranker(gate)
    prompts = [f"we have {x}." for x in "abcde"]
    responses = [f" so {x}\n\nthen {x} again" for x in "abcde"]
    expected = AresReward(make_reranker(), unscorable_value=0.0)(prompts, responses)
    results: dict = {}

    def send(i: int, server: RewardServer) -> None:
        results[i] = post(server, {"query": [prompts[i] + responses[i]], "prompts": [prompts[i]]})

    with RewardServer(reranker, ServeConfig(port=0, max_batch=64, max_wait_ms=0)) as server:
        first = threading.Thread(target=send, args=(0, server))
        first.start()
        assert gate.entered.wait(GUARD)  # request 0 is being scored, alone
        rest = [threading.Thread(target=send, args=(i, server)) for i in range(1, 5)]
        for thread in rest:
            thread.start()
        wait_for(lambda: health(server)["queued"] == 4, "four requests queued")
        gate.release()
        for thread in [first, *rest]:
            thread.join(GUARD)
        assert server.batcher.batches == 2  # request 0, then the four queued ones together
    for i in range(5):
        status, _, answer = results[i]
        assert status == 200 and answer["rewards"] == [expected[i]]


def test_a_full_queue_answers_503_with_retry_after_and_the_queued_requests_still_succeed():
    gate = Gate()
    config = ServeConfig(port=0, max_batch=1, max_wait_ms=0, max_queue=3, max_items=3)
    body = {"query": ["p so x", "p so y"], "prompts": ["p", "p"]}
    results: dict = {}
    with RewardServer(make_reranker(gate), config) as server:
        one = {"query": ["p a"], "prompts": ["p"]}
        first = threading.Thread(target=lambda: results.setdefault(0, post(server, one)))
        first.start()
        assert gate.entered.wait(GUARD)
        second = threading.Thread(target=lambda: results.setdefault(1, post(server, body)))
        second.start()
        wait_for(lambda: health(server)["queued"] == 2, "the second request queued")
        status, headers, answer = post(server, body)  # 2 + 2 > max_queue=3
        assert status == 503 and headers["Retry-After"] == "1"
        assert "queue" in answer["error"] and "--max-queue" in answer["error"] and "Retry" in answer["error"]
        gate.release()
        first.join(GUARD)
        second.join(GUARD)
        assert results[0][0] == 200 and results[1][0] == 200
        assert post(server, body)[0] == 200  # the retry succeeds


def test_unscorable_responses_get_the_unscorable_value():
    reranker = make_reranker()
    with RewardServer(reranker, ServeConfig(port=0, unscorable_value=-1.0)) as server:
        queries = ["p", "p   ", "p \ud800 lone surrogate", "p we go\n\nBOOM", "p so a"]
        status, _, answer = post(server, {"query": queries, "prompts": ["p"] * 5})
    assert status == 200
    assert answer["rewards"][:4] == [-1.0] * 4 and 0.0 <= answer["rewards"][4] <= 1.0
    assert answer["extra_logs"]["ares_scored"] == [0, 0, 0, 0, 1]


def test_end_markers_are_stripped_from_the_end_only():
    markers = ServeConfig().end_markers
    assert strip_end_markers(" a\n\nb<|im_end|>\n<|endoftext|>", markers) == " a\n\nb"
    assert strip_end_markers(" a <|im_end|> b ", markers) == " a <|im_end|> b "
    assert strip_end_markers(" a</s>", []) == " a</s>"


def _strip_end_markers_by_definition(text: str, markers: list[str]) -> str:
    """The definition, one marker at a time (quadratic: for short texts only)."""
    while True:
        trimmed = text.rstrip()
        marker = next((m for m in markers if m and trimmed.endswith(m)), None)
        if marker is None:
            return text
        text = trimmed[: len(trimmed) - len(marker)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\n", "</s>", "<|im_end|>", "<|endoftext|>", "s>", "<|im"]), max_size=30))
def test_stripping_end_markers_follows_its_definition(pieces):
    markers = ["</s>", "<|im_end|>", "<|endoftext|>"]
    text = "".join(pieces)
    assert strip_end_markers(text, markers) == _strip_end_markers_by_definition(text, markers)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tail", ["<|endoftext|>", "<|im_end|>\n", "</s>" + " \n\t" * MiB],
                         ids=["markers", "markers+space", "marker+space"])
def test_a_response_of_millions_of_end_markers_is_stripped_in_linear_time(tail):
    """A 24 MiB body of end markers: each marker removed used to copy the rest of the text (hours); now one pass."""
    text = " we have a" + tail * (24 * MiB // len(tail))
    assert strip_end_markers(text, DEFAULT_END_MARKERS) == " we have a"


@pytest.mark.parametrize("marker", ["<｜end▁of▁sentence｜>", "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "</s>",
                                    "<end_of_turn>", "<|end|>", "<|eot|>", "<|return|>"])
def test_the_end_markers_of_common_policies_are_stripped_by_default(marker):
    """DeepSeek-R1's, Llama 3 / 4's, ChatML's, Mistral's, Gemma's, Phi-3's, gpt-oss's: the server strips them itself
    (the reranker here reads text as it is), so the reward is the clean response's."""
    assert marker in DEFAULT_END_MARKERS
    reranker = AresReranker(FunctionBackbone(hashed, name="hashed"), step_separator="\n\n", chat_layout="none")
    prompt, response = "We have a.", " so a\n\nthen b"
    expected = AresReward(reranker, unscorable_value=0.0)([prompt], [response])
    with RewardServer(reranker, ServeConfig(port=0)) as server:
        status, _, answer = post(server, {"query": [prompt + response + marker + "\n"], "prompts": [prompt]})
    assert status == 200 and answer["rewards"] == expected and answer["extra_logs"]["ares_scored"] == [1.0]


# -- bad requests -------------------------------------------------------------------------------------------------
BAD = [
    ("POST", "/get_reward", b"not json", 400, ["not JSON", '"query"']),
    ("POST", "/get_reward", b'{"query": ["\xff"], "prompts": [""]}', 400, ["not JSON", "UTF-8"]),
    ("POST", "/get_reward", b"[" * 100_000, 400, ["not JSON"]),
    ("POST", "/get_reward", b"[1, 2]", 400, ["JSON array, not an object", "query"]),
    ("POST", "/get_reward", {"prompts": ["a"]}, 400, ["'query' is missing"]),
    ("POST", "/get_reward", {"query": "ab", "prompts": "a"}, 400, ["'query' is a string", "list"]),
    ("POST", "/get_reward", {"query": [1], "prompts": ["a"]}, 400, ["'query[0]' is a JSON number", "text"]),
    ("POST", "/get_reward", {"query": ["ab"]}, 400, ["'prompts' is missing", "one per query"]),
    ("POST", "/get_reward", {"query": ["ab"], "prompts": ["a", "b"]}, 400, ["'prompts' has 2 entries for 1 queries"]),
    ("POST", "/get_reward", {"query": ["hello world"], "prompts": ["help"]}, 400,
     ["query[0] (11 characters, starting 'hello world') does not start with prompts[0]", "ending 'help'",
      "nor with any ending of it", "send the prompt the query was built from"]),
    ("POST", "/get_reward", {"query": ["ab"], "prompts": ["a"], "labels": [1, 2]}, 400, ["'labels' is 2 entries"]),
    ("POST", "/get_reward", {"query": ["a"] * 6, "prompts": ["a"] * 6}, 413, ["6 entries", "--max-items", "split"]),
    ("GET", "/get_reward", None, 405, ["use POST /get_reward"]),
    ("PUT", "/get_reward", {"query": []}, 405, ["use POST /get_reward"]),
    ("POST", "/health", {}, 405, ["use GET /health"]),
    ("GET", "/nope", None, 404, ["'/nope'", "/get_reward"]),
]


@pytest.mark.parametrize("method, path, body, status, needles", BAD)
def test_bad_requests_get_a_json_error_naming_the_problem_and_the_server_keeps_running(method, path, body, status,
                                                                                       needles):
    with RewardServer(make_reranker(), ServeConfig(port=0, max_items=5)) as server:
        got, headers, answer = post(server, body, path, method)
        assert got == status, answer
        assert set(answer) == {"error"} and "Traceback" not in answer["error"]
        for needle in needles:
            assert needle in answer["error"]
        if status == 405:
            assert headers["Allow"] in ("GET", "POST")
        good = post(server, {"query": ["p so a"], "prompts": ["p"]})
        assert good[0] == 200 and len(good[2]["rewards"]) == 1


@pytest.mark.parametrize("head, status, needle", [
    (b"POST /get_reward HTTP/1.1\r\nHost: x\r\n\r\n", 411, "Content-Length"),
    (b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", 400, "not a byte count"),
    (b"POST /get_reward HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "chunked"),
    (b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000\r\n\r\n", 413, "--max-body-bytes"),
    (b"POST /get_reward HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000000000000\r\n\r\n", 413,
     "--max-body-bytes"),
    (b"BREW /get_reward HTTP/1.1\r\nHost: x\r\n\r\n", 501, "BREW"),
    (b"GET /health HTTP/1.1\r\n" + b"X-Pad: y\r\n" * 200 + b"\r\n", 431, "headers"),
])
def test_malformed_http_is_answered_in_json_before_any_body_is_read(head, status, needle):
    with RewardServer(make_reranker(), ServeConfig(port=0, max_body_bytes=MiB)) as server:
        with socket.create_connection((server.host, server.port), timeout=GUARD) as sock:
            sock.sendall(head)  # no body follows: a server that waited for it would hit the hang guard
            got, _, answer = raw_response(sock)
        assert got == status and needle.lower() in answer["error"].lower(), answer
        assert health(server)["status"] == "ok"


def test_an_endless_chunked_body_is_read_only_up_to_the_limit_and_memory_stays_bounded():
    cap = 256 * MiB  # the client gives up here: a server that kept reading would let it get this far
    chunk = b"%x\r\n" % (64 * 1024) + b" " * (64 * 1024) + b"\r\n"
    with RewardServer(make_reranker(), ServeConfig(port=0, max_body_bytes=MiB)) as server:
        sock = socket.create_connection((server.host, server.port), timeout=GUARD)
        sent, ended = [0], []

        def pour() -> None:
            try:
                sock.sendall(b"POST /get_reward HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                while sent[0] < cap:
                    sock.sendall(chunk)
                    sent[0] += len(chunk)
                ended.append("cap")
            except OSError as err:
                ended.append(err)

        tracemalloc.start()
        try:
            writer = threading.Thread(target=pour)
            writer.start()
            status, _, answer = raw_response(sock)
            writer.join(GUARD)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            sock.close()
        assert status == 413 and "--max-body-bytes" in answer["error"]
        assert ended and ended[0] != "cap", "the server kept reading past the limit"
        assert peak < 4 * MiB, f"reading a body capped at 1 MiB allocated {peak / MiB:.1f} MiB at peak"
        assert health(server)["status"] == "ok"


def test_a_slow_client_gets_408_and_its_connection_is_closed():
    with RewardServer(make_reranker(), ServeConfig(port=0, read_timeout=0.3)) as server:
        with socket.create_connection((server.host, server.port), timeout=GUARD) as sock:
            sock.sendall(b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"query\"")
            status, headers, answer = raw_response(sock)
        assert status == 408 and "--read-timeout" in answer["error"] and headers["Connection"] == "close"
        with socket.create_connection((server.host, server.port), timeout=GUARD) as idle:
            assert idle.recv(1) == b""  # an idle connection is closed after read_timeout too
        assert health(server)["status"] == "ok"


class Trickler(threading.Thread):
    """A client sending ``data`` one byte per ``pause`` seconds (each byte well within the server's read timeout),
    until the server answers or closes; ``sent`` bytes went out, ``answer`` is what came back (b"" for a close)."""

    def __init__(self, server, data: bytes, pause: float) -> None:
        super().__init__(daemon=True)
        self.sock = socket.create_connection((server.host, server.port), timeout=GUARD)
        self.data, self.pause, self.sent, self.answer = data, pause, 0, None
        self.started_sending = threading.Event()

    def run(self) -> None:
        try:
            for byte in self.data:
                self.sock.sendall(bytes([byte]))
                self.sent += 1
                self.started_sending.set()
                readable, _, _ = select.select([self.sock], [], [], self.pause)
                if readable:
                    self.answer = self.sock.recv(65536)
                    return
        except OSError:
            self.answer = b""  # the server reset the connection
        finally:
            self.started_sending.set()
            self.sock.close()


SLOW_HEAD = b"POST /get_reward HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: trickle\r\n" * 40


@pytest.mark.timeout(120)
@pytest.mark.parametrize("data", [SLOW_HEAD[:30] + b"/" * 300, SLOW_HEAD], ids=["request line", "headers"])
def test_a_request_line_or_headers_trickled_byte_by_byte_are_cut_at_the_read_deadline(data):
    """Each byte arrives well within read_timeout, but the head as a whole may take read_timeout, not one per byte:
    the connection is answered 408 (or closed) long before the client has sent it all."""
    with RewardServer(make_reranker(), ServeConfig(port=0, read_timeout=0.5)) as server:
        trickler = Trickler(server, data, pause=0.1)
        trickler.start()
        trickler.join(GUARD * 2)
        assert trickler.answer is not None, "hang guard: the server kept reading the trickled head"
        assert trickler.sent < len(data) // 2, f"the server read {trickler.sent} of {len(data)} trickled bytes"
        assert trickler.answer == b"" or trickler.answer.startswith(b"HTTP/1.1 408"), trickler.answer[:200]
        wait_for(lambda: server.health()["connections"] == 0, "the trickler's slot freed")


@pytest.mark.timeout(180)
def test_twenty_trickling_clients_keep_a_normal_client_from_its_reward_at_most_the_read_deadline():
    """All --max-connections slots taken by tricklers: the normal client, retrying on 503 as OpenRLHF does, gets its
    reward once their read deadline frees slots (it would wait for ever if a trickle kept a slot)."""
    with RewardServer(make_reranker(), ServeConfig(port=0, max_connections=20, read_timeout=2.0)) as server:
        tricklers = [Trickler(server, SLOW_HEAD * 4, pause=0.2) for _ in range(20)]
        for trickler in tricklers:
            trickler.start()
        for trickler in tricklers:
            assert trickler.started_sending.wait(GUARD)
        wait_for(lambda: server.health()["connections"] == 20, "every slot taken by a trickler")
        refused, got = 0, None
        for _ in range(150):  # 30 s of retries; the tricklers trickle for 110 s
            try:
                status, _, answer = post(server, {"query": ["p so a"], "prompts": ["p"]})
            except OSError:
                status = None
            if status == 200:
                got = answer
                break
            refused += 1
            threading.Event().wait(0.2)
        assert got is not None and len(got["rewards"]) == 1, "the tricklers kept the normal client out"
        assert refused >= 1  # the slots were taken when it first tried
        for trickler in tricklers:
            trickler.join(GUARD)
            assert trickler.answer is not None and trickler.sent < len(trickler.data)


@pytest.mark.timeout(120)
def test_stop_closes_idle_and_trickling_connections_at_once():
    """SIGTERM's stop() answers the requests in flight but does not wait for tricklers or idle kept-alive clients:
    with a 60 s read timeout it returns while they are still trickling."""
    server = RewardServer(make_reranker(), ServeConfig(port=0, read_timeout=60.0)).start()
    idle = socket.create_connection((server.host, server.port), timeout=GUARD)
    line = Trickler(server, SLOW_HEAD[:30] + b"/" * 2000, pause=0.05)
    headers = Trickler(server, SLOW_HEAD * 20, pause=0.05)
    body = Trickler(server, b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + b" " * 5000,
                    pause=0.05)
    for trickler in (line, headers, body):
        trickler.start()
    wait_for(lambda: body.sent > 80 and line.sent > 40 and headers.sent > 40, "the tricklers under way")
    stopper = threading.Thread(target=server.stop, daemon=True)
    stopper.start()
    stopper.join(GUARD)
    assert not stopper.is_alive(), "stop() waited on trickling connections"
    for trickler in (line, headers, body):
        trickler.join(GUARD)
        assert trickler.answer is not None and trickler.sent < len(trickler.data), trickler.sent
    assert idle.recv(1) == b""
    idle.close()


def test_connections_past_max_connections_get_503_and_are_served_once_one_closes():
    with RewardServer(make_reranker(), ServeConfig(port=0, max_connections=2)) as server:
        held = [socket.create_connection((server.host, server.port), timeout=GUARD) for _ in range(2)]
        wait_for(lambda: server.health()["connections"] == 2, "two connections held")
        with socket.create_connection((server.host, server.port), timeout=GUARD) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            status, headers, answer = raw_response(sock)
        assert status == 503 and headers["Retry-After"] == "1" and "--max-connections" in answer["error"]
        held.pop().close()
        wait_for(lambda: server.health()["connections"] < 2, "a connection released")
        assert post(server, {"query": ["p so a"], "prompts": ["p"]})[0] == 200
        for sock in held:
            sock.close()


def test_settings_are_checked_before_the_backbone_loads(capsys):
    assert main(["serve", "--backbone", "no-such-backbone", "--max-items", "10", "--max-queue", "5"]) == 2
    err = capsys.readouterr().err
    assert "--max-items" in err and "--max-queue" in err and "Traceback" not in err
    assert main(["serve", "--backbone", "claimtrees-oracle", "--unscorable-value", "nan"]) == 2
    assert "--unscorable-value" in capsys.readouterr().err
    with RewardServer(make_reranker(), ServeConfig(port=0)) as server:
        with pytest.raises(ValueError, match=f"cannot listen on 127.0.0.1:{server.port}.*--port"):
            RewardServer(make_reranker(), ServeConfig(port=server.port))


# -- a query that does not start with its prompt -------------------------------------------------------------------
PROMPT_TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs"), exclude_characters="#\ufffd"),
                      min_size=1, max_size=60)
RESPONSE_TEXT = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs", "Cc")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(prompt=PROMPT_TEXT, response=RESPONSE_TEXT, cut=st.integers(0, 60), junk=st.integers(0, 3))
def test_a_left_cut_prompt_is_found_by_its_longest_ending(prompt, response, cut, junk):
    """Whatever the cut: the query is the prompt's end (after up to 3 U+FFFD, what a cut character decodes to),
    then the response; the response comes back whole. It starts with a mark no prompt holds, so the prompt's longest
    ending in the query is where the prompt really ends."""
    prompt = prompt + "?"
    cut = min(cut, len(prompt) - 1)  # at least the prompt's last character survives
    response = "#" + response
    got = split_query("\ufffd" * junk + prompt[cut:] + response, prompt)
    assert got is not None and got[0] == response
    assert got[1] is None if junk == cut == 0 else got[1] == len("".join(prompt[cut:].split()))


def _longest_ending_by_brute_force(prompt: str, query: str) -> int:
    return max(k for k in range(min(len(prompt), len(query)) + 1) if k == 0 or prompt[-k:] == query[:k])


@settings(max_examples=500, deadline=None)
@given(prompt=st.text("ab", min_size=1, max_size=40), query=st.text("ab", max_size=40))
def test_the_match_is_the_longest_ending_of_the_prompt_the_query_starts_with(prompt, query):
    """On text that repeats itself (two letters), against every ending tried in turn."""
    got = split_query(query, prompt)
    if query.startswith(prompt):
        assert got == (query[len(prompt):], None)
        return
    size = _longest_ending_by_brute_force(prompt, query)
    assert got == (None if size == 0 else (query[size:], size))


def test_a_prompt_that_repeats_itself_is_matched_right():
    """The anchor the search starts from occurs at every position here; past its budget of compared characters the
    search goes linear (the answer is what matters; no time is asserted)."""
    prompt = "ab" * 3000 + "abX" + "ab" * 50
    assert split_query("ab" * 60 + "Y", prompt) == ("ab" * 10 + "Y", 100)
    assert split_query("a" * 20_000 + "b", "a" * 20_000 + "c") is None


def test_how_a_query_is_matched_to_its_prompt():
    assert split_query("Q: 2+2?\nA: 4", "Q: 2+2?\n") == ("A: 4", None)  # the usual case
    assert split_query("2+2?\nA: 4", "Q: 2+2?\n") == ("A: 4", 4)  # cut, with the prompt's trailing newline
    assert split_query("Is it x, y's ?A", "Is it x , y 's ?") == ("A", 10)  # a decoder's cleaned-up spaces
    assert split_query("\ufffd\ufffd界 hi\nsay", "你好世界 hi\n") == ("say", 3)  # cut inside a character
    assert split_query("abc", "  ") == ("abc", 0)  # a blank prompt: the whole query
    assert split_query("hello world", "help") is None  # nothing of the prompt: unusable


def test_a_left_truncated_query_is_scored_against_its_whole_prompt_and_logged(caplog):
    prompt = "We have a.\nWe have b.\nQuestion: what do we have?\n"
    response = "so a\n\nthen b"
    expected = AresReward(make_reranker(), unscorable_value=0.0)([prompt] * 2, [response, response])
    with RewardServer(make_reranker(), ServeConfig(port=0)) as server:
        with caplog.at_level(logging.WARNING, logger="ares_rerank.rewards.server"):
            status, _, answer = post(server, {"query": [prompt + response, prompt[12:] + response],
                                              "prompts": [prompt, prompt]})
    assert status == 200 and answer["rewards"] == expected
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and "query[1]" in lines[0] and "does not start with its prompt" in lines[0]
    assert "last 29 of 38 characters" in lines[0] and "scored against the whole prompt" in lines[0]


# -- refusals are logged ------------------------------------------------------------------------------------------
def test_every_refusal_is_logged_with_its_reason_at_most_once_per_interval(caplog):
    with caplog.at_level(logging.WARNING, logger="ares_rerank.rewards.server"):
        with RewardServer(make_reranker(), ServeConfig(port=0, max_items=2, log_interval=3600)) as server:
            for _ in range(5):
                assert post(server, b"not json")[0] == 400
            assert post(server, {"query": ["a"] * 3, "prompts": ["a"] * 3})[0] == 413
            assert post(server, None, "/nope", "GET")[0] == 404
        lines = [r.getMessage() for r in caplog.records if r.name == "ares_rerank.rewards.server"]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "ares_rerank.rewards.server")
    refused = [line for line in lines if line.startswith("ares-rerank serve: refused")]
    assert len(refused) == 3  # one per reason
    assert "POST /get_reward from 127.0.0.1 with 400: the body is not JSON" in refused[0]
    assert "with 413: 'query' has 3 entries" in refused[1] and "--max-items" in refused[1]
    assert "GET /nope from 127.0.0.1 with 404: no such path" in refused[2]
    assert lines[-1] == "4 more of: 400 body not JSON (since the last line about it)."  # counted at the stop


def test_with_no_interval_every_refusal_gets_its_line(caplog):
    with caplog.at_level(logging.WARNING, logger="ares_rerank.rewards.server"):
        with RewardServer(make_reranker(), ServeConfig(port=0, log_interval=0)) as server:
            for _ in range(3):
                post(server, b"not json")
    assert sum("refused POST /get_reward" in r.getMessage() for r in caplog.records) == 3


# -- listening while the backbone loads ---------------------------------------------------------------------------
class Loader:
    """A reranker factory that blocks until ``release()`` (or raises ``error`` then)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.started, self.open, self.error = threading.Event(), threading.Event(), error

    def __call__(self) -> AresReranker:
        self.started.set()
        assert self.open.wait(GUARD), "the test never let the reranker load"
        if self.error is not None:
            raise self.error
        return make_reranker()

    def release(self) -> None:
        self.open.set()


def test_requests_sent_while_the_backbone_loads_are_held_and_answered_once_it_is_ready():
    loader = Loader()
    body = {"query": ["p so a", "p so a\n\nthen b"], "prompts": ["p", "p"]}
    expected = AresReward(make_reranker(), unscorable_value=0.0)(["p", "p"], [" so a", " so a\n\nthen b"])
    results: dict = {}
    server = RewardServer(loader, ServeConfig(port=0))
    try:
        assert server.status == "loading" and server.reranker is None
        server.start()
        assert loader.started.wait(GUARD)
        threads = [threading.Thread(target=lambda i=i: results.setdefault(i, post(server, body))) for i in range(3)]
        for thread in threads:
            thread.start()
        wait_for(lambda: health(server)["in_flight"] == 4, "three requests held")  # and this one
        answer = health(server)
        assert answer["status"] == "loading" and answer["load_seconds"] is None and answer["answered"] == 0
        assert post(server, b"not json")[0] == 400  # a bad request is still answered at once
        assert not server.wait_ready(0.01)
        loader.release()
        assert server.wait_ready(GUARD)
        for thread in threads:
            thread.join(GUARD)
        assert [results[i][0] for i in range(3)] == [200] * 3
        assert all(results[i][2]["rewards"] == expected for i in range(3))
        answer = health(server)
        assert answer["status"] == "ok" and answer["load_seconds"] >= 0 and answer["answered"] == 3
    finally:
        loader.release()
        server.stop()


def test_a_backbone_that_fails_to_load_answers_the_held_requests_503_naming_the_error():
    loader = Loader(ValueError("no such backbone 'nope'"))
    results: dict = {}
    with RewardServer(loader, ServeConfig(port=0)) as server:
        thread = threading.Thread(target=lambda: results.setdefault(0, post(server, {"query": ["p a"],
                                                                                      "prompts": ["p"]})))
        thread.start()
        wait_for(lambda: health(server)["in_flight"] == 2, "the request held")
        loader.release()
        thread.join(GUARD)
        assert not server.wait_ready(GUARD)
        answer = health(server)
        assert answer["status"] == "failed" and "no such backbone 'nope'" in answer["error"]
        assert isinstance(server.load_error, ValueError)
    status, headers, answer = results[0]
    assert status == 503 and headers["Retry-After"] == "1"
    assert "could not load its backbone (ValueError: no such backbone 'nope')" in answer["error"]


def test_stopping_while_the_backbone_loads_answers_the_held_requests_503():
    loader = Loader()
    results: dict = {}
    server = RewardServer(loader, ServeConfig(port=0)).start()
    try:
        thread = threading.Thread(target=lambda: results.setdefault(0, post(server, {"query": ["p a"],
                                                                                      "prompts": ["p"]})))
        thread.start()
        wait_for(lambda: health(server)["in_flight"] == 2, "the request held")
        server.stop()
        thread.join(GUARD)
    finally:
        loader.release()
    assert results[0][0] == 503 and "shutting down" in results[0][2]["error"]
    assert server.status == "draining"


def test_a_reranker_or_a_function_that_builds_one():
    with pytest.raises(TypeError, match="an AresReranker or a function that builds one, got str"):
        RewardServer("claimtrees-oracle", ServeConfig(port=0))


# -- the command, stopped by a signal under load ------------------------------------------------------------------
CHAIN_PROMPT = ("I have A\nRule: A -> B (meaning that if I have A, I can derive B)\n"
                "Rule: B -> C (meaning that if I have B, I can derive C)")
CHAIN = ("I have A, I use rule (A -> B) to derive B, now I have B\n\n"
         "I have B, I use rule (B -> C) to derive C, now I have C")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_under_load_answers_every_request_in_flight_then_exits_0(signum):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)]),
           "ARES_TEST_SLEEP": "0.2"}
    argv = [sys.executable, "-m", "ares_rerank.cli", "serve", "--backbone", "slow_backbone:SlowOracle", "--port", "0",
            "--prompt-split", "lines", "--max-batch", "2", "--max-wait-ms", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()  # the first line says where it listens
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        server = type("Address", (), {"host": "127.0.0.1", "port": int(match.group(1))})()
        wait_for(lambda: health(server)["status"] == "ok", "the backbone loaded")  # requests held before are 503'd
        clients, results = 8, {}
        queries = [CHAIN_PROMPT + "\n" + CHAIN, CHAIN_PROMPT + "\n" + CHAIN.split("\n\n")[1], CHAIN_PROMPT]
        body = {"query": queries, "prompts": [CHAIN_PROMPT] * 3}

        def send(i: int) -> None:
            try:
                results[i] = post(server, body)
            except OSError as err:
                results[i] = err

        threads = [threading.Thread(target=send, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        wait_for(lambda: health(server)["in_flight"] >= clients + 1, "every request in flight")  # + this one
        proc.send_signal(signum)
        for thread in threads:
            thread.join(GUARD * 2)
        code = proc.wait(GUARD * 2)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reranker = AresReranker(ClaimTreesOracle(), prompt_split="lines")
    responses = ["\n" + CHAIN, "\n" + CHAIN.split("\n\n")[1], ""]
    expected = AresReward(reranker, unscorable_value=0.0)([CHAIN_PROMPT] * 3, responses)
    assert expected[0] == 1.0 and expected[1] == 0.0  # a sound chain, and one that skips a step
    assert code == 0, err
    assert sorted(results) == list(range(clients))
    for i in range(clients):
        assert not isinstance(results[i], Exception), (results[i], err)
        status, _, answer = results[i]
        assert status == 200 and answer["rewards"] == expected, answer
    assert f"stopped after answering {clients} requests" in err and "Traceback" not in err
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection((server.host, server.port), timeout=GUARD).close()


# -- the command listens before its backbone loads ----------------------------------------------------------------
@pytest.mark.timeout(180)
def test_the_command_listens_at_once_and_holds_requests_until_the_backbone_has_loaded(tmp_path):
    gate = tmp_path / "gate"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)]),
           "ARES_TEST_LOAD_GATE": str(gate)}
    argv = [sys.executable, "-m", "ares_rerank.cli", "serve", "--backbone", "slow_backbone:GatedOracle", "--port",
            "0", "--prompt-split", "lines"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        assert match and "loading the backbone" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        server = type("Address", (), {"host": "127.0.0.1", "port": int(match.group(1))})()
        assert health(server)["status"] == "loading"  # the gate is closed: the backbone cannot have loaded
        body = {"query": [CHAIN_PROMPT + "\n" + CHAIN], "prompts": [CHAIN_PROMPT]}
        results: dict = {}
        thread = threading.Thread(target=lambda: results.setdefault(0, post(server, body)))
        thread.start()
        wait_for(lambda: health(server)["in_flight"] >= 2, "the request held")
        gate.write_text("open")
        thread.join(GUARD)
        assert health(server)["status"] == "ok"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(GUARD)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    status, _, answer = results[0]
    assert status == 200 and answer["rewards"] == [1.0], answer
    assert code == 0 and "ares-rerank serve: ready (the backbone loaded in" in err and "ClaimTreesOracle()" in err


def test_a_backbone_that_cannot_load_ends_the_command_with_its_error(capsys):
    assert main(["serve", "--backbone", "no-such-backbone", "--port", "0"]) == 2
    captured = capsys.readouterr()
    assert "listening on http://127.0.0.1:" in captured.out
    assert "ares-rerank serve: error:" in captured.err and "no-such-backbone" in captured.err
    assert "Traceback" not in captured.err
