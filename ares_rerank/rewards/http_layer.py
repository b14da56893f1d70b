"""The HTTP layer of the reward server (:mod:`~ares_rerank.rewards.server`): a bounded ``http.server`` that reads
each request within one deadline (request line, headers and body together), routes ``POST /get_reward`` and
``GET /health`` to the app, and answers JSON errors. Standard library only.

The app (a :class:`~ares_rerank.rewards.server.RewardServer`) is reached as ``server.app``: ``admit`` /
``release`` a connection, ``begin`` / ``end`` a request, ``rewards`` / ``health`` for the answers, ``refused`` to
log a refusal, ``config`` and ``draining``.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .openrlhf import REWARD_PATH, RequestError


__all__ = ["BODY_GRACE", "HEALTH_PATH", "HTTPLayer", "RequestHandler", "client_name", "clip_message",
           "describe_error", "encode_answer", "shutdown_socket", "shutting_down_error"]

logger = logging.getLogger("ares_rerank.rewards.server")  # one logger for the server's lines, whichever module

HEALTH_PATH = "/health"
ROUTES = {REWARD_PATH: "POST", HEALTH_PATH: "GET"}
REFUSED_GRACE = 0.5  # seconds a refused connection stays open, unread, so its client can read the answer
BODY_GRACE = 1.0  # seconds stop() lets a body already under way arrive before it closes the connection


def shutting_down_error() -> RequestError:
    return RequestError(503, "the server is shutting down: send this request to another one.", {"Retry-After": "1"},
                        reason="shutting down")


def describe_error(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def clip_message(message: str, size: int = 400) -> str:
    return message if len(message) <= size else message[:size] + "..."


def encode_answer(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer, allow_nan=False).encode("utf-8")  # a NaN would be invalid JSON: an error instead


def client_name(address: Any) -> str:
    return str(address[0]) if isinstance(address, tuple) and address else "a client"


def shutdown_socket(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the peer


class HTTPLayer(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` at once (the rest get 503 and are closed)."""

    daemon_threads = True  # RewardServer.stop waits for the requests themselves, not for idle threads
    request_queue_size = 128

    def __init__(self, app: Any, address: tuple[str, int]) -> None:  # app: the RewardServer
        self.app = app
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        try:
            super().__init__(address, RequestHandler)
        except OSError as err:
            raise ValueError(f"cannot listen on {address[0]}:{address[1]} ({err.strerror or err}): pick another "
                             "--port (0 picks a free one), or stop what is using it.") from None

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.app.admit(request):
            super().process_request(request, client_address)
            return
        message = (f"too many connections (max_connections={self.app.config.max_connections}, --max-connections): "
                   "retry after 1 s.")
        self.app.refused(503, "too many connections", message, "a connection", client_name(client_address))
        body = json.dumps({"error": message}).encode()
        head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
                "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n").encode()
        try:
            request.settimeout(1.0)
            request.sendall(head + body)
        except OSError:
            pass  # the client went away
        self.shutdown_request(request)

    def shutdown_request(self, request: Any) -> None:
        self.app.release(request)
        super().shutdown_request(request)


