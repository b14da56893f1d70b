"""An ARES reward server for distributed RL (``ares-rerank serve``): ``POST /get_reward`` in OpenRLHF's remote reward
protocol (:mod:`ares_rerank.rewards.openrlhf`: queries and prompts in; ``rewards``, ``scores``, ``extra_logs`` out) and
``GET /health``.

Requests from many clients are scored together (:class:`~ares_rerank.rewards.batcher.RewardBatcher`: up to ``max_batch``
completions per reranker call, waiting at most ``max_wait_ms`` for more), and each gets exactly its own results.
A response that cannot be scored gets ``unscorable_value`` (default 0.0, since OpenRLHF needs a float).

Listening before the backbone is loaded: given a function that builds the reranker instead of the reranker,
:meth:`RewardServer.start` listens at once and builds it in a background thread. Meanwhile ``/health`` answers
``"status": "loading"`` and ``/get_reward`` requests are read and held (each on its own connection, so at most
``max_connections``), then scored once the reranker is ready: a restarted server costs its clients latency, not
rewards (OpenRLHF 0.11 gives up on a reward after 5 tries 1 s apart, and loading a model takes longer). A build that
fails answers the held requests 503 and sets :attr:`RewardServer.load_error`.

Bounds (:class:`ServeConfig`; docs/RELIABILITY.md): the queue (``max_queue`` completions waiting; a request that does
not fit is answered 503 with ``Retry-After``), a request body (``max_body_bytes``: a larger ``Content-Length`` is
refused with 413 unread; a chunked body is read only up to the limit), completions per request (``max_items``,
413), connections served at once (``max_connections``, 503) and time (``read_timeout`` for a whole request to
arrive, line, headers and body together, however slowly its bytes trickle in: 408 and closed).
Every error is JSON, ``{"error": "..."}``, naming the field, the value and the fix; never a traceback (it is logged).
Every refusal is also logged at WARNING with its reason, and so is a query that did not start with its prompt (a
left-truncated prompt, :func:`~.openrlhf.split_query`): at most one line per reason per ``log_interval``
seconds, the next line counting those held back. :meth:`RewardServer.stop` (SIGTERM / Ctrl-C in
``ares-rerank serve``) stops accepting, closes idle and still-arriving connections, answers every request in flight
or queued, then returns.

No authentication: the server listens on 127.0.0.1 unless told otherwise; put it behind a tunnel or a proxy to expose
it. Standard library only (``http.server``).

Example:
    >>> with RewardServer(AresReranker(backbone), ServeConfig(port=0)) as server:  # doctest: +SKIP
    ...     print(server.url + "/get_reward")  # OpenRLHF's --reward.remote_url
"""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit

from ..chat_templates import strip_end_markers
from ..utils.checks import is_finite_number, is_int
from .batcher import BatcherClosed, QueueFull, RewardBatcher
from .openrlhf import DEFAULT_END_MARKERS, REWARD_PATH, RequestError, RewardRequest, parse_reward_request, reward_answer


__all__ = ["HEALTH_PATH", "RewardServer", "ServeConfig"]

logger = logging.getLogger(__name__)

HEALTH_PATH = "/health"
_ROUTES = {REWARD_PATH: "POST", HEALTH_PATH: "GET"}
_REFUSED_GRACE = 0.5  # seconds a refused connection stays open, unread, so its client can read the answer
_BODY_GRACE = 1.0  # seconds stop() lets a body already under way arrive before it closes the connection


