"""``ares-rerank view``: one self-contained HTML report (open it in a browser; no server, nothing fetched) of the
output of ``score``, ``rank``, ``search`` or ``eval --task bon``, the record kind detected.

A score report shows each chain's steps with their tau as a coloured bar, the flagged steps and the first error,
the gold labels beside the flags (with --chains, the file score read: its steps' text, base claims and labels) and
the certificate (method, mode, eps, delta, evaluations, bounds). A rank report shows each prompt's candidates side
by side, best first, with their answers, groups and votes and the chosen one; a search report the final candidates
(finished, stopped by early rejection, or cut) round by round; an eval --task bon report the accuracy@N table.
Cards are paged (--page-size) with a filter; every text is escaped (chains are untrusted input).

Examples:
    ares-rerank score examples/claimtrees_demo.jsonl --backbone default --output scores.jsonl
    ares-rerank view scores.jsonl --chains examples/claimtrees_demo.jsonl -o report.html
    ares-rerank view ranked.jsonl -o ranked.html --step-separator '\\n'
    ares-rerank view runs/eval/bon.json -o bon.html
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import options


def register(subparsers: Any) -> None:
    from ..viewer import KINDS, MAX_RECORDS

    parser = subparsers.add_parser("view", help="Write an HTML report of score / rank / search / eval --task bon "
                                                "output (steps, flags, certificates, votes).",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input_file", type=Path, metavar="INPUT",
                        help="The JSONL file score / rank / search wrote, or eval --task bon's <name>.json ('-' for "
                             "standard input).")
    parser.add_argument("-o", "--output", type=Path, default=None,
                        help="The HTML file to write (default: INPUT with the suffix .html). Written atomically; an "
                             "existing file is replaced only with --overwrite.")
    parser.add_argument("--overwrite", action="store_true", help="Replace an --output file that exists.")
    parser.add_argument("--kind", default="auto", choices=["auto", *KINDS],
                        help="The record kind (default: detected from the first record).")
    parser.add_argument("--chains", type=Path, default=None, metavar="JSONL",
                        help="score reports: the chains file score read, for the steps' text, the base claims and "
                             "the gold labels (matched by id).")
    options.add_chain_text_arguments(parser)
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="rank / search reports: steps with tau <= this are flagged (score records carry their "
                             "own flags; default 0.5).")
    options.add_prompt_key_argument(parser)
    parser.add_argument("--candidates-key", default="candidates", help="rank reports: the key of the candidates.")
    limits = parser.add_argument_group("limits")
    limits.add_argument("--page-size", type=int, default=50, help="Cards per page (default 50).")
    limits.add_argument("--max-records", type=int, default=MAX_RECORDS,
                        help=f"Records read (chains, or prompts); the rest are counted and the report says so "
                             f"(default {MAX_RECORDS:,}).")
    limits.add_argument("--max-text", type=int, default=2000,
                        help="Characters of one step, claim, prompt or candidate shown; longer text is cut with a "
                             "note (default 2000).")


def _output(args: argparse.Namespace) -> Path:
    """The report's path, checked before any work."""
    from ..utils.io import check_output_path

    if args.output is None:
        if str(args.input_file) == "-":
            raise ValueError("-o/--output is needed when INPUT is '-' (standard input): name the HTML file.")
        args.output = args.input_file.with_suffix(".html")
        if args.output == args.input_file:
            raise ValueError(f"INPUT {str(args.input_file)!r} already ends in .html: name the report with -o.")
    if str(args.output) == "-":
        raise ValueError("-o/--output '-': the report is a file to open in a browser; name an .html file.")
    out = check_output_path(args.output, flag="--output",
                            inputs=[p for p in (args.input_file, args.chains) if p is not None])
    if out.exists() and not args.overwrite:
        raise ValueError(f"--output {str(out)!r} already exists: pass --overwrite to replace it, or name another "
                         "file.")
    return out


def run(args: argparse.Namespace) -> int:
    from ..utils.io import write_atomic
    from ..chain import read_chains
    from ..viewer import render_file

    for value, flag in ((args.page_size, "--page-size"), (args.max_records, "--max-records"),
                        (args.max_text, "--max-text")):
        options.positive(value, flag)
    if not 0.0 <= args.threshold <= 1.0:
        raise ValueError(f"--threshold={args.threshold} must lie in [0, 1] (tau is a probability), e.g. 0.5.")
    separator = options.step_separator(args.step_separator)
    if str(args.input_file) != "-" and Path(args.input_file).is_dir():
        raise ValueError(f"INPUT {str(args.input_file)!r} is a folder: give the JSONL file (or eval's .json) in it.")
    out = _output(args)
    chains = None
    if args.chains is not None:
        chains = read_chains(args.chains, separator, args.prompt_split)
    report = render_file(args.input_file, kind=args.kind, chains=chains, chains_path=str(args.chains),
                         step_separator=separator, threshold=args.threshold, page_size=args.page_size,
                         max_records=args.max_records, max_text=args.max_text, prompt_key=args.prompt_key,
                         candidates_key=args.candidates_key)
    write_atomic(out, report.html)
    print(f"wrote {out} ({len(report.html.encode('utf-8')) / 1e6:.2f} MB): {report.kind} report, {report.summary}",
          file=sys.stderr)
    for warning in report.warnings:  # the same lines as the report's banners
        print(f"WARNING: {warning}", file=sys.stderr)
    return 0
