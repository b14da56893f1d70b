"""A small JSON-over-HTTP client: deadlines, retries with backoff, bounded answers and concurrency.

Used by the served backbones (:mod:`~ares_rerank.backbones.served`) and the verl reward functions' client of
``ares-rerank serve``: :class:`~ares_rerank.backbones.openai_judge.OpenAIJudge` (OpenAI-compatible
``/v1/completions`` and
``/v1/chat/completions``) and :class:`~ares_rerank.backbones.vllm_pooling.VLLMPoolingPRM` (vLLM's ``/pooling``).
Standard library only (``http.client``), so no HTTP package is a dependency.

About 590 lines: :class:`JsonClient` (deadlines, retries, bounded reads, credentials: about 235) and the redaction
every error, URL and ``repr`` it makes goes through (:func:`redact`, :func:`find_secrets`), kept in one module so
that no message leaves it unredacted; the commands use the same redaction on what they print.

Failure policy, per request:

- **retried** (up to ``max_retries`` times, sleeping ``backoff * 2**attempt`` seconds with jitter, at most
  ``max_backoff``, or the server's ``Retry-After`` when it sends one): connection refused / reset / closed, no
  complete answer within ``timeout`` seconds, a body cut off before its end (fewer bytes than its
  ``Content-Length``, a broken chunked encoding, or JSON that stops mid-way), HTTP 408, 429, 500, 502, 503, 504;
- **raised at once**: any other HTTP status (e.g. 400 for a prompt longer than the model's context, 404 for a
  wrong path or model name), a 200 answer whose body is not JSON, and an answer larger than ``max_response_bytes``;
- every failure ends as a :class:`ServerError` naming the URL, what happened, how many attempts were made and what
  to do. ``timeout`` bounds each attempt as a whole (connect + send + wait + read), and ``total_timeout`` bounds one
  request with all its attempts and sleeps, so a dead, stalled or endless server can never hang a caller.

Bounds (defaults): ``timeout`` 60 s per attempt, ``total_timeout`` 300 s per request (:data:`DEFAULT_TOTAL_TIMEOUT`),
``max_response_bytes`` 32 MiB per answer (:data:`DEFAULT_MAX_RESPONSE_BYTES`, read incrementally: a larger or endless
body is abandoned once the limit is passed, so memory stays bounded).

Errors (all ``RuntimeError``): :class:`ServerError` for no usable answer (unreachable, too slow, an HTTP error, not
JSON); its subclass :class:`ServerResponseError` for an answer that came but cannot be used (too large, JSON of the
wrong shape, a value that is not a finite number, a logprob above 0, a probability outside [0, 1]). The backbones
check every number before it leaves them, so no NaN / inf reaches a cache or a caller.

Credentials (:class:`JsonClient`): ``api_key="..."`` is sent as ``Authorization: Bearer`` to ``base_url``;
``api_key=""`` sends none. ``api_key=None`` (the default) takes ``OPENAI_API_KEY`` from the environment, but only for
an ``https`` URL or a loopback host (``localhost``, ``127.0.0.0/8``, ``::1``): an environment key is never sent in
clear text to another machine (a warning says it was held back). A ``user:password@`` in ``base_url`` is sent as HTTP
basic auth and removed from every URL the client shows (``root``, errors, ``repr``). Any credential sent over plain
``http`` to a non-loopback host gives an :class:`InsecureCredentialsWarning`.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import json
import math
import os
import random
import re
import socket
import threading
import time
import warnings
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from .checks import check_positive_int


__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TOTAL_TIMEOUT",
    "MAX_CONCURRENCY",
    "RETRY_STATUSES",
    "InsecureCredentialsWarning",
    "JsonClient",
    "ServerError",
    "ServerResponseError",
    "check_concurrency",
    "find_secrets",
    "is_outage",
    "is_secret_name",
    "redact",
]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: The most requests a served backbone keeps in flight (a thread and a socket each).
MAX_CONCURRENCY = 256
DEFAULT_MAX_RESPONSE_BYTES = 32 * 2**20  # 32 MiB: a /pooling answer for 16 inputs of 32k tokens (2 labels) is ~23 MB
DEFAULT_TOTAL_TIMEOUT = 300.0  # one request, every attempt and backoff sleep included
_TRANSIENT = (ConnectionError, TimeoutError, socket.timeout, http.client.HTTPException, OSError)


class ServerError(RuntimeError):
    """A served backbone could not get a usable answer: unreachable, too slow, an HTTP error, or not JSON.

    Attributes:
        url: The URL requested (never with a password in it).
        status: The last HTTP status received, or ``None`` when no answer came.
        attempts: How many attempts were made.
    """

    def __init__(self, message: str, url: str = "", status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.attempts = attempts


def check_concurrency(concurrency: Any, example: int) -> int:
    """``concurrency`` if it is an integer in [1, :data:`MAX_CONCURRENCY`], else a ValueError naming it."""
    check_positive_int(concurrency, "concurrency", example)
    if concurrency > MAX_CONCURRENCY:
        raise ValueError(f"concurrency={concurrency} must be at most {MAX_CONCURRENCY} (one thread and one socket "
                         f"each), e.g. {example}.")
    return concurrency


def is_outage(err: BaseException) -> bool:
    """Whether ``err`` says the server (or the network) failed rather than one request's content: no answer at all,
    a timeout, a retryable status (:data:`RETRY_STATUSES`, 5xx) or an OS-level connection error. Retrying such a
    batch one request at a time would only pay the timeout again for every request."""
    if isinstance(err, ServerResponseError):
        return False
    if isinstance(err, ServerError):
        return err.status is None or err.status in RETRY_STATUSES or err.status >= 500
    return isinstance(err, (ConnectionError, TimeoutError, socket.timeout))


class ServerResponseError(ServerError):
    """An answer came but cannot be used: larger than ``max_response_bytes``, JSON of the wrong shape (no logprobs,
    wrong row count, ...), or a value that is not a finite number / a valid logprob / a probability."""


class InsecureCredentialsWarning(UserWarning):
    """A credential goes (or, from the environment, was held back from going) over plain http to another machine."""


class _TooLarge(Exception):
    """Internal: ``(status, detail)``, the body passed ``max_response_bytes`` (a :class:`ServerResponseError` in
    :meth:`JsonClient._call`)."""


class _Incomplete(http.client.HTTPException):
    """Internal: the body was cut off before its end; retried like a dropped connection."""


def _check_positive(value: Any, name: str, example: str, integer: bool = False, zero_ok: bool = False) -> None:
    kinds = (int,) if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and (value >= 0 if zero_ok else value > 0)
    if not ok:  # NaN fails the comparison too
        need = "a non-negative" if zero_ok else "a positive"
        kind = "integer" if integer else "number"
        raise ValueError(f"{name}={value!r} must be {need} {kind}, e.g. {name}={example}.")


class JsonClient:
    """POST / GET JSON to one server with per-attempt and per-request deadlines, retries and a bounded answer size.

    Args:
        base_url: The server root, e.g. ``"http://127.0.0.1:8000"``. A trailing ``/v1`` is accepted and removed
            (OpenAI clients spell the base URL with it; vLLM's ``/pooling`` and ``/tokenize`` live at the root).
            ``http://user:password@host`` sends HTTP basic auth; the password never appears in ``root``, errors or
            ``repr``. A query string (``?api-version=2024-06-01``, as Azure's endpoints want) is sent with every
            request, and shown nowhere (it may hold a key); a ``#fragment`` is never sent (a warning names it).
        timeout: Seconds one attempt may take in total (connect, send, wait for and read the answer).
        max_retries: Extra attempts after a transient failure (0 = try once).
        backoff: First retry delay in seconds; doubles per attempt (with jitter), capped at ``max_backoff``.
        max_backoff: The longest sleep between attempts.
        api_key: Sent as ``Authorization: Bearer <api_key>``; ``""`` sends no key. ``None`` (default) takes the
            ``OPENAI_API_KEY`` environment variable, only for an https ``base_url`` or a loopback host (see the
            module doc). vLLM checks it only when started with ``--api-key``.
        total_timeout: Seconds one request may take with all its attempts and backoff sleeps (default 300).
        max_response_bytes: The largest answer body read, in bytes (default 32 MiB); a larger one is a
            :class:`ServerResponseError` (not retried).
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
        total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if not isinstance(base_url, str):
            raise TypeError(
                f"base_url must be a string such as 'http://127.0.0.1:8000', got {type(base_url).__name__}."
            )
        parts = urlsplit(base_url.strip())
        shown = redact(base_url.strip())
        try:
            port = parts.port
        except ValueError as err:  # a port that is not a number, or out of range
            raise ValueError(f"base_url={shown!r} has an invalid port ({err}): e.g. 'http://127.0.0.1:8000'.") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"base_url={shown!r} is not an http(s) URL: pass the server root, e.g. 'http://127.0.0.1:8000' "
                "(or 'http://127.0.0.1:8000/v1')."
            )
        _check_positive(timeout, "timeout", "60")
        _check_positive(max_retries, "max_retries", "3", integer=True, zero_ok=True)
        _check_positive(backoff, "backoff", "0.5", zero_ok=True)
        _check_positive(max_backoff, "max_backoff", "8", zero_ok=True)
        _check_positive(total_timeout, "total_timeout", "300")
        _check_positive(max_response_bytes, "max_response_bytes", str(DEFAULT_MAX_RESPONSE_BYTES), integer=True)
        if math.isinf(timeout):
            raise ValueError("timeout=inf would let a stalled server hang the caller: pass seconds, e.g. timeout=60.")
        path = parts.path.rstrip("/")
        self.prefix = path[: -len("/v1")] if path.endswith("/v1") else path
        self.query = parts.query  # kept for every request: it was dropped without a word
        if parts.fragment:
            warnings.warn(f"base_url={shown!r}: the fragment '#{parts.fragment}' is never sent to a server, so it is "
                          "dropped; put what the server needs in the path or the query string.", UserWarning,
                          stacklevel=3)
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, port
        self.root = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{self.prefix}"  # no user:password@
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.total_timeout = float(total_timeout)
        self.max_response_bytes = max_response_bytes
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        auth = self._authorization(parts, api_key)
        if auth:
            self.headers["Authorization"] = auth

    def _authorization(self, parts: SplitResult, api_key: str | None) -> str | None:
        """The ``Authorization`` header value, by the rule in the module doc (``None``: send none)."""
        if api_key is not None and (not isinstance(api_key, str) or _has_control(api_key)):
            raise TypeError("api_key must be a string without control characters (or None to read OPENAI_API_KEY).")
        local = _is_loopback(self.host)
        if parts.username is not None or parts.password is not None:
            if api_key:
                raise ValueError(
                    f"base_url={self.root!r} carries a user:password and api_key= is also given: pass one credential "
                    "(the password in the URL is sent as HTTP basic auth, api_key as a Bearer token)."
                )
            pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
            auth, source = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii"), "the password in base_url"
        elif api_key is not None:
            auth, source = (f"Bearer {api_key}" if api_key else None), "api_key"
        else:
            key = os.environ.get("OPENAI_API_KEY")
            if key and self.scheme == "http" and not local:
                warnings.warn(
                    f"OPENAI_API_KEY is set but NOT sent to {self.root}: an environment key goes only to https or "
                    "loopback servers. Pass api_key=... to send a key to this server anyway (in clear text), or "
                    "api_key='' to silence this warning.", InsecureCredentialsWarning, stacklevel=4,
                )
                return None
            if key and _has_control(key):
                raise TypeError("OPENAI_API_KEY contains control characters: fix it, or pass api_key= explicitly.")
            auth, source = (f"Bearer {key}" if key else None), "OPENAI_API_KEY"
        if auth and self.scheme == "http" and not local:
            warnings.warn(
                f"{source} is sent in clear text to {self.root} (plain http, not a loopback host): anyone on the "
                "path can read it. Use an https URL, or a tunnel.", InsecureCredentialsWarning, stacklevel=4,
            )
        return auth

    def __repr__(self) -> str:
        return (
            f"JsonClient({self.root!r}, timeout={self.timeout:g}, max_retries={self.max_retries}, "
            f"total_timeout={self.total_timeout:g}, max_response_bytes={self.max_response_bytes})"
        )

    def post(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``path`` (e.g. ``"/v1/completions"``); return the decoded JSON answer."""
        return self._call("POST", path, json.dumps(payload).encode("utf-8"))

    def get(self, path: str) -> Any:
        """GET ``path``; return the decoded JSON answer."""
        return self._call("GET", path, None)

    # -- one request, with retries --------------------------------------------------------------------------------
    def _call(self, method: str, path: str, body: bytes | None) -> Any:
        url = self.root + path
        give_up = time.monotonic() + self.total_timeout
        last: str = ""
        status: int | None = None
        for attempt in range(1, self.max_retries + 2):
            retry_after = None
            try:
                status, headers, data = self._once(method, self._target(path), body, give_up)
                if status < 300:
                    return _decode(data, url, status, attempt)
            except _TooLarge as err:
                raise ServerResponseError(
                    f"{method} {url} answered HTTP {err.args[0]} with more than max_response_bytes="
                    f"{self.max_response_bytes} bytes ({err.args[1]}). If such answers are expected (a per-token "
                    "/pooling layout with long inputs), raise max_response_bytes= on the backbone or lower "
                    "batch_size=; otherwise check the server.",
                    url, err.args[0], attempt,
                ) from None
            except _TRANSIENT as err:
                status = None
                last = _describe(err, self.timeout)
                if time.monotonic() >= give_up:
                    last = f"no complete answer within total_timeout={self.total_timeout:g} s ({last})"
            else:
                last = f"HTTP {status}: {_error_message(data)}"
                if status not in RETRY_STATUSES:
                    raise ServerError(f"{method} {url} was rejected with {last}. {_rejection_hint(status, headers)}",
                                      url, status, attempt)
                retry_after = _retry_after(headers)
            if attempt > self.max_retries:
                break
            delay = self._delay(attempt - 1, retry_after)
            if time.monotonic() + delay >= give_up:
                raise ServerError(
                    f"{method} {url} gave up after {attempt} attempt(s): total_timeout={self.total_timeout:g} s would "
                    f"pass before the next one, last: {last}. Raise total_timeout= if the server needs longer.",
                    url, status, attempt,
                )
            time.sleep(delay)
        attempts = self.max_retries + 1
        hint = (
            "Is the server running, and is base_url right? (docs/SCALING.md shows how to start one)"
            if status is None and not last.startswith("incomplete") else "The server keeps failing: check its log"
        )
        raise ServerError(f"{method} {url} failed after {attempts} attempt(s), last: {last}. {hint}.", url, status,
                          attempts)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(self.max_backoff, retry_after)
        delay = min(self.max_backoff, self.backoff * 2**attempt)
        return delay * (0.5 + 0.5 * random.random())  # jitter: replicas restarted together are not hit in lockstep

    def _target(self, path: str) -> str:
        """The request target: the base URL's path prefix, ``path``, and the base URL's query string."""
        if not self.query:
            return self.prefix + path
        return f"{self.prefix}{path}{'&' if '?' in path else '?'}{self.query}"

    def _once(
        self, method: str, path: str, body: bytes | None, give_up: float
    ) -> tuple[int, dict[str, str], bytearray]:
        """One attempt, bounded by ``timeout`` seconds (and the request's ``give_up`` time) and ``max_response_bytes``.

        Each blocking step gets the time that is left; the body is read one ``recv`` at a time, so neither a stalled
        nor an endless body can pass the deadline or the size limit by more than one read.
        """
        deadline = min(time.monotonic() + self.timeout, give_up)
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=max(deadline - time.monotonic(), 1e-3))
        try:
            conn.connect()
            sock = conn.sock
            conn.request(method, path or "/", body=body, headers=self.headers)
            _settimeout(sock, deadline)
            # http.client reads the status line and headers with many recv calls, each under the socket timeout:
            # a server that trickles headers would pass the deadline by up to 100 of them. A watchdog shuts the
            # socket at the deadline instead.
            watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), _shut, args=(sock,))
            watchdog.daemon = True
            watchdog.start()
            try:
                response = conn.getresponse()
            except (OSError, http.client.HTTPException):
                if time.monotonic() >= deadline:
                    raise TimeoutError("the response headers did not end before the deadline") from None
                raise
            finally:
                watchdog.cancel()
            headers = {k.lower(): v for k, v in response.getheaders()}
            limit = self.max_response_bytes
            if response.length is not None and response.length > limit:
                raise _TooLarge(response.status, f"Content-Length: {response.length}")
            data = bytearray()
            while True:
                _settimeout(sock, deadline)
                chunk = response.read1(min(1 << 16, limit + 1 - len(data)))  # at most one recv per deadline check
                if not chunk:
                    break
                data += chunk
                if len(data) > limit:
                    raise _TooLarge(response.status, "the body did not end within the limit; reading stopped there")
            if response.length:  # the connection closed before Content-Length bytes came
                raise _Incomplete(f"the body was cut off after {len(data)} bytes, {response.length} more announced")
            return response.status, headers, data
        finally:
            conn.close()


def _shut(sock: socket.socket) -> None:
    """Unblock a ``recv`` on ``sock`` from another thread (the deadline watchdog of :meth:`JsonClient._once`)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


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
    if isinstance(err, (_Incomplete, http.client.IncompleteRead)):
        detail = str(err) if isinstance(err, _Incomplete) else "the chunked body was cut off"
        return f"incomplete response ({detail}; a server or proxy that dropped the connection mid-answer)"
    return f"{type(err).__name__}: {err}"


def _decode(data: bytes | bytearray, url: str, status: int, attempts: int) -> Any:
    """The JSON value of a 2xx body; a body that stops mid-JSON raises ``_Incomplete`` (retried), any other a
    :class:`ServerError` (not JSON: a proxy's error page, a wrong base_url)."""
    try:
        text = data.decode(json.detect_encoding(data))
        return json.loads(text)
    except json.JSONDecodeError as err:
        if text.lstrip()[:1] in ("{", "[") and _cut_off(text, err):
            raise _Incomplete(f"the JSON body ends mid-way after {len(data)} bytes") from None
        problem: BaseException = err
    except (ValueError, RecursionError) as err:  # bad UTF-8, an integer of > 4300 digits, nesting too deep
        problem = err
    snippet = bytes(data[:200]).decode("utf-8", "replace")
    raise ServerError(
        f"{url} answered HTTP {status} with a body that is not JSON ({problem.__class__.__name__}: "
        f"{str(problem)[:200]}); it begins {snippet!r}. Is base_url pointing at an OpenAI-compatible / vLLM server "
        "(not a proxy's error page)?", url, status, attempts,
    ) from None


_CUT_ESCAPE = re.compile(r"u[0-9a-fA-F]{0,4}(\\u?[0-9a-fA-F]{0,4})?")  # "\\ud83d\\ude0" cut inside an escape


def _cut_off(text: str, err: json.JSONDecodeError) -> bool:
    """Whether ``text`` fails to parse only because it stops early: inside a string (or its ``\\uXXXX`` escape), a
    number or a literal, or where more must follow (as opposed to a wrong character in the middle: not JSON)."""
    tail = text[err.pos :].rstrip()
    return (
        not tail or err.msg.startswith("Unterminated string") or re.fullmatch(r"[-+.eE0-9]+", tail) is not None
        or (err.msg.startswith("Invalid \\uXXXX") and _CUT_ESCAPE.fullmatch(tail) is not None)
        or any(literal.startswith(tail) for literal in ("true", "false", "null", "NaN", "Infinity", "-Infinity"))
    )


def _error_message(data: bytes | bytearray) -> str:
    """The server's error text: OpenAI / vLLM ``{"error": {"message": ...}}``, older vLLM ``{"message": ...}``."""
    try:
        body = json.loads(bytes(data))
    except (ValueError, RecursionError):
        return bytes(data[:300]).decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        for key in ("message", "detail", "error"):
            if body.get(key):
                return str(body[key])[:500]
    return json.dumps(body)[:300]


def _rejection_hint(status: int, headers: dict[str, str]) -> str:
    """What to fix for an HTTP status that retrying cannot change."""
    if status in (401, 403):
        return ("The server refused the credentials: pass api_key= (or set OPENAI_API_KEY) with a key it accepts, "
                "do not retry.")
    if 300 <= status < 400:
        where = redact(headers.get("location", ""))[:200]  # headers come lower-cased from _once
        return (f"The server redirects{' to ' + repr(where) if where else ''} and redirects are not followed (a "
                "credential would go with them): give that URL as the base URL.")
    return ("The request itself is wrong for this server (a prompt longer than the model's context, a wrong model "
            "name or endpoint): fix it, do not retry.")


def _retry_after(headers: dict[str, str]) -> float | None:
    try:
        return max(0.0, float(headers.get("retry-after", "")))
    except ValueError:
        return None  # absent, or an HTTP date: use our own backoff


# -- credentials in what is recorded or shown ---------------------------------------------------------------------
REDACTED = "***"
# A URL's user:password@ (the scheme kept); and, for a bare "user:password@host", the same without a scheme.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s@]*)@")
_BARE_USERINFO = re.compile(r"^(?P<userinfo>[^/?#\s@:]+:[^/?#\s@]*)@(?=[^\s@]+$)")
# A query parameter of a URL (?api-key=..., &token=...): its value is hidden when its name is a secret's.
_QUERY_PARAM = re.compile(r"(?P<lead>[?&](?P<name>[^=&#\s]{1,64})=)(?P<value>[^&#\s'\"]*)")
# Words that make a setting's name a secret's: api_key, hf_token, password, client_secret, Authorization ...
_SECRET_WORDS = frozenset({"password", "passwd", "secret", "apikey", "authorization", "credential", "credentials"})
_SECRET_ENDINGS = ("api_key", "api-key", "token", "access_key", "private_key", "secret_key")


def is_secret_name(name: str) -> bool:
    """Whether a setting called ``name`` holds a credential (``api_key``, ``hf_token``, ``password`` ...)."""
    lowered = name.lower()
    return (lowered in ("key", "sig", "signature") or bool(_SECRET_WORDS & set(re.split(r"[^a-z0-9]+", lowered)))
            or lowered.endswith(_SECRET_ENDINGS))


def redact(value: Any, secrets: Any = ()) -> Any:
    """``value`` with every credential replaced by ``***``, for anything that records or shows a setting (a
    results file's header, a summary line, an error message, a model card).

    Hidden: the ``user:password`` of every URL in a string (``http://***@host``), the value of a URL's query
    parameter named like a secret (``?api-key=***``); in a mapping, the value of every key
    that names a secret (:func:`is_secret_name`); a string holding a JSON object (``--backbone-options``) is read and
    written back redacted; and every literal string in ``secrets`` (see :func:`find_secrets`), wherever it appears.
    Lists, tuples and mappings are walked; other values are returned as they are. The one redaction helper of the
    package: everything that prints or records a setting goes through it.
    """
    known = sorted({s for s in secrets if isinstance(s, str) and s}, key=len, reverse=True)
    return _redacted(value, known)


def _redacted(value: Any, known: list[str]) -> Any:
    if isinstance(value, str):
        return _redacted_text(value, known)
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and is_secret_name(k) and v not in (None, "")
                    else _redacted(v, known)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_redacted(v, known) for v in value)
    return value


def _redacted_text(text: str, known: list[str]) -> str:
    if text.lstrip().startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            text = json.dumps(_redacted(parsed, known))
        else:  # not JSON: hide anything written like a secret's "key": "value"
            text = re.sub(r'("(?P<key>[^"\\]{1,64})"\s*:\s*)"(?:[^"\\]|\\.)*"?',
                          lambda m: m.group(0) if not is_secret_name(m.group("key")) else m.group(1) + '"***"', text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _BARE_USERINFO.sub(f"{REDACTED}@", text)
    if "://" in text:
        text = _QUERY_PARAM.sub(lambda m: m.group("lead") + REDACTED if is_secret_name(m.group("name"))
                                else m.group(0), text)
    for secret in known:
        text = text.replace(secret, REDACTED)
    return text


def find_secrets(value: Any) -> set[str]:
    """The credential strings in ``value`` (walked as :func:`redact` walks it): the password (and user) of every
    URL, as written and percent-decoded, and the string value of every key naming a secret, also inside a string
    holding a JSON object. A command collects them from its arguments once, so that any line it prints can be
    scrubbed of them (:func:`redact` with ``secrets=``), even where a library's message quoted one."""
    found: set[str] = set()
    _collect(value, found)
    return {s for s in found if len(s) >= 3}  # "a" or "" would scrub every line


def _collect(value: Any, found: set[str]) -> None:
    if isinstance(value, str):
        for match in [*_URL_USERINFO.finditer(value), *_BARE_USERINFO.finditer(value)]:
            user, _, password = match.group("userinfo").partition(":")
            found.update(part for part in (password, unquote(password)) if part)
            if not password:  # a token given as the user (https://TOKEN@host)
                found.update(part for part in (user, unquote(user)) if part)
        if "://" in value:
            for match in _QUERY_PARAM.finditer(value):
                if is_secret_name(match.group("name")) and match.group("value"):
                    found.update({match.group("value"), unquote(match.group("value"))})
        if value.lstrip().startswith("{"):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                _collect(parsed, found)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and is_secret_name(key) and isinstance(item, str):
                found.add(item)
            else:
                _collect(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, found)


def _has_control(text: str) -> bool:
    """Control characters (a line break in a header value would end the header: http.client refuses it late)."""
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def _is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
