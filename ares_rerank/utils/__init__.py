"""Leaves that import nothing of the package: JSONL and atomic writes (:mod:`~ares_rerank.utils.io`), the JSON-over-
HTTP client (:mod:`~ares_rerank.utils.http`) and argument checks (:mod:`~ares_rerank.utils.checks`)."""
