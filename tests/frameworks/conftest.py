"""The framework tests install stand-ins for ray, vllm, deepspeed and flash_attn (:mod:`frameworks.stubs`); each test
module takes them out again when it ends, so the rest of the suite never finds a fake vLLM."""

from __future__ import annotations

import pytest

from frameworks.stubs import shutdown_actors, uninstall_stubs


@pytest.fixture(autouse=True, scope="module")
def _stand_ins_removed_after_the_module():
    yield
    shutdown_actors()
    uninstall_stubs()