@dataclass
class ServeConfig:
    """Settings of :class:`RewardServer` (the ``ares-rerank serve`` flags)."""

    host: str = field(default="127.0.0.1", metadata={
        "help": "Address to listen on; 127.0.0.1 (default) serves this machine only. The server has no "
                "authentication: expose it through a tunnel or a proxy."})
    port: int = field(default=5000, metadata={"help": "Port to listen on; 0 picks a free one (printed at start)."})
    max_batch: int = field(default=64, metadata={
        "help": "Completions scored together in one reranker call, across requests."})
    max_wait_ms: float = field(default=10.0, metadata={
        "help": "Milliseconds to wait for more requests once one is queued, to fill a batch."})
    max_queue: int = field(default=8192, metadata={
        "help": "Completions that may wait to be scored; a request that does not fit gets 503 with Retry-After."})
    max_items: int = field(default=4096, metadata={
        "help": "Queries in one request (413 beyond); at most --max-queue."})
    max_body_bytes: int = field(default=32 * 2**20, metadata={
        "help": "Bytes in one request body (413 beyond, refused before reading a larger Content-Length)."})
    max_connections: int = field(default=512, metadata={
        "help": "Connections served at once (503 beyond). Bodies held in memory: at most this x --max-body-bytes."})
    read_timeout: float = field(default=60.0, metadata={
        "help": "Seconds a request (line, headers and body) may take to arrive, and a kept-alive connection may "
                "idle (408 / closed beyond)."})
    unscorable_value: float = field(default=0.0, metadata={
        "help": "Reward and score of a response that cannot be scored (empty, blank, a backbone error on it); "
                "must be finite, since OpenRLHF needs a float."})
    end_markers: list[str] = field(default_factory=lambda: list(DEFAULT_END_MARKERS), metadata={
        "nargs": "*", "help": "Text removed (repeatedly, with whitespace) from the end of each response before "
                              "scoring: the end-of-sequence markers a decoded query keeps. Give none to keep all."})
    log_interval: float = field(default=10.0, metadata={
        "help": "Seconds between two WARNING lines of the same reason (a refused request with its reason, a query "
                "that did not start with its prompt); the next line counts those held back. 0 logs every one."})

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host.strip():
            raise ValueError(f"host={self.host!r} (--host) must be an address, e.g. 127.0.0.1.")
        if not is_int(self.port) or not 0 <= self.port <= 65535:
            raise ValueError(f"port={self.port!r} (--port) must be an integer in [0, 65535] (0 picks a free one).")
        for name in ("max_batch", "max_queue", "max_items", "max_body_bytes", "max_connections"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"{name}={value!r} (--{name.replace('_', '-')}) must be a positive integer.")
        if self.max_items > self.max_queue:
            raise ValueError(f"max_items={self.max_items} (--max-items) is above max_queue={self.max_queue} "
                             "(--max-queue): such a request could never be queued; lower --max-items or raise "
                             "--max-queue.")
        if not is_finite_number(self.max_wait_ms) or self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms={self.max_wait_ms!r} (--max-wait-ms) must be a finite number >= 0.")
        if not is_finite_number(self.read_timeout) or self.read_timeout <= 0:
            raise ValueError(f"read_timeout={self.read_timeout!r} (--read-timeout) must be a finite number of "
                             "seconds > 0, e.g. 60.")
        if not is_finite_number(self.unscorable_value):
            raise ValueError(f"unscorable_value={self.unscorable_value!r} (--unscorable-value) must be a finite "
                             "number: OpenRLHF turns every reward into a tensor; e.g. 0.0.")
        if not is_finite_number(self.log_interval) or self.log_interval < 0:
            raise ValueError(f"log_interval={self.log_interval!r} (--log-interval) must be a finite number of "
                             "seconds >= 0, e.g. 10.")
        if isinstance(self.end_markers, str) or not all(isinstance(m, str) for m in self.end_markers):
            raise ValueError(f"end_markers={self.end_markers!r} (--end-markers) must be a list of strings.")
        self.end_markers = [m for m in self.end_markers if m]


