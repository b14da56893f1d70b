"""``ares-rerank serve``: an ARES reward server for distributed RL, speaking OpenRLHF's remote reward protocol.

``POST /get_reward`` with ``{"query": [...], "prompts": [...], "labels": [...]}`` (each query is its prompt followed
by the response) answers ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``: the ARES chain score of each
response, and ``--unscorable-value`` (default 0.0) for one it cannot score. A query that does not start with its
prompt (a prompt the trainer cut to its last tokens) is matched by the prompt's longest ending it starts with.
``GET /health`` reports the queue and the status: "loading", "ok", "failed" or "draining". Requests from many
clients are scored together (``--max-batch``, ``--max-wait-ms``).

The server listens at once, before the backbone loads, and holds requests until it is ready, so a restart costs
the trainer latency, not rewards. The first line on standard output says where it listens (``--port 0`` picks a
free port); a line on standard error says when the backbone is ready. Refused requests are logged with their reason
(at most one line per reason per ``--log-interval`` seconds). SIGTERM or Ctrl-C stops accepting, answers every
request in flight or queued, and exits 0 (a second one stops at once).

Examples:
    ares-rerank serve --backbone path/to/head --port 5000
    # OpenRLHF 0.11: --reward.remote_url http://127.0.0.1:5000/get_reward
    ares-rerank serve --backbone Qwen/Qwen2.5-Math-PRM-7B --kind prm-qwen --aggregate min --max-batch 128
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from typing import Any, Iterator

from . import options


def register(subparsers: Any) -> None:
    from ..rewards.server import ServeConfig

    parser = subparsers.add_parser("serve", help="Serve ARES rewards over HTTP (OpenRLHF's remote reward protocol).",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_rerank_arguments(parser, ("method",))
    options.add_aggregate_argument(parser)
    options.add_chain_text_arguments(parser)
    options.add_chat_layout_arguments(parser)
    options.add_backbone_arguments(parser)
    options.add_config_arguments(parser)
    options.add_dataclass_arguments(parser, ServeConfig, "server (ServeConfig fields)")


def run(args: argparse.Namespace) -> int:
    from ..scoring import METHODS
    from ..rewards.server import RewardServer, ServeConfig

    # everything that can be checked without the backbone is checked before listening
    settings = options.dataclass_from_args(ServeConfig, args)
    config = options.config_from_args(args)
    rerank = options.rerank_config_from_args(args)
    reranker_kwargs = rerank.reranker_kwargs(load_tokenizer=False)
    method = reranker_kwargs["method"] = args.method.replace("_", "-")
    if method not in METHODS:
        raise ValueError(f"--method {args.method!r} is unknown: use one of {list(METHODS)}.")
    # a --tokenizer is loaded after listening, with the backbone (its load can take seconds)
    chat = options.chat_layout_options(args) if args.tokenizer is None else None

    def build() -> Any:  # in the server's loader thread, while it listens and holds requests
        from ..rerank.reranker import AresReranker

        layout = chat if chat is not None else options.chat_layout_options(args)
        backbone = options.backbone_from_args(args)
        return AresReranker(backbone, config=config, show_progress_bar=False, **reranker_kwargs, **layout)

    server = RewardServer(build, settings)
    stop = threading.Event()
    with _stop_on_signals(stop):
        server.start()
        print(f"ares-rerank serve: listening on {server.url} (POST {server.url}/get_reward, GET /health); "
              "loading the backbone, requests wait for it", flush=True)
        if settings.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"ares-rerank serve: warning: listening on {settings.host}, with no authentication: anyone who can "
                  "reach this port can use the server.", file=sys.stderr, flush=True)
        announced = False
        while True:
            stopped = stop.wait(0.2)
            if not announced and server.status == "ok":
                announced = True
                print(f"ares-rerank serve: ready (the backbone loaded in {server.load_seconds:.1f} s): "
                      f"{server.reranker.backbone!r}; method: {method}; aggregate: {args.aggregate}; unscorable "
                      f"responses get {settings.unscorable_value}", file=sys.stderr, flush=True)
            if stopped or server.status == "failed":
                break
        if server.status != "failed":
            print("ares-rerank serve: stopping: no new connections; answering the requests in flight and queued "
                  "(a second signal stops at once)", file=sys.stderr, flush=True)
        server.stop()
    if server.load_error is not None:
        raise server.load_error  # one line on stderr and status 2 (cli.run_reporting_errors)
    print(f"ares-rerank serve: stopped after answering {server.answered} requests", file=sys.stderr, flush=True)
    return 0


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (a graceful stop); a second one raises KeyboardInterrupt (stop at once).
    Outside the main thread (no signals there) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
