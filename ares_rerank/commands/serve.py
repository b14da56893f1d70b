"""``ares-rerank serve``: an ARES reward server for distributed RL, speaking OpenRLHF's remote reward protocol.

``POST /get_reward`` with ``{"query": [...], "prompts": [...], "labels": [...]}`` (each query is its prompt followed
by the response) answers ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``: the ARES chain score of each
response, and ``--unscorable-value`` (default 0.0) for one it cannot score. ``GET /health`` reports the queue.
Requests from many clients are scored together (``--max-batch``, ``--max-wait-ms``). SIGTERM or Ctrl-C stops
accepting, answers every request in flight or queued, and exits 0 (a second one stops at once).

The first line on standard output says where it listens (``--port 0`` picks a free port).

Examples:
    ares-rerank serve --backbone path/to/head --port 5000
    # OpenRLHF: --remote_rm_url http://127.0.0.1:5000/get_reward
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
    from ..server import ServeConfig

    parser = subparsers.add_parser("serve", help="Serve ARES rewards over HTTP (OpenRLHF's remote reward protocol).",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", default="ares", help="'ares' or a baseline, e.g. 'entail-prev'.")
    options.add_aggregate_argument(parser, "the reward")
    options.add_chain_text_arguments(parser)
    options.add_backbone_arguments(parser)
    options.add_config_arguments(parser)
    options.add_dataclass_arguments(parser, ServeConfig, "server (ServeConfig fields)")


def run(args: argparse.Namespace) -> int:
    from ..rerank import AresReranker
    from ..server import RewardServer, ServeConfig

    settings = options.dataclass_from_args(ServeConfig, args)  # checked before the backbone loads
    config = options.config_from_args(args)
    separator = options.step_separator(args.step_separator)
    backbone = options.backbone_from_args(args)
    reranker = AresReranker(backbone, config=config, method=args.method, step_separator=separator,
                            prompt_split=args.prompt_split, aggregate=args.aggregate, show_progress_bar=False)
    server = RewardServer(reranker, settings)
    stop = threading.Event()
    with _stop_on_signals(stop):
        server.start()
        print(f"ares-rerank serve: listening on {server.url} (POST {server.url}/get_reward, GET /health)", flush=True)
        print(f"backbone: {backbone!r}; method: {args.method}; aggregate: {args.aggregate}; unscorable responses "
              f"get {settings.unscorable_value}", file=sys.stderr, flush=True)
        if settings.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"ares-rerank serve: warning: listening on {settings.host}, with no authentication: anyone who can "
                  "reach this port can use the server.", file=sys.stderr, flush=True)
        while not stop.wait(0.2):
            pass
        print("ares-rerank serve: stopping: no new connections; answering the requests in flight and queued "
              "(a second signal stops at once)", file=sys.stderr, flush=True)
        server.stop()
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
