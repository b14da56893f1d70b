"""A small JSON-over-HTTP client for served backbones: deadlines, retries with backoff, bounded concurrency.

Used by :class:`~ares_rerank.backbones.openai_judge.OpenAIJudge` (OpenAI-compatible ``/v1/completions`` and
``/v1/chat/completions``) and :class:`~ares_rerank.backbones.vllm_pooling.VLLMPoolingPRM` (vLLM's ``/pooling``).
Standard library only (``http.client``), so no HTTP package is a dependency.

Failure policy, per request:

- **retried** (up to ``max_retries`` times, sleeping ``backoff * 2**attempt`` seconds with jitter, at most
  ``max_backoff``, or the server's ``Retry-After`` when it sends one): connection refused / reset / closed, no
  complete answer within ``timeout`` seconds, HTTP 408, 429, 500, 502, 503, 504;
- **raised at once**: any other HTTP status (e.g. 400 for a prompt longer than the model's context, 404 for a
  wrong path or model name) and a 200 answer whose body is not JSON;
- every failure ends as a :class:`ServerError` naming the URL, what happened, how many attempts were made and what
  to do. ``timeout`` bounds each attempt as a whole (connect + send + wait + read), so a dead or stalled server
  can never hang a caller: the worst case is ``(max_retries + 1) * timeout`` plus the backoff sleeps.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar
from urllib.parse import urlsplit


__all__ = ["RETRY_STATUSES", "JsonClient", "ServerError", "ServerResponseError", "map_bounded"]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_TRANSIENT = (ConnectionError, TimeoutError, socket.timeout, http.client.HTTPException, OSError)
T = TypeVar("T")
R = TypeVar("R")


class ServerError(RuntimeError):
    """A served backbone could not get a usable answer: unreachable, too slow, an HTTP error, or not JSON.

    Attributes:
        url: The URL requested.
        status: The last HTTP status received, or ``None`` when no answer came.
        attempts: How many attempts were made.
    """

    def __init__(self, message: str, url: str = "", status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.attempts = attempts


class ServerResponseError(ServerError):
    """The server answered with valid JSON that lacks what the backbone needs (no logprobs, wrong row count, ...)."""


def _check_positive(value: Any, name: str, example: str, integer: bool = False, zero_ok: bool = False) -> None:
    kinds = (int,) if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and (value >= 0 if zero_ok else value > 0)
    if not ok:
        need = "a non-negative" if zero_ok else "a positive"
        kind = "integer" if integer else "number"
        raise ValueError(f"{name}={value!r} must be {need} {kind}, e.g. {name}={example}.")


class JsonClient:
    """POST / GET JSON to one server with per-attempt deadlines and retries.

    Args:
        base_url: The server root, e.g. ``"http://127.0.0.1:8000"``. A trailing ``/v1`` is accepted and removed
            (OpenAI clients spell the base URL with it; vLLM's ``/pooling`` and ``/tokenize`` live at the root).
        timeout: Seconds one attempt may take in total (connect, send, wait for and read the answer).
        max_retries: Extra attempts after a transient failure (0 = try once).
        backoff: First retry delay in seconds; doubles per attempt (with jitter), capped at ``max_backoff``.
        max_backoff: The longest sleep between attempts.
        api_key: Sent as ``Authorization: Bearer <api_key>``; default: the ``OPENAI_API_KEY`` environment variable
            (if set). vLLM checks it only when started with ``--api-key``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        api_key: str | None = None,
    ) -> None:
        if not isinstance(base_url, str):
            raise TypeError(
                f"base_url must be a string such as 'http://127.0.0.1:8000', got {type(base_url).__name__}."
            )
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"base_url={base_url!r} is not an http(s) URL: pass the server root, e.g. 'http://127.0.0.1:8000' "
                "(or 'http://127.0.0.1:8000/v1')."
            )
        _check_positive(timeout, "timeout", "60")
        _check_positive(max_retries, "max_retries", "3", integer=True, zero_ok=True)
        _check_positive(backoff, "backoff", "0.5", zero_ok=True)
        _check_positive(max_backoff, "max_backoff", "8", zero_ok=True)
        path = parts.path.rstrip("/")
        self.prefix = path[: -len("/v1")] if path.endswith("/v1") else path
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.root = f"{parts.scheme}://{parts.netloc}{self.prefix}"
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"

    def post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``path`` (e.g. ``"/v1/completions"``); return the decoded JSON answer."""
        return self._call("POST", path, json.dumps(payload).encode("utf-8"))

    def get(self, path: str) -> Any:
        """GET ``path``; return the decoded JSON answer."""
        return self._call("GET", path, None)

    # -- one request, with retries --------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: bytes | None) -> Any:
        url = self.root + path
        last: str = ""
        status: int | None = None
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                status, headers, data = self._once(method, self.prefix + path, body)
            except _TRANSIENT as err:
                status = None
                last = _describe(err, self.timeout)
            else:
                if status < 300:
                    return _decode(data, url, status, attempt + 1)
                last = f"HTTP {status}: {_error_message(data)}"
                if status not in RETRY_STATUSES:
                    raise ServerError(
                        f"{method} {url} was rejected with {last}. The request itself is wrong for this server (a "
                        "prompt longer than the model's context, a wrong model name or endpoint): fix it, do not "
                        "retry.", url, status, attempt + 1,
                    )
                retry_after = _retry_after(headers)
            if attempt < self.max_retries:
                time.sleep(self._delay(attempt, retry_after))
        attempts = self.max_retries + 1
        hint = (
            "Is the server running, and is base_url right? (docs/SCALING.md shows how to start one)" if status is None
            else "The server keeps failing: check its log"
        )
        raise ServerError(f"{method} {url} failed after {attempts} attempt(s), last: {last}. {hint}.", url, status,
                          attempts)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_backoff, retry_after)
        delay = min(self.max_backoff, self.backoff * 2**attempt)
        return delay * (0.5 + 0.5 * random.random())  # jitter: replicas restarted together are not hit in lockstep

    def _once(self, method: str, path: str, body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        """One attempt, bounded by ``timeout`` seconds in total (each blocking step gets the time that is left)."""
        deadline = time.monotonic() + self.timeout
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.connect()
            sock = conn.sock
            conn.request(method, path or "/", body=body, headers=self.headers)
            _settimeout(sock, deadline)
            response = conn.getresponse()
            chunks = []
            while True:
                _settimeout(sock, deadline)
                chunk = response.read1(1 << 16)  # at most one recv, so the deadline is checked between recvs
                if not chunk:
                    break
                chunks.append(chunk)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, b"".join(chunks)
        finally:
            conn.close()


def _settimeout(sock: socket.socket, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline reached")
    sock.settimeout(remaining)


def _describe(err: BaseException, timeout: float) -> str:
    if isinstance(err, (TimeoutError, socket.timeout)):
        return f"no complete answer within timeout={timeout:g} s (raise timeout= or lower concurrency=)"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused (nothing listens at that address)"
    return f"{type(err).__name__}: {err}"


def _decode(data: bytes, url: str, status: int, attempts: int) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        snippet = data[:200].decode("utf-8", "replace")
        raise ServerError(
            f"{url} answered HTTP {status} with a body that is not JSON ({err.__class__.__name__}: {err}); it begins "
            f"{snippet!r}. Is base_url pointing at an OpenAI-compatible / vLLM server (not a proxy's error page)?",
            url, status, attempts,
        ) from err


def _error_message(data: bytes) -> str:
    """The server's error text: OpenAI / vLLM ``{"error": {"message": ...}}``, older vLLM ``{"message": ...}``."""
    try:
        body = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return data[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key])[:500]
    return json.dumps(body)[:300]


def _retry_after(headers: dict[str, str]) -> float | None:
    try:
        return max(0.0, float(headers.get("retry-after", "")))
    except ValueError:
        return None  # absent, or an HTTP date: use our own backoff


def map_bounded(fn: Callable[[T], R], items: Sequence[T], concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` with at most ``concurrency`` calls in flight; results in input order.

    The first exception is raised (after the calls already running finish; queued ones are cancelled).
    """
    if len(items) <= 1 or concurrency == 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items))) as pool:
        futures = [pool.submit(fn, x) for x in items]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise
