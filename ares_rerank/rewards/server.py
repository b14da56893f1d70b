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

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..chat_templates import strip_end_markers
from ..utils.checks import is_finite_number, is_int
from .batcher import BatcherClosed, QueueFull, RewardBatcher
from .http_layer import (
    BODY_GRACE,
    HEALTH_PATH,
    HTTPLayer,
    clip_message,
    describe_error,
    shutdown_socket,
    shutting_down_error,
)
from .openrlhf import DEFAULT_END_MARKERS, RequestError, RewardRequest, parse_reward_request, reward_answer


__all__ = ["HEALTH_PATH", "RewardServer", "ServeConfig"]

logger = logging.getLogger(__name__)



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
        self.threshold = float(reranker.threshold) if reranker is not None else None
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
        self._httpd = HTTPLayer(self, (self.config.host, self.config.port))
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
            self.reranker, self.threshold, self.batcher = reranker, float(reranker.threshold), batcher
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
        closed at once; a body still arriving gets ``BODY_GRACE`` seconds, then its connection is closed too (a
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
                shutdown_socket(conn)
            grace = time.monotonic() + BODY_GRACE
            while self._arriving and time.monotonic() < grace:
                self._lock.wait(max(0.0, grace - time.monotonic()))
            for conn in self._arriving:  # a body trickling in: not worth holding the shutdown for
                shutdown_socket(conn)
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
            answer["error"] = describe_error(self.load_error)
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
                                                f"{clip_message(message)}")

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
                raise RequestError(503, f"the server could not load its backbone ({describe_error(self.load_error)}) "
                                        "and is stopping: send this request to another server.", {"Retry-After": "1"},
                                   reason="the backbone failed to load")
            if self.batcher is None:
                raise shutting_down_error()
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
            raise shutting_down_error() from None
        try:
            records = future.result()
        except Exception as err:  # noqa: BLE001 -- the scoring failed for the whole batch: a 500, the server lives on
            raise RequestError(500, f"scoring failed: {type(err).__name__}: {err}", reason="scoring failed") from None
        answer = reward_answer(records, responses, self.threshold, self.config.unscorable_value)
        with self._lock:
            self.answered += 1
        return answer
