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


class GatedOracle(ClaimTreesOracle):
    """A rule oracle whose loading waits until the file ``$ARES_TEST_LOAD_GATE`` exists: a backbone that takes as long
    to load as the test wants (``ares-rerank serve`` must listen and hold requests meanwhile)."""

    def __init__(self) -> None:
        gate = os.environ["ARES_TEST_LOAD_GATE"]
        for _ in range(6000):  # a hang guard of 60 s
            if os.path.exists(gate):
                break
            time.sleep(0.01)
        super().__init__()


class HashBackbone:
    """A fast deterministic backbone for property tests of the CLI: a probability from a hash of the input."""

    def entailment_probs(self, premises, hypotheses):  # noqa: ANN001, ANN201 - the Backbone protocol
        import hashlib

        return [int.from_bytes(hashlib.sha256(repr((p, h)).encode("utf-8", "surrogatepass")).digest()[:4], "big")
                / 2**32 for p, h in zip(premises, hypotheses)]
