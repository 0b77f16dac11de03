#!/usr/bin/env bash
# The real Claude Code and Codex through koog serve to a real llama.cpp `llama-server`
# speaking their own protocols (issue 43): Claude Code's Messages requests to a
# `wire_api = "messages"` upstream, Codex's Responses requests to a `wire_api = "responses"`
# one, each passed through as it came. A plain turn and a tool turn per agent; one koog
# session per agent; `koog why` shows the cached tokens llama-server reported.
#
#     bash bench/native_agents.sh          # uses the koog on PATH (the project's venv)
#
# llama-server comes from bench/build_llama_server.sh (about 20 minutes the first time),
# the agents from npm (the suite's pins; $KOOG_AGENTS_BIN names a folder holding `claude`
# and `codex` instead). SmolLM2-135M is a small model: its answers are poor and it may
# not call the tool; what is measured is the wire: status, sessions, cache figures.
# Claude Code's system prompt is over 20,000 tokens, so the server gets a 32,768-token
# context (past the model's training length; answers suffer, the protocol does not).
set -uo pipefail
cd "$(dirname "$0")/.."
KOOG="${KOOG:-$(command -v koog)}"
read -r BIN MODEL < <(bash bench/build_llama_server.sh | tr '\n' ' ')
AGENTS="${KOOG_AGENTS_BIN:-}"
if [ -z "$AGENTS" ]; then
  AGENTS="$(python3 -c 'import sys; sys.path.insert(0, "."); from tests.support import npm; from tests.e2e.test_serve_agents_e2e import PINS; print(npm.installed(PINS, "koog-test-agents"))' 2>/dev/null)"
fi
[ -x "$AGENTS/claude" ] && [ -x "$AGENTS/codex" ] || { echo "no claude/codex in '$AGENTS'" >&2; exit 2; }
WORK="$(mktemp -d)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
LPORT="$(free_port)"
"$BIN" -m "$MODEL" --host 127.0.0.1 --port "$LPORT" -c 32768 -np 1 --jinja > "$WORK/llama.log" 2>&1 &
LLAMA=$!
SERVE=""
cleanup() { kill "$LLAMA" ${SERVE:+"$SERVE"} 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$LPORT/health" > /dev/null && break; sleep 0.5; done
export KOOG_DATA_DIR="$WORK/data"
passed=0; failed=0
serve_with() {  # serve_with WIRE: koog serve on llama-server speaking WIRE; sets SPORT
  cat > "$WORK/$1.toml" <<EOF
[llm]
model = "smollm2"
base_url = "http://127.0.0.1:$LPORT/v1"
wire_api = "$1"
timeout_seconds = 600
EOF
  SPORT="$(free_port)"
  KOOG_CONFIG="$WORK/$1.toml" ANTHROPIC_API_KEY=none OPENAI_API_KEY=none \
    "$KOOG" serve --port "$SPORT" > "$WORK/serve-$1.out" 2> "$WORK/serve-$1.err" & SERVE=$!
  for _ in $(seq 1 60); do curl -sf "http://127.0.0.1:$SPORT/healthz" > /dev/null && break; sleep 0.25; done
}
agent_env() {
  env -i PATH="$PATH" HOME="$WORK/home-$1" TMPDIR="$WORK" LANG=C.UTF-8 "${@:2}"
}
report() {  # report WIRE PREFIX: the session the agent's turns made, and what why says
  local session
  session="$(KOOG_CONFIG="$WORK/$1.toml" "$KOOG" history list --json | python3 -c "import json,sys; print(' '.join(s['session'] for s in json.load(sys.stdin) if s['session'].startswith('$2')))")"
  echo "  sessions: $session"
  echo "  serve log:"; sed 's/^/    /' "$WORK/serve-$1.err" | grep -v "HEAD /" | tail -8
  for s in $session; do KOOG_CONFIG="$WORK/$1.toml" "$KOOG" why -s "$s" | grep -E "prompt cache|^turn" | sed 's/^/  /'; done
  [ "$(echo "$session" | wc -w)" -eq 1 ] && ! grep -q " [45][0-9][0-9] " "$WORK/serve-$1.err"
}
run_claude() {
  mkdir -p "$WORK/home-claude" "$WORK/work-claude"
  serve_with messages
  local base="http://127.0.0.1:$SPORT"
  (cd "$WORK/work-claude" && agent_env claude ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY=sk-none \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 \
    timeout 900 "$AGENTS/claude" -p "say pong" --output-format json > "$WORK/claude1.json")
  (cd "$WORK/work-claude" && agent_env claude ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY=sk-none \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 \
    timeout 900 "$AGENTS/claude" -p "Run the command: echo hello" --continue \
    --allowedTools "Bash(echo:*)" --output-format json > "$WORK/claude2.json")
  report messages claude-
  local ok=$?
  kill "$SERVE"; wait "$SERVE" 2>/dev/null; SERVE=""
  return $ok
}
run_codex() {
  mkdir -p "$WORK/home-codex/codex" "$WORK/work-codex"
  serve_with responses
  cat > "$WORK/home-codex/codex/config.toml" <<EOF
model = "smollm2"
model_provider = "koog"
check_for_update_on_startup = false
web_search = "disabled"
[model_providers.koog]
name = "koog"
base_url = "http://127.0.0.1:$SPORT/v1"
wire_api = "responses"
env_key = "KOOG_BENCH_KEY"
[analytics]
enabled = false
EOF
  local envs=(CODEX_HOME="$WORK/home-codex/codex" KOOG_BENCH_KEY=sk-none)
  (cd "$WORK/work-codex" && agent_env codex "${envs[@]}" timeout 900 "$AGENTS/codex" exec \
    --skip-git-repo-check "say pong" > "$WORK/codex1.txt" 2>&1)
  (cd "$WORK/work-codex" && agent_env codex "${envs[@]}" timeout 900 "$AGENTS/codex" exec \
    --skip-git-repo-check resume --last "Run the command: echo hello" > "$WORK/codex2.txt" 2>&1)
  report responses codex-
  local ok=$?
  kill "$SERVE"; wait "$SERVE" 2>/dev/null; SERVE=""
  return $ok
}
for agent in claude codex; do
  start=$(date +%s)
  echo "== $agent"
  if "run_$agent"; then passed=$((passed + 1)); echo "ok    $agent ($(( $(date +%s) - start ))s)"
  else failed=$((failed + 1)); echo "FAIL  $agent"; fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
