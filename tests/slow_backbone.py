"""A rule oracle that takes its time (``$ARES_TEST_SLEEP`` seconds per call): lets the fault-injection tests stop a CLI
run in the middle. Loaded by the CLI as ``--backbone slow_backbone:SlowOracle`` with ``tests/`` on ``PYTHONPATH``."""

from __future__ import annotations

import os
import time

from ares_rerank.backbones.oracle import ClaimTreesOracle


class SlowOracle(ClaimTreesOracle):
    def entailment_probs(self, premises, hypotheses):  # noqa: ANN001, ANN201 - the Backbone protocol
        time.sleep(float(os.environ.get("ARES_TEST_SLEEP", "0.2")))
        return super().entailment_probs(premises, hypotheses)
