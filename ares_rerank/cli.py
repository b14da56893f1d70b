"""The ``ares-rerank`` command. Each subcommand lives in ``ares_rerank/commands/<name>.py`` and defines
``register(subparsers)`` and ``run(args) -> int``; modules import heavy libraries inside ``run`` only, so
``ares-rerank --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
import threading
from typing import Callable, Iterable, Sequence


__all__ = ["main", "run_reporting_errors"]

SUBCOMMANDS = ("score", "rank", "search", "view", "eval", "train", "adapt", "calibrate", "serve")
# third-party module -> the extra that installs it (named in the error when it is missing)
EXTRAS = {"sklearn": "eval", "matplotlib": "eval"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ares-rerank",
        description="Step-level soundness scores (ARES) for reasoning chains: score, rank, search, evaluate, train, "
                    "serve.",
    )
    parser.add_argument("--version", action="version", version=f"ares-rerank {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module_name = f"ares_rerank.commands.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(subparsers)
    return parser


def _version() -> str:
    """The installed distribution's version, as ``ares_rerank.__version__`` reads it (the CLI imports nothing above
    itself)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ares-rerank")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; every error ends as one line on stderr and exit status 2, never a traceback (set
    ``ARES_DEBUG=1`` to see it)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if on_main_thread else None
    if previous == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops a run the way Ctrl-C does: files stay consistent
    from .utils.http import find_secrets

    try:
        return run_reporting_errors(
            f"ares-rerank {args.command}",
            lambda: importlib.import_module(f"ares_rerank.commands.{args.command}").run(args),
            secrets=find_secrets(vars(args)),  # a password in --backbone, an api_key in --backbone-options
        )
    finally:
        if previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, previous)


def run_reporting_errors(prog: str, run: Callable[[], int | None], secrets: Iterable[str] = ()) -> int:
    """``run()``'s exit status; an error ends as one line on stderr (``<prog>: error: ...``) and status 2, Ctrl-C as
    status 130, never a traceback (``ARES_DEBUG=1`` shows it). Shared by every command-line entry point. The line
    is redacted: no URL password, and none of ``secrets`` (the credentials in the command's arguments), even where
    a library's message quoted one."""
    from .utils.http import redact

    try:
        return int(run() or 0)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # bad input: say what and how to fix it, no traceback
        if os.environ.get("ARES_DEBUG"):
            raise
        print(f"{prog}: error: {redact(describe_error(err), secrets)}", file=sys.stderr)
        return 2


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def describe_error(err: BaseException) -> str:
    """One line for an error: the message of the errors users cause, the type too for anything else."""
    if isinstance(err, ModuleNotFoundError) and err.name:
        extra = EXTRAS.get(err.name.split(".")[0])
        hint = f" (pip install 'ares-rerank[{extra}]')" if extra else ""
        return f"this command needs the package {err.name!r}{hint}."
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, (ValueError, FileNotFoundError, FileExistsError, PermissionError, TypeError)):
        return text
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}" + (f": {err.filename}" if err.filename else "") + "."
    return f"{type(err).__name__}: {text} (ARES_DEBUG=1 shows the traceback)"


if __name__ == "__main__":
    sys.exit(main())