# -- rate-limited warnings -------------------------------------------------------------------------------------
class _ThrottledLog:
    """WARNING lines rate-limited per reason: a reason's first line is written at once, the next ones at most one per
    ``interval`` seconds; the lines held back meanwhile are counted in the next one written (or by :meth:`flush`).
    Reasons are a small fixed set of short texts, so the bookkeeping stays small."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def warning(self, reason: str, message: str) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(reason)
            if last is not None and now - last < self.interval:
                self._held[reason] = self._held.get(reason, 0) + 1
                return
            held = self._held.pop(reason, 0)
            self._last[reason] = now
        more = f" [and {held} more like it in the last {now - last:.0f} s]" if held and last is not None else ""
        logger.warning("%s%s", message, more)

    def flush(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for reason, count in held.items():
            logger.warning("%d more of: %s (since the last line about it).", count, reason)


# -- the server ---------------------------------------------------------------------------------------------------
class RewardServer:
    """Serve ARES rewards over HTTP (OpenRLHF's ``POST /get_reward``, and ``GET /health``); see the module docstring.

    The socket is bound when the server is built (so ``port=0`` has its real port in :attr:`port`); :meth:`start`
    serves in a background thread (and builds the reranker in another, when given a function); :meth:`stop` drains
    and stops. Also a context manager (start / stop).

    Args:
        reranker: The :class:`~ares_rerank.rerank.AresReranker` to score with (only the server's batcher uses it
            while the server runs), or a function without arguments that builds one: the server then listens at
            once, holds ``/get_reward`` requests while it runs (``/health``: ``"status": "loading"``) and scores them
            when it returns.
        config: The bounds and settings (:class:`ServeConfig`; default ``ServeConfig()``).
    """

    def __init__(self, reranker: Any | Callable[[], Any], config: ServeConfig | None = None) -> None:
        self.config = config if config is not None else ServeConfig()
        if hasattr(reranker, "score_pairs"):
            self._build: Callable[[], Any] | None = None
        elif callable(reranker):
            self._build, reranker = reranker, None
        else:
            raise TypeError(f"RewardServer(reranker=...) must be an AresReranker or a function that builds one, got "
                            f"{type(reranker).__name__}.")
        self.reranker: Any = reranker
        self.batcher: RewardBatcher | None = None
        self.threshold = float(reranker.config.threshold) if reranker is not None else None
        self.load_error: BaseException | None = None  # what building the reranker raised
        self.load_seconds: float | None = None  # how long building it took (0 when given built)
        self.answered = 0  # requests answered with rewards
        self._lock = threading.Condition()
        self._connections: set[socket.socket] = set()
        self._busy: set[socket.socket] = set()  # a request's head read, until it is answered
        self._arriving: set[socket.socket] = set()  # of those, the ones whose body is still being read
        self._draining = False
        self._thread: threading.Thread | None = None
        self._loader: threading.Thread | None = None
        self._log = _ThrottledLog(self.config.log_interval)
        self._httpd = _HTTPServer(self, (self.config.host, self.config.port))
        self.host, self.port = self._httpd.server_address[:2]
        if reranker is not None:
            self.batcher = self._batcher(reranker)
            self.load_seconds = 0.0

    def _batcher(self, reranker: Any) -> RewardBatcher:
        return RewardBatcher(reranker, max_batch=self.config.max_batch, max_wait=self.config.max_wait_ms / 1000,
                             max_queue=self.config.max_queue)

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:5000`` (OpenRLHF's ``--reward.remote_url`` is this plus
        ``/get_reward``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"RewardServer({self.url}, {self.reranker if self.reranker is not None else self.status!r})"

    def __enter__(self) -> RewardServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> RewardServer:
        """Serve in a background thread (and build the reranker in another, when given a function); returns
        ``self``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                            name="ares-reward-server", daemon=True)
            self._thread.start()
        if self._build is not None and self._loader is None:
            self._loader = threading.Thread(target=self._load, name="ares-reward-loader", daemon=True)
            self._loader.start()
        return self

    def _load(self) -> None:
        started = time.monotonic()
        try:
            reranker = self._build()
            if not hasattr(reranker, "score_pairs"):
                raise TypeError(f"the function given to RewardServer returned {type(reranker).__name__}, not an "
                                "AresReranker.")
            batcher = self._batcher(reranker)
        except BaseException as err:  # noqa: BLE001 -- kept for the owner (load_error); held requests get a 503
            logger.debug("building the reranker failed", exc_info=True)
            with self._lock:
                self.load_error = err
                self._lock.notify_all()
            return
        with self._lock:
            self.reranker, self.threshold, self.batcher = reranker, float(reranker.config.threshold), batcher
            self.load_seconds = time.monotonic() - started
            draining = self._draining
            self._lock.notify_all()
        if draining:  # stopped while loading: nothing will use it
            batcher.close()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the reranker is ready (``True``), its build failed or the server stops (``False``), or
        ``timeout`` seconds pass (``False``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self.status == "loading":
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._lock.wait(left)
            return self.status == "ok"

    def stop(self) -> None:
        """Stop accepting connections, answer every request in flight or queued (requests held while the reranker
        loads get 503), then stop the batcher. Connections idle or still sending a request line or headers are
        closed at once; a body still arriving gets ``_BODY_GRACE`` seconds, then its connection is closed too (a
        trickling client does not hold the shutdown). Idempotent."""
        with self._lock:
            if self._draining:
                return
            self._draining = True
            self._lock.notify_all()  # requests held for the reranker answer 503
        if self._thread is not None:
            self._httpd.shutdown()  # the accept loop ends
        self._httpd.server_close()  # new connections are refused
        with self._lock:
            for conn in self._connections - self._busy:  # idle, or a head still arriving: wake their reads with EOF
                _shutdown(conn)
            grace = time.monotonic() + _BODY_GRACE
            while self._arriving and time.monotonic() < grace:
                self._lock.wait(max(0.0, grace - time.monotonic()))
            for conn in self._arriving:  # a body trickling in: not worth holding the shutdown for
                _shutdown(conn)
            while self._busy:
                self._lock.wait()
            batcher = self.batcher
        if batcher is not None:
            batcher.close()
        self._log.flush()

    @property
    def draining(self) -> bool:
        """Whether :meth:`stop` has begun: no new connection or request is taken."""
        return self._draining

    @property
    def status(self) -> str:
        """``"loading"`` (the reranker is being built; requests are held), ``"ok"``, ``"failed"`` (building it
        raised :attr:`load_error`) or ``"draining"`` (:meth:`stop` has begun)."""
        if self._draining:
            return "draining"
        if self.load_error is not None:
            return "failed"
        return "loading" if self.batcher is None else "ok"

    def health(self) -> dict[str, Any]:
        """What ``GET /health`` answers: ``status`` (:attr:`status`), ``queued`` completions, requests ``in_flight``
        (the asking one and those held while loading included), open ``connections``, requests ``answered``,
        reranker ``batches``, ``max_queue``, ``load_seconds`` (``null`` while loading) and, when the build failed,
        its ``error``."""
        batcher = self.batcher
        answer = {"status": self.status, "queued": batcher.queued if batcher else 0, "in_flight": len(self._busy),
                  "connections": len(self._connections), "answered": self.answered,
                  "batches": batcher.batches if batcher else 0, "max_queue": self.config.max_queue,
                  "load_seconds": self.load_seconds}
        if self.load_error is not None:
            answer["error"] = _describe(self.load_error)
        return answer

    # -- used by the HTTP layer ----------------------------------------------------------------------------------
    def admit(self, conn: socket.socket) -> bool:
        """Register a new connection; ``False`` when ``max_connections`` are open (it is refused)."""
        with self._lock:
            if len(self._connections) >= self.config.max_connections or self._draining:
                return False
            self._connections.add(conn)
            return True

    def release(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)
            self._busy.discard(conn)
            self._arriving.discard(conn)
            self._lock.notify_all()

    def begin(self, conn: socket.socket) -> bool:
        """A request's line and headers were read on ``conn``; ``False`` when draining (it is answered 503)."""
        with self._lock:
            self._busy.add(conn)
            return not self._draining

    def reading_body(self, conn: socket.socket, reading: bool) -> None:
        """The body of ``conn``'s request is being read (``True``) or was read (``False``)."""
        with self._lock:
            (self._arriving.add if reading else self._arriving.discard)(conn)
            self._lock.notify_all()

    def end(self, conn: socket.socket) -> None:
        with self._lock:
            self._busy.discard(conn)
            self._arriving.discard(conn)
            self._lock.notify_all()

    def refused(self, status: int, reason: str, message: str, request: str, client: str) -> None:
        """Log a refusal at WARNING (rate-limited per reason, ``log_interval``)."""
        self._log.warning(f"{status} {reason}", f"ares-rerank serve: refused {request} from {client} with {status}: "
                                                f"{_clip(message)}")

    def _realigned(self, request: RewardRequest, client: str) -> None:
        index, matched, total = request.realigned[0]
        others = len(request.realigned) - 1
        self._log.warning("query does not start with its prompt", (
            f"ares-rerank serve: query[{index}] from {client} does not start with its prompt: matched its prompt's "
            f"last {matched} of {total} characters (white space not counted), as a prompt cut to its last tokens "
            "(OpenRLHF's max_len - max_new_tokens) gives; scored against the whole prompt"
            + (f" ({others} more such queries in this request)" if others else "") + "."))

    def _ready_batcher(self) -> RewardBatcher:
        """The batcher, once the reranker is ready (a request waits here while it loads)."""
        with self._lock:
            while self.batcher is None and self.load_error is None and not self._draining:
                self._lock.wait()
            if self.load_error is not None:
                raise RequestError(503, f"the server could not load its backbone ({_describe(self.load_error)}) and "
                                        "is stopping: send this request to another server.", {"Retry-After": "1"},
                                   reason="the backbone failed to load")
            if self.batcher is None:
                raise _shutting_down()
            return self.batcher

    def rewards(self, payload: Any, client: str = "a client") -> dict[str, Any]:
        """Score one ``/get_reward`` body (blocking until its batch is scored, and while the reranker loads);
        :class:`RequestError` when refused."""
        request = parse_reward_request(payload, self.config.max_items)
        if request.realigned:
            self._realigned(request, client)
        responses = [strip_end_markers(text, self.config.end_markers) for text in request.responses]
        batcher = self._ready_batcher()
        try:
            future = batcher.submit(request.prompts, responses)
        except QueueFull as err:
            raise RequestError(503, f"{err} Retry after 1 s, or give the server a larger --max-queue (or more "
                                    "servers).", {"Retry-After": "1"}, reason="the queue is full") from None
        except BatcherClosed:
            raise _shutting_down() from None
        try:
            records = future.result()
        except Exception as err:  # noqa: BLE001 -- the scoring failed for the whole batch: a 500, the server lives on
            raise RequestError(500, f"scoring failed: {type(err).__name__}: {err}", reason="scoring failed") from None
        answer = reward_answer(records, responses, self.threshold, self.config.unscorable_value)
        with self._lock:
            self.answered += 1
        return answer


def _shutting_down() -> RequestError:
    return RequestError(503, "the server is shutting down: send this request to another one.", {"Retry-After": "1"},
                        reason="shutting down")


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def _clip(message: str, size: int = 400) -> str:
    return message if len(message) <= size else message[:size] + "..."


def _encode(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer, allow_nan=False).encode("utf-8")  # a NaN would be invalid JSON: an error instead


def _client(address: Any) -> str:
    return str(address[0]) if isinstance(address, tuple) and address else "a client"


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the peer


class _HTTPServer(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` at once (the rest get 503 and are closed)."""

    daemon_threads = True  # RewardServer.stop waits for the requests themselves, not for idle threads
    request_queue_size = 128

    def __init__(self, app: RewardServer, address: tuple[str, int]) -> None:
        self.app = app
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        try:
            super().__init__(address, _Handler)
        except OSError as err:
            raise ValueError(f"cannot listen on {address[0]}:{address[1]} ({err.strerror or err}): pick another "
                             "--port (0 picks a free one), or stop what is using it.") from None

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.app.admit(request):
            super().process_request(request, client_address)
            return
        message = (f"too many connections (max_connections={self.app.config.max_connections}, --max-connections): "
                   "retry after 1 s.")
        self.app.refused(503, "too many connections", message, "a connection", _client(client_address))
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


class _DeadlineReader(io.RawIOBase):
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


class _Handler(BaseHTTPRequestHandler):
    """The HTTP layer of :class:`RewardServer`: reads a bounded request within one deadline, routes, answers JSON."""

    protocol_version = "HTTP/1.1"
    server_version = "ares-rerank"
    server: _HTTPServer

    def setup(self) -> None:
        self.timeout = self.server.app.config.read_timeout  # the bound on writing an answer (and the first read)
        super().setup()
        self.rfile.close()  # the socket's own reader: each of its waits is bounded, not their sum
        self._reader = _DeadlineReader(self.connection)
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
        self._send(err.status, _encode({"error": err.message}), close=True)

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: refuse an oversized ``Content-Length`` before the client sends the body."""
        try:
            self._content_length()
        except RequestError as err:
            self.server.app.refused(err.status, err.reason, err.message, self._request_name(), self._client())
            self._send(err.status, _encode({"error": err.message}), err.headers, close=True)
            return False
        return super().handle_expect_100()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a malformed request line, headers too long, an unknown method) as JSON."""
        text = message or self.responses.get(code, ("error",))[0]
        text = f"{text}{': ' + explain if explain else ''}"
        self.server.app.refused(code, f"HTTP {code}", text, self._request_name(), self._client())
        self._send(code, _encode({"error": text}), close=True)

    def _client(self) -> str:
        return _client(self.client_address)

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
            status, data = 200, _encode(self._route(method))
        except RequestError as err:
            status, data, headers = err.status, _encode({"error": err.message}), err.headers
            app.refused(err.status, err.reason, err.message, self._request_name(), self._client())
        except Exception as err:  # noqa: BLE001 -- a bug of ours: logged here, one JSON line to the client
            logger.exception("%s %s failed", method, self.path)
            status, data = 500, _encode({"error": f"internal error: {type(err).__name__}: {err}"})
        self._send(status, data, headers, close=status >= 400 or app.draining)
        if status >= 400 and self._body_unread and self._has_body():
            self._linger()

    def _route(self, method: str) -> dict[str, Any]:
        self._body_unread = True
        if not self._accepted:
            raise _shutting_down()
        path = urlsplit(self.path).path
        allowed = _ROUTES.get(path)
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
        time.sleep(_REFUSED_GRACE)
