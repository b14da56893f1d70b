"""Subcommands of the ``ares-rerank`` CLI, one module each (see :mod:`ares_rerank.cli`)."""
