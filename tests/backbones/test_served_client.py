"""The HTTP client of the served backbones against a scripted fake server on 127.0.0.1: what is retried, what is
raised, and that a dead or stalled server ends in a clear error instead of a hang (bounded by pytest-timeout)."""

from __future__ import annotations

import threading
import time

import pytest

from ares_rerank.backbones.served import JsonClient, ServerError, map_bounded
from fake_servers import FakeServer, Reply, free_port, load_fixture, scripted


OK = {"ok": True}


def client(url: str, **kwargs) -> JsonClient:
    return JsonClient(url, **{"timeout": 5.0, "max_retries": 2, "backoff": 0.01, **kwargs})


@pytest.mark.timeout(30)
def test_connection_refused_is_retried_then_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match="connection refused") as info:
        client(url).post("/v1/completions", {"prompt": "x"})
    err = info.value
    assert err.status is None and err.attempts == 3
    assert "Is the server running" in str(err) and url + "/v1/completions" in str(err)


@pytest.mark.timeout(30)
def test_500_is_retried_until_success():
    with FakeServer(scripted(Reply({"error": {"message": "boom"}}, status=500), Reply(status=503, body=b""),
                             Reply(OK))) as server:
        assert client(server.url).post("/v1/completions", {"prompt": "x"}) == OK
    assert len(server.requests) == 3
    assert all(payload == {"prompt": "x"} for _, _, payload in server.requests)


@pytest.mark.timeout(30)
def test_500_every_time_names_status_message_and_attempts():
    with FakeServer(scripted(Reply({"error": {"message": "CUDA out of memory"}}, status=500))) as server:
        with pytest.raises(ServerError, match="HTTP 500: CUDA out of memory") as info:
            client(server.url).post("/v1/completions", {})
    assert info.value.status == 500 and info.value.attempts == 3 and len(server.requests) == 3


@pytest.mark.timeout(30)
def test_400_is_not_retried_and_shows_the_servers_message():
    error = load_fixture("vllm_error_400.json")
    with FakeServer(scripted(Reply(error["response"], status=400))) as server:
        with pytest.raises(ServerError, match="maximum context length is 4096") as info:
            client(server.url).post("/pooling", {})
    assert info.value.status == 400 and len(server.requests) == 1
    assert "do not retry" in str(info.value)


@pytest.mark.timeout(30)
def test_malformed_json_is_a_clear_error_without_retry():
    with FakeServer(scripted(Reply(b"<html><body>502 Bad Gateway</body></html>"))) as server:
        with pytest.raises(ServerError, match="not JSON.*502 Bad Gateway"):
            client(server.url).post("/v1/completions", {})
    assert len(server.requests) == 1


@pytest.mark.timeout(30)
def test_slow_server_past_the_timeout_is_retried_then_a_timeout_error():
    with FakeServer(scripted(Reply(OK, delay=3.0))) as server:
        with pytest.raises(ServerError, match=r"no complete answer within timeout=0.3 s") as info:
            client(server.url, timeout=0.3, max_retries=1).post("/v1/completions", {})
    assert info.value.attempts == 2 and info.value.status is None
    assert len(server.requests) == 2


@pytest.mark.timeout(30)
def test_a_server_that_stalls_mid_answer_hits_the_same_deadline():
    # Headers arrive at once, then one byte every 0.2 s: every single read is fast, the whole answer is not.
    with FakeServer(scripted(Reply({"padding": "x" * 40}, drip=0.2))) as server:
        with pytest.raises(ServerError, match="timeout=0.5"):
            client(server.url, timeout=0.5, max_retries=0).get("/v1/models")


@pytest.mark.timeout(30)
def test_slow_once_then_fast_succeeds():
    with FakeServer(scripted(Reply(OK, delay=2.0), Reply(OK))) as server:
        assert client(server.url, timeout=0.5).post("/x", {}) == OK
    assert len(server.requests) == 2


@pytest.mark.timeout(30)
def test_retry_after_header_is_honoured_and_capped():
    with FakeServer(scripted(Reply({}, status=429, headers={"Retry-After": "0"}), Reply(OK))) as server:
        assert client(server.url, max_backoff=0.05).get("/v1/models") == OK
    assert len(server.requests) == 2


def test_base_url_forms_and_api_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    a = JsonClient("http://127.0.0.1:8000/v1/")
    assert (a.root, a.prefix, a.port) == ("http://127.0.0.1:8000", "", 8000)
    assert "Authorization" not in a.headers
    b = JsonClient("https://example.invalid/proxy/v1", api_key="sk-test")
    assert b.root == "https://example.invalid/proxy" and b.headers["Authorization"] == "Bearer sk-test"
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert JsonClient("http://127.0.0.1:1").headers["Authorization"] == "Bearer from-env"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "127.0.0.1:8000"}, "not an http"),
        ({"base_url": "http://127.0.0.1:8000", "timeout": 0}, "timeout=0 must be a positive"),
        ({"base_url": "http://127.0.0.1:8000", "max_retries": -1}, "max_retries=-1"),
        ({"base_url": "http://127.0.0.1:8000", "max_retries": 1.5}, "integer"),
    ],
)
def test_bad_client_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JsonClient(**kwargs)