class DeadlineReader(io.RawIOBase):
    """A connection's bytes with one deadline per request: every wait for data (request line, headers, body) is
    bounded by the time left until :attr:`deadline`, so a client sending a byte now and then cannot hold its
    connection longer than ``read_timeout`` (a socket timeout alone bounds each wait, not their sum).

    :meth:`arm` starts a request's clock: ``timeout`` seconds for its first byte (an idle kept-alive connection is
    closed then), and from that byte ``timeout`` seconds for the whole request."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self._timeout = 0.0
        self.deadline = 0.0
        self.started = False  # a byte of the current request has arrived
        self.timed_out = False

    def arm(self, timeout: float) -> None:
        self._timeout, self.deadline = timeout, time.monotonic() + timeout
        self.started = self.timed_out = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.timed_out = True
            raise TimeoutError("the request did not arrive within the read timeout")
        self._sock.settimeout(left)
        try:
            count = self._sock.recv_into(buffer)
        except TimeoutError:
            self.timed_out = True
            raise
        if count and not self.started:
            self.started, self.deadline = True, time.monotonic() + self._timeout
        return count


class RequestHandler(BaseHTTPRequestHandler):
    """The HTTP layer of :class:`RewardServer`: reads a bounded request within one deadline, routes, answers JSON."""

    protocol_version = "HTTP/1.1"
    server_version = "ares-rerank"
    server: HTTPLayer

    def setup(self) -> None:
        self.timeout = self.server.app.config.read_timeout  # the bound on writing an answer (and the first read)
        super().setup()
        self.rfile.close()  # the socket's own reader: each of its waits is bounded, not their sum
        self._reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- BaseHTTPRequestHandler's signature
        logger.debug("%s %s", self.address_string(), format % args)

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # reads the headers (within the request's deadline)
        self._accepted = self.server.app.begin(self.connection)  # busy once the head is in: stop() waits for it
        return parsed

    def handle_one_request(self) -> None:
        self._reader.arm(self.server.app.config.read_timeout)
        self._answered = False
        try:
            super().handle_one_request()  # a read past the deadline ends it (TimeoutError, caught there)
            if self._reader.timed_out and self._reader.started and not self._answered:
                self._refuse_slow_head()
        finally:
            self.server.app.end(self.connection)

    def _refuse_slow_head(self) -> None:
        """The request line or headers did not arrive in time: 408 and close (an idle connection just closes)."""
        if not hasattr(self, "request_version"):  # the request line itself was cut short
            self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
        err = self._too_slow()
        self.server.app.refused(err.status, err.reason, err.message, self._request_name(), self._client())
        self._send(err.status, encode_answer({"error": err.message}), close=True)

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: refuse an oversized ``Content-Length`` before the client sends the body."""
        try:
            self._content_length()
        except RequestError as err:
            self.server.app.refused(err.status, err.reason, err.message, self._request_name(), self._client())
            self._send(err.status, encode_answer({"error": err.message}), err.headers, close=True)
            return False
        return super().handle_expect_100()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a malformed request line, headers too long, an unknown method) as JSON."""
        text = message or self.responses.get(code, ("error",))[0]
        text = f"{text}{': ' + explain if explain else ''}"
        self.server.app.refused(code, f"HTTP {code}", text, self._request_name(), self._client())
        self._send(code, encode_answer({"error": text}), close=True)

    def _client(self) -> str:
        return client_name(self.client_address)

    def _request_name(self) -> str:
        command, path = getattr(self, "command", None), getattr(self, "path", None)
        return f"{command} {urlsplit(path).path}" if command and path else "a request"

    def _any_method(self) -> None:
        self._dispatch(self.command)

    # every method answers (a wrong one with 405 naming the right one); others get http.server's 501, as JSON
    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _any_method

    def _dispatch(self, method: str) -> None:
        app = self.server.app
        headers: dict[str, str] = {}
        try:
            status, data = 200, encode_answer(self._route(method))
        except RequestError as err:
            status, data, headers = err.status, encode_answer({"error": err.message}), err.headers
            app.refused(err.status, err.reason, err.message, self._request_name(), self._client())
        except Exception as err:  # noqa: BLE001 -- a bug of ours: logged here, one JSON line to the client
            logger.exception("%s %s failed", method, self.path)
            status, data = 500, encode_answer({"error": f"internal error: {type(err).__name__}: {err}"})
        self._send(status, data, headers, close=status >= 400 or app.draining)
        if status >= 400 and self._body_unread and self._has_body():
            self._linger()

    def _route(self, method: str) -> dict[str, Any]:
        self._body_unread = True
        if not self._accepted:
            raise shutting_down_error()
        path = urlsplit(self.path).path
        allowed = ROUTES.get(path)
        if allowed is None:
            raise RequestError(404, f"no such path {path!r}: POST {REWARD_PATH} (OpenRLHF's --reward.remote_url "
                                    f"http://host:port{REWARD_PATH}) or GET {HEALTH_PATH}.", reason="no such path")
        if method != allowed:
            raise RequestError(405, f"{method} {path} is not allowed: use {allowed} {path}.", {"Allow": allowed},
                               reason="wrong method")
        if path == HEALTH_PATH:
            return self.server.app.health()
        body = self._read_body()
        self._body_unread = False
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError) as err:  # bad JSON, bad UTF-8, a huge integer, nesting too deep
            raise RequestError(400, f"the body is not JSON ({type(err).__name__}: {str(err)[:200]}): send "
                                    '{"query": [...], "prompts": [...], "labels": [...]} as UTF-8 JSON.',
                               reason="body not JSON") from None
        return self.server.app.rewards(payload, self._client())

    # -- bounded reading ---------------------------------------------------------------------------------------
    def _has_body(self) -> bool:
        return self.headers.get("Content-Length", "0").strip() not in ("", "0") or "Transfer-Encoding" in self.headers

    def _content_length(self) -> int | None:
        """The declared body size (``None`` for a chunked body), checked against ``max_body_bytes``."""
        limit = self.server.app.config.max_body_bytes
        encoding = self.headers.get("Transfer-Encoding")
        if encoding is not None:
            if encoding.strip().lower() != "chunked":
                raise RequestError(501, f"Transfer-Encoding: {encoding!r} is not supported: send the body with a "
                                        "Content-Length, or chunked.", reason="unsupported Transfer-Encoding")
            return None
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise RequestError(411, "no Content-Length: send the body's length, or send it chunked.",
                               reason="no Content-Length")
        if not raw.strip().isdigit():
            raise RequestError(400, f"Content-Length: {raw!r} is not a byte count.", reason="bad Content-Length")
        length = int(raw)
        if length > limit:
            raise RequestError(413, f"the body has {length} bytes, more than max_body_bytes={limit} "
                                    "(--max-body-bytes): split the batch into smaller requests.",
                               reason="body too large")
        return length

    def _read_body(self) -> bytes:
        """The body, within what is left of the request's deadline (the head's time counts)."""
        length = self._content_length()
        self.server.app.reading_body(self.connection, True)
        try:
            return self._read_exact(length) if length is not None else self._read_chunked()
        finally:
            self.server.app.reading_body(self.connection, False)

    def _read_chunked(self) -> bytes:
        limit, body = self.server.app.config.max_body_bytes, bytearray()
        while True:
            line = self._read_line()
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise RequestError(400, f"a bad chunk size line {bytes(line[:40])!r} in the chunked body.",
                                   reason="bad chunked body") from None
            if size == 0:
                for _ in range(100):  # the trailer, up to a blank line
                    if not self._read_line().strip():
                        return bytes(body)
                raise RequestError(400, "the chunked body's trailer does not end.", reason="bad chunked body")
            if len(body) + size > limit:
                raise RequestError(413, f"the chunked body passes max_body_bytes={limit} (--max-body-bytes): split "
                                        "the batch into smaller requests.", reason="body too large")
            body += self._read_exact(size)
            self._read_line()  # the CRLF after the chunk

    def _read_line(self) -> bytes:
        try:
            line = self.rfile.readline(1024)
        except TimeoutError:
            raise self._too_slow() from None
        if not line:
            raise RequestError(400, "the connection closed before the body ended.", reason="body cut short")
        return line

    def _read_exact(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = self.rfile.read1(min(size - len(data), 1 << 16))
            except TimeoutError:
                raise self._too_slow() from None
            if not chunk:
                raise RequestError(400, f"the connection closed after {len(data)} of {size} body bytes.",
                                   reason="body cut short")
            data += chunk
        return bytes(data)

    def _too_slow(self) -> RequestError:
        limit = self.server.app.config.read_timeout
        return RequestError(408, f"the request (line, headers and body) did not arrive within read_timeout={limit:g}"
                                 " s (--read-timeout): send the whole request at once.", reason="request too slow")

    # -- answering -----------------------------------------------------------------------------------------------
    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None, close: bool = False) -> None:
        self._answered = True
        self.server.app.reading_body(self.connection, False)
        try:
            self.connection.settimeout(self.timeout)  # the whole answer within read_timeout (sendall's total)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away: nothing to answer

    def _linger(self) -> None:
        """After refusing a body unread: send our FIN, keep the socket open a moment without reading more, so the
        client can read the answer before the close resets the connection."""
        try:
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            return
        time.sleep(REFUSED_GRACE)
