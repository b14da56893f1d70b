"""A tiny scripted HTTP server on 127.0.0.1 for the served-backbone tests (stdlib ``http.server``, no network).

``FakeServer(respond)`` calls ``respond(method, path, payload) -> Reply`` for every request and records it (and its
headers). Every sleep and stream is bounded (``Reply.delay``, ``Reply.drip`` and ``Reply.endless`` last a few seconds
at most), so a test never leaves a server thread running for long, and the server stops when the ``with`` block ends.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable


FIXTURES = Path(__file__).resolve().parent / "fixtures"
MAX_SLEEP = 5.0


def load_fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


@dataclass
class Reply:
    """What the fake answers: ``body`` (dict/list -> JSON, bytes as is), after ``delay`` seconds.

    ``drip`` > 0 sends the body one byte every ``drip`` seconds (a server that stalls mid-answer). ``cut_at`` sends
    only that many bytes of the body and closes the connection (with the full ``Content-Length``, unless
    ``send_length`` is false: then the body ends at the close, as HTTP/1.0 servers do). ``endless`` sends the body,
    then ``b" "`` padding until the client goes away (or ``MAX_SLEEP`` passes), without a ``Content-Length``.
    """

    body: Any = field(default_factory=dict)
    status: int = 200
    delay: float = 0.0
    drip: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    cut_at: int | None = None
    send_length: bool = True
    endless: bool = False


def free_port() -> int:
    """A port nothing listens on right now (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeServer:
    """Serve ``respond`` on 127.0.0.1 (an ephemeral port) in a background thread; use as a context manager."""

    def __init__(self, respond: Callable[[str, str, Any], Reply]) -> None:
        self.respond = respond
        self.requests: list[tuple[str, str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.bytes_sent = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                payload = json.loads(raw) if raw else None
                with server._lock:
                    server.requests.append((method, self.path, payload))
                    server.request_headers.append(dict(self.headers.items()))
                reply = server.respond(method, self.path, payload)
                time.sleep(min(reply.delay, MAX_SLEEP))
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    if reply.send_length and not reply.endless:
                        self.send_header("Content-Length", str(len(data)))
                    if reply.cut_at is not None or reply.endless or not reply.send_length:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if reply.endless:
                        self._stream(data)
                    elif reply.cut_at is not None:
                        self.wfile.write(data[: reply.cut_at])
                    elif reply.drip > 0:
                        stop = time.monotonic() + MAX_SLEEP
                        for i in range(len(data)):
                            if time.monotonic() > stop:
                                break
                            self.wfile.write(data[i : i + 1])
                            self.wfile.flush()
                            time.sleep(reply.drip)
                    else:
                        self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout and size-limit tests)

            def _stream(self, data: bytes) -> None:
                """``data``, then spaces in 64 KiB writes until the client hangs up or MAX_SLEEP passes."""
                pad, stop = b" " * (1 << 16), time.monotonic() + MAX_SLEEP
                self.wfile.write(data)
                server.bytes_sent += len(data)
                while time.monotonic() < stop:
                    self.wfile.write(pad)
                    server.bytes_sent += len(pad)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.requests]


def scripted(*replies: Reply) -> Callable[[str, str, Any], Reply]:
    """Answer with ``replies`` in order, then repeat the last one."""
    state = {"i": 0}
    lock = threading.Lock()

    def respond(method: str, path: str, payload: Any) -> Reply:
        with lock:
            i = min(state["i"], len(replies) - 1)
            state["i"] += 1
        return replies[i]

    return respond


def vllm_prompt_logprobs(model: Any, name: str = "prm", max_model_len: int = 2048,
                         calls: list | None = None) -> Callable[[str, str, Any], Reply]:
    """vLLM's ``/v1/completions`` with ``prompt_logprobs=0`` on a loaded causal LM (full-vocabulary log-softmax):
    ``choices[i].prompt_logprobs`` is ``null`` for the first token, then per position an object keyed by the token
    id (a string); ``/v1/models`` lists ``name`` with ``max_model_len``. ``calls`` records each request's prompt
    count. (torch is imported when a request comes: this module stays stdlib for the other tests.)"""

    def respond(method, path, payload):
        import torch

        if path == "/v1/models":
            return Reply({"object": "list", "data": [{"id": name, "object": "model", "max_model_len": max_model_len}]})
        if path != "/v1/completions" or payload.get("prompt_logprobs") != 0 or payload.get("max_tokens") != 1:
            return Reply({"error": {"message": f"bad request to {path}", "code": 400}}, status=400)
        if calls is not None:
            calls.append(len(payload["prompt"]))
        choices = []
        for i, ids in enumerate(payload["prompt"]):
            with torch.inference_mode():
                logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
            rows = [None] + [{str(t): {"logprob": logp[k - 1, t].item(), "rank": 1, "decoded_token": "x"}}
                             for k, t in enumerate(ids) if k > 0]
            choices.append({"index": i, "text": "x", "logprobs": None, "finish_reason": "length",
                            "prompt_logprobs": rows})
        return Reply({"id": "cmpl-1", "object": "text_completion", "model": name, "choices": choices[::-1]})

    return respond


def vllm_pooling(model: Any, row_token: int | None = None, layout: str = "token", output: str = "probs",
                 name: str = "prm", max_model_len: int = 4096,
                 calls: list | None = None) -> Callable[[str, str, Any], Reply]:
    """vLLM's ``/pooling`` (``task: "token_classify"``) on a loaded token classifier: per input, its rows (softmaxed
    with ``output="probs"``, raw logits with ``"logits"``), one per token or, with ``layout="tag"``, one per
    ``row_token`` (STEP pooling with ``step_tag_id``), in the PoolingResponse envelope of
    ``fixtures/vllm_pooling_per_token.json``, entries in reverse order (a client must sort them by index).
    ``/v1/models`` lists ``name`` with ``max_model_len``; ``calls`` records each request's input count."""
    envelope = load_fixture("vllm_pooling_per_token.json")["response"]

    def respond(method, path, payload):
        import torch

        if path == "/v1/models":
            return Reply({"object": "list", "data": [{"id": name, "object": "model", "max_model_len": max_model_len}]})
        if path != "/pooling" or payload.get("task") != "token_classify":
            return Reply({"error": {"message": f"bad request to {path}", "code": 400}}, status=400)
        entries = []
        for i, ids in enumerate(payload["input"]):
            with torch.inference_mode():
                logits = model(input_ids=torch.tensor([ids]))[0][0].float()  # (seq, labels): .logits or a tuple's
            rows = (torch.softmax(logits, -1) if output == "probs" else logits).tolist()
            if layout == "tag":
                rows = [row for row, t in zip(rows, ids) if t == row_token]
            entries.append({"index": i, "object": "pooling", "data": rows})
        if calls is not None:
            calls.append(len(entries))
        usage = {**envelope["usage"], "prompt_tokens": sum(map(len, payload["input"]))}
        return Reply({**envelope, "model": payload["model"], "data": entries[::-1], "usage": usage})

    return respond
