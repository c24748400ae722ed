#!/usr/bin/env bash
# Room check-ins on the embedded backend, durable (the default `serve`) against
# `--memory-only`, and against Redis's own ceiling for the same check (the peer's reference
# script as one EVALSHA, redis-benchmark -c 50 -P 1), in one run (docs/benchmarks.md).
#
#   scripts/bench-room-check.sh [--no-build] [--build-dir DIR] [--rounds N] [--out DIR]
#
# Each round starts `anteroom serve --threads 2` fresh (durable, then memory-only), pre-joins a
# room of capacity 1000 with 20000 sessions (19000 waiting) with `anteroom-bench rooms`, then
# runs wrk -t2 -c50 -d10s with bench/wrk/check.lua: one request in flight per connection, every
# check of a session already there. Reported per run: checks/s, p50/p99, the server's CPU per
# check (schedstat) and what the data directory grew by during wrk (a check-in of someone
# present writes nothing). Then the Redis peer (bench-waitroom-lua.js: the same 20000 users, a
# 5-read check as one EVALSHA) and one `strace -c -f` pass per backend for syscalls per check.
#
# Loopback only; every step bounded by `timeout`; every process started here stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
BUILD_DIR="build/release"
ROUNDS=3
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-room-check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
HTTP_SECONDS="${HTTP_SECONDS:-10}"
OUT="${OUT:-$(mktemp -d /tmp/anteroom-room-check.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-room-check.sh: build $BUILD_DIR first" >&2; exit 1; }
need wrk wrk
need strace strace
record_machine

SESSIONS=20000
# Starts a server (durable or memory), pre-joins the room; sets SERVER_URL, SERVER_PID.
serve_room() {  # serve_room MODE LOG
  local flags=()
  [[ "$1" == memory ]] && flags=(--memory-only)
  start_server "$2" 2 "${flags[@]}"
  SERVER_PID="${PIDS[-1]}"
  timeout 120 "$BENCH" rooms --server "$SERVER_URL" --room peer --sessions "$SESSIONS" \
    --capacity 1000 --connections 50 --duration 1 >"$2.prejoin" 2>&1
}

dir_bytes() { if [[ -n "$SERVER_DATA" ]]; then du -sb "$SERVER_DATA" | cut -f1; else echo 0; fi; }

echo "== $ROUNDS alternating rounds: wrk -t2 -c50 -d${HTTP_SECONDS}s, $SESSIONS sessions"
for round in $(seq "$ROUNDS"); do
  for mode in durable memory; do
    serve_room "$mode" "$OUT/serve-$mode-$round.log"
    before_ns="$(run_ns "$SERVER_PID")"
    before_bytes="$(dir_bytes)"
    timeout $((HTTP_SECONDS + 60)) wrk -t2 -c50 -d"${HTTP_SECONDS}s" --latency \
      -s "$ROOT/bench/wrk/check.lua" "$SERVER_URL" -- "$SESSIONS" peer \
      >"$OUT/wrk-$mode-$round.txt"
    after_ns="$(run_ns "$SERVER_PID")"
    after_bytes="$(dir_bytes)"
    python3 - "$OUT/wrk-$mode-$round.txt" "$mode" "$round" "$before_ns" "$after_ns" \
      "$before_bytes" "$after_bytes" <<'PY' | tee -a "$OUT/rounds.jsonl"
import json, sys
path, mode, rnd, b_ns, a_ns, b_bytes, a_bytes = sys.argv[1:]
line = [l for l in open(path) if l.startswith('{"tool":"wrk"')][-1]
j = json.loads(line)
j.update(mode=mode, round=int(rnd),
         cpu_us_per_check=round((int(a_ns) - int(b_ns)) / 1e3 / max(1, j["requests"]), 2),
         log_bytes_during_run=int(a_bytes) - int(b_bytes))
print(json.dumps(j))
PY
    cleanup
  done
done

echo "== syscalls per check (strace -c -f, one pass each; strace slows everything)"
for mode in durable memory; do
  serve_room "$mode" "$OUT/serve-strace-$mode.log"
  timeout 60 strace -c -f -p "$SERVER_PID" -o "$OUT/strace-$mode.txt" &
  strace_pid=$!
  sleep 0.5
  timeout 60 wrk -t2 -c50 -d5s -s "$ROOT/bench/wrk/check.lua" "$SERVER_URL" -- "$SESSIONS" peer \
    >"$OUT/wrk-strace-$mode.txt"
  cleanup
  wait "$strace_pid" 2>/dev/null || true
  python3 - "$OUT/strace-$mode.txt" "$OUT/wrk-strace-$mode.txt" "$mode" <<'PY' | tee -a "$OUT/syscalls.txt"
import json, re, sys
table, wrk, mode = sys.argv[1:]
requests = json.loads([l for l in open(wrk) if l.startswith('{"tool":"wrk"')][-1])["requests"]
calls, total = {}, 0
for line in open(table):
    f = line.split()
    if len(f) >= 5 and f[-1] not in ("syscall", "total") and re.match(r"^[0-9.]+$", f[0]):
        n = int(f[3]); calls[f[-1]] = n; total += n
top = ", ".join(f"{k} {v / requests:.2f}" for k, v in sorted(calls.items(), key=lambda x: -x[1])[:6])
print(f"{mode}: {total / requests:.2f} syscalls per check ({requests} checks): {top}")
PY
done

echo "== the Redis peer: the same check as one EVALSHA (redis-benchmark -c 50)"
need redis-server redis-server redis-tools
need redis-benchmark redis-tools
prepare_peers
(cd "$PEER_DIR" && timeout 400 node bench-waitroom-lua.js) | tee "$OUT/peer-waitroom-lua.txt"
cp "$PEER_DIR"/results/waitroom-lua.json "$OUT/" 2>/dev/null || true
rm -rf "$PEER_DIR"

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, statistics, sys
out = sys.argv[1]
rounds = [json.loads(l) for l in open(os.path.join(out, "rounds.jsonl"))]
def med(mode, key):
    return statistics.median(r[key] for r in rounds if r["mode"] == mode)
peer = None
try:
    j = json.load(open(os.path.join(out, "waitroom-lua.json")))
    res = j.get("results", j)
    checks = res["P1"]["checks"]
    peer = checks.get("median") if isinstance(checks, dict) else statistics.median(checks)
except (OSError, KeyError, ValueError, TypeError):
    pass
print("\n== summary (medians of the rounds)")
print("| | checks/s | p50 ms | p99 ms | server CPU us/check | log bytes written during wrk |")
print("|---|---|---|---|---|---|")
for mode in ("durable", "memory"):
    print(f"| {mode} | {med(mode, 'requests_per_s'):.0f} | {med(mode, 'p50_ms'):.2f} | "
          f"{med(mode, 'p99_ms'):.2f} | {med(mode, 'cpu_us_per_check'):.1f} | "
          f"{med(mode, 'log_bytes_during_run'):.0f} |")
d, m = med("durable", "requests_per_s"), med("memory", "requests_per_s")
print(f"durable / memory-only: {d / m:.2f}")
if peer:
    print(f"Redis EVALSHA check (redis-benchmark -c 50 -P 1): {peer:.0f} checks/s; "
          f"durable / EVALSHA: {d / peer:.2f} (target 1.5)")
PY
