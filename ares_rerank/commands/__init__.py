"""Subcommands of the ``ares-rerank`` CLI, one module each (see :mod:`ares_rerank.cli`); the options they share are
defined once in :mod:`.options`."""
