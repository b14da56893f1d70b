#!/usr/bin/env bash
# Installs the RL frameworks whose own code the integration tests drive (tests/frameworks/): OpenRLHF and verl at
# the pinned versions, with --no-deps, since their full requirements (ray, vllm, deepspeed, flash_attn, CUDA torch)
# cannot be installed on a CPU-only machine; those modules are stubbed by the tests' fixture, which names them.
# The small pure-Python packages their code imports are installed normally (FRAMEWORK_DEPS below).
# Never fails the caller: when an install fails the framework tests skip and say why.
set -uo pipefail
OPENRLHF_VERSION="0.11.2"
VERL_VERSION="0.9.1"
# What the tested code paths of OpenRLHF and verl import at module level, beyond this package's own requirements.
# verl 0.9.1: its Hydra config (omegaconf, hydra-core), DataProto (tensordict, in the range verl 0.9.1 accepts), the
# reward loop and agent loop modules (codetiming, cachetools, aiohttp).
# OpenRLHF 0.11.2: openrlhf.utils (pylatexenc, for its math grader), its remote reward client (aiohttp), and its
# train_ppo_ray command line, whose own parser the tests run (torchdata, for its DeepSpeed strategy module).
FRAMEWORK_DEPS=(aiohttp "omegaconf==2.3.1" "hydra-core==1.3.8" "tensordict==0.10.0" "codetiming==1.4.0" "cachetools==8.0.2"
                "pylatexenc==2.11" "torchdata==0.11.0")
python -m pip install -q "${FRAMEWORK_DEPS[@]}" || echo "WARNING: could not install ${FRAMEWORK_DEPS[*]}"
python -m pip install -q --no-deps "openrlhf==$OPENRLHF_VERSION" "verl==$VERL_VERSION" \
  || echo "WARNING: could not install openrlhf==$OPENRLHF_VERSION / verl==$VERL_VERSION; their tests will skip"
exit 0
