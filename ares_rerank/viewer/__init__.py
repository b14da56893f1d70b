"""The step-score viewer: one static HTML file (no server, no network) for the output of ``ares-rerank score``,
``rank``, ``search`` and ``eval --task bon``, and notebook views of ChainScores and rankings.

Examples:
    ares-rerank view scores.jsonl --chains chains.jsonl -o report.html
    >>> from ares_rerank.viewer import view
    >>> view(reranker.rank(prompt, candidates), prompt)   # shown by Jupyter

Modules: :mod:`.records` reads a file and detects its record kind, :mod:`.views` checks the records and turns them
into view objects, :mod:`.html` draws those (every text escaped), :mod:`.report` ties them together. Nothing heavy is
imported (no torch, no numpy of our own).
"""

from __future__ import annotations

from .records import KINDS, detect_kind, read_records
from .report import MAX_RECORDS, Report, chain_scores_html, render_file, view


__all__ = ["KINDS", "MAX_RECORDS", "Report", "chain_scores_html", "detect_kind", "read_records", "render_file",
           "view"]
