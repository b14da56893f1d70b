"""The ``ares-rerank`` command. Each subcommand lives in ``ares_rerank/commands/<name>.py`` and defines
``register(subparsers)`` and ``run(args) -> int``; modules import heavy libraries inside ``run`` only, so
``ares-rerank --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import Sequence


__all__ = ["main"]

SUBCOMMANDS = ("score", "rank", "eval", "train", "calibrate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ares-rerank",
        description="Step-level soundness scores (ARES) for reasoning chains: score, rank, evaluate, train.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module_name = f"ares_rerank.commands.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(f"ares_rerank.commands.{args.command}")
    try:
        return int(module.run(args) or 0)
    except (ValueError, FileNotFoundError) as err:  # bad input: say what and how to fix it, no traceback
        print(f"ares-rerank {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