def test_api_key_and_body_reach_the_server():
    with FakeServer(scripted(Reply(OK))) as server:
        client(server.url, api_key="k").post("/v1/completions", {"a": [1, 2]})
    assert server.requests == [("POST", "/v1/completions", {"a": [1, 2]})]
    assert server.request_headers[0]["Authorization"] == "Bearer k"


def test_a_query_string_in_base_url_is_sent_with_every_request_and_shown_nowhere(recwarn):
    """A query string in base_url (Azure's ?api-version=...) was dropped without a word."""
    with FakeServer(scripted(Reply(OK), Reply(OK))) as server:
        one = client(f"{server.url}/v1?api-version=2024-06-01&key=s3cret")
        one.post("/v1/completions", {"a": 1})
        one.get("/v1/models?limit=2")
    assert [path for _, path, _ in server.requests] == [
        "/v1/completions?api-version=2024-06-01&key=s3cret", "/v1/models?limit=2&api-version=2024-06-01&key=s3cret"]
    assert "s3cret" not in one.root + repr(one)  # the query may hold a key: never in errors or repr
    assert not recwarn.list
    with pytest.warns(UserWarning, match="the fragment '#part' is never sent to a server, so it is dropped"):
        JsonClient("http://127.0.0.1:8000/v1#part")


def test_map_bounded_keeps_order_and_bounds_concurrency():
    lock, state = threading.Lock(), {"now": 0, "peak": 0}

    def work(x: int) -> int:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.01)
        with lock:
            state["now"] -= 1
        return x * x

    assert map_bounded(work, list(range(20)), concurrency=3) == [x * x for x in range(20)]
    assert 1 <= state["peak"] <= 3


def test_map_bounded_raises_the_first_error():
    def work(x: int) -> int:
        if x == 5:
            raise ServerError("dead", "u")
        return x

    with pytest.raises(ServerError, match="dead"):
        map_bounded(work, list(range(10)), concurrency=4)


def test_refused_credentials_and_redirects_name_their_own_fix():
    with FakeServer(scripted(Reply({"error": {"message": "unauth"}}, status=401))) as server:
        with pytest.raises(ServerError, match=r"HTTP 401: unauth\. The server refused the credentials: pass api_key="):
            JsonClient(server.url, max_retries=3).post("/v1/completions", {})
    moved = Reply({}, status=307, headers={"Location": "http://user:secret@example.org/v1"})
    with FakeServer(scripted(moved)) as server:
        with pytest.raises(ServerError, match=r"redirects to 'http://\*\*\*@example\.org/v1' and redirects are not"):
            JsonClient(server.url, max_retries=3).post("/v1/completions", {})


def test_concurrency_is_bounded():
    from ares_rerank.backbones.openai_judge import OpenAIJudge
    from ares_rerank.backbones.served import MAX_CONCURRENCY

    with pytest.raises(ValueError, match=f"concurrency=1000000 must be at most {MAX_CONCURRENCY}"):
        OpenAIJudge("http://127.0.0.1:9/v1", model="m", answer_token_ids=None, concurrency=10**6)


@pytest.mark.timeout(60)
def test_a_server_that_trickles_its_headers_is_cut_off_at_the_deadline():
    """http.client reads headers under the per-recv socket timeout: one header a second ran 100 s past a 2-s limit."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    stop = threading.Event()

    def trickle() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                for i in range(200):
                    if stop.is_set():
                        break
                    conn.sendall(f"X-Slow-{i}: 1\r\n".encode())
                    time.sleep(0.2)
            except OSError:
                pass
            finally:
                conn.close()

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    try:
        start = time.monotonic()
        with pytest.raises(ServerError, match="within total_timeout=2|within timeout=1"):
            JsonClient(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=1.0, total_timeout=2.0,
                       max_retries=5, backoff=0.01).post("/v1/completions", {})
        assert time.monotonic() - start < 5.0
    finally:
        stop.set()
        server.join(timeout=5)
        listener.close()


def test_the_http_clients_names_still_import_from_backbones_served():
    """The client moved to ares_rerank.utils.http; its names import from the old module too, as the same objects,
    without a second list of them there."""
    import ares_rerank.backbones.served as served
    from ares_rerank.utils import http

    for name in http.__all__:
        assert getattr(served, name) is getattr(http, name), name
    assert not set(http.__all__) & set(served.__all__)  # listed once, in utils.http
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        served.no_such_name

