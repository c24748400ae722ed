#!/usr/bin/env bash
# README command 1: install what is missing, build, and serve on the embedded backend at
# 127.0.0.1:8080 with a demo room of capacity 3.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target anteroom
LISTEN="${ANTEROOM_LISTEN:-127.0.0.1:8080}"
echo "anteroom: serving http://${LISTEN} (demo room 'demo', capacity 3; state kept in ./anteroom-data); Ctrl-C stops it"
exec ./build/release/anteroom serve --listen "$LISTEN" --demo-room demo:3 "$@"
