#!/usr/bin/env bash
# What `pip install .` weighs (issue 46: the chat client alone, target at most 120 MB),
# and the same with every optional feature ('.[all]'): each in a fresh virtual
# environment, measured with du -sm, packages counted.
#
#     bash bench/install_size.sh
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for what in "." ".[all]"; do
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/pip" install -q --no-cache-dir "$what" 2>/dev/null
  size="$(du -sm "$WORK/venv" | cut -f1)"
  count="$("$WORK/venv/bin/pip" list 2>/dev/null | tail -n +3 | wc -l)"
  "$WORK/venv/bin/koog" --help > /dev/null
  printf '%-8s %4s MB  %3s packages (pip and setuptools included)\n' "$what" "$size" "$count"
  rm -rf "$WORK/venv"
done
