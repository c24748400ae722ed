#!/usr/bin/env bash
# The room benchmarks (results and how to read them: docs/benchmarks.md).
#
#   scripts/bench.sh [--peers] [--no-build] [--build-dir DIR] [--out DIR]
#
#  1. builds anteroom and engine_bench (the release preset, or DIR),
#  2. runs engine_bench (engine checks/s, churn, expiry, memory per waiting session),
#  3. starts `anteroom serve --listen 127.0.0.1:0 --threads 2` (stopped by its PID on exit),
#     pre-joins 10000 sessions, runs `anteroom-bench rooms --connections 64 --duration 10`, then
#     wrk -t1 -c64 -d10s with bench/wrk/check.lua,
#  4. with --peers: the Redis waiting-room peers of /work/shared/peers (bench-waitroom.js,
#     bench-waitroom-lua.js) on a copy of that folder, plus anteroom on the same shape of room
#     (20000 sessions, capacity 1000, 50 connections), and prints the ratios.
#
# Loopback only; every step is bounded by `timeout`; every process started here is stopped by
# its PID. Results (raw outputs and JSON) go to --out (default: a new temporary directory).
# Environment: ENGINE_BENCH_FLAGS (flags for engine_bench; default: 3 repetitions, medians
# reported; e.g. "--benchmark_filter=CheckWaiting"), HTTP_SECONDS (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

PEERS=0
BUILD=1
BUILD_DIR="build/release"
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --peers) PEERS=1 ;;
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
HTTP_SECONDS="${HTTP_SECONDS:-10}"
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

# ---- 1. build ----------------------------------------------------------------------------------
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench engine_bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
ENGINE_BENCH="$ROOT/$BUILD_DIR/bench/engine_bench"
[[ -x "$BIN" && -x "$ENGINE_BENCH" ]] || { echo "bench.sh: build $BUILD_DIR first" >&2; exit 1; }

record_machine

# ---- 2. engine -----------------------------------------------------------------------------------
echo "== engine_bench"
# shellcheck disable=SC2086
timeout 1200 "$ENGINE_BENCH" --benchmark_out="$OUT/engine.json" --benchmark_out_format=json \
  ${ENGINE_BENCH_FLAGS:---benchmark_repetitions=3 --benchmark_report_aggregates_only=true} \
  | tee "$OUT/engine.txt"

# ---- 3. HTTP -------------------------------------------------------------------------------------
run_wrk() {  # run_wrk CONNECTIONS SESSIONS ROOM NAME: wrk with check.lua, plus server CPU per check
  local conns="$1" sessions="$2" room="$3" name="$4" t0 t1
  t0="$(server_cpu_ticks)"
  timeout $((HTTP_SECONDS + 60)) wrk -t1 -c"$conns" -d"${HTTP_SECONDS}s" --latency \
    -s "$ROOT/bench/wrk/check.lua" "$SERVER_URL" -- "$sessions" "$room" | tee "$OUT/$name.txt"
  t1="$(server_cpu_ticks)"
  grep '^{"tool":"wrk"' "$OUT/$name.txt" >"$OUT/$name.json" || true
  python3 - "$OUT/$name.json" "$((t1 - t0))" "$(getconf CLK_TCK)" <<'PY' || true
import json, sys
path, ticks, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
j = json.load(open(path))
j["server_cpu_us_per_check"] = round(ticks / hz * 1e6 / max(1, j["requests"]), 2)
open(path, "w").write(json.dumps(j) + "\n")
print(f"server CPU per check: {j['server_cpu_us_per_check']} us")
PY
}

echo "== HTTP: anteroom serve --threads 2, client and server on the same $(nproc) cores"
start_server "$OUT/serve.log"
echo "server: $SERVER_URL"
echo "-- pre-join 10000 sessions (bench-0 .. bench-9999, room 'bench', capacity 100)"
timeout 120 "$BENCH" rooms --server "$SERVER_URL" --room bench --sessions 10000 \
  --connections 64 --duration 1 | tee "$OUT/bench-rooms-prejoin.json"
echo "-- anteroom-bench rooms: 64 connections, ${HTTP_SECONDS} s"
timeout $((HTTP_SECONDS + 120)) "$BENCH" rooms --server "$SERVER_URL" --room bench \
  --sessions 10000 --connections 64 --duration "$HTTP_SECONDS" | tee "$OUT/bench-rooms.json"
for depth in 4 8; do
  echo "-- anteroom-bench rooms: 64 connections, HTTP pipelining depth $depth, ${HTTP_SECONDS} s"
  timeout $((HTTP_SECONDS + 120)) "$BENCH" rooms --server "$SERVER_URL" --room bench \
    --sessions 10000 --connections 64 --pipeline "$depth" --duration "$HTTP_SECONDS" \
    | tee "$OUT/bench-rooms-pipeline$depth.json"
done
if need wrk wrk; then
  echo "-- wrk -t1 -c64 -d${HTTP_SECONDS}s --latency, bench/wrk/check.lua"
  run_wrk 64 10000 bench wrk
fi
cleanup

# ---- 4. peers ------------------------------------------------------------------------------------
if [[ $PEERS -eq 1 ]]; then
  echo "== peers (Redis waiting room), copied from /work/shared/peers"
  need redis-server redis-server redis-tools
  need redis-benchmark redis-tools
  prepare_peers
  (cd "$PEER_DIR" && timeout 500 node bench-waitroom.js) | tee "$OUT/peer-waitroom.txt"
  (cd "$PEER_DIR" && timeout 400 node bench-waitroom-lua.js) | tee "$OUT/peer-waitroom-lua.txt"
  cp "$PEER_DIR"/results/*.json "$OUT/" 2>/dev/null || true

  echo "-- anteroom on the peers' shape: 20000 sessions, capacity 1000, 50 connections"
  start_server "$OUT/serve-peer.log"
  timeout $((HTTP_SECONDS + 180)) "$BENCH" rooms --server "$SERVER_URL" --room peer \
    --sessions 20000 --capacity 1000 --connections 50 --duration "$HTTP_SECONDS" \
    | tee "$OUT/bench-rooms-peer-shape.json"
  if need wrk wrk; then
    echo "-- wrk -t1 -c50 -d${HTTP_SECONDS}s on the same room (a C client, like redis-benchmark)"
    run_wrk 50 20000 peer wrk-peer-shape
  fi
  cleanup
  rm -rf "$PEER_DIR"
fi

# ---- summary -------------------------------------------------------------------------------------
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None
print("\n== summary (against the room targets)")
eng = json.load(open(os.path.join(out, "engine.json")))["benchmarks"]
# One row per benchmark: the median of the repetitions when there were several.
by = {}
for b in eng:
    if b.get("run_type") == "iteration" or b.get("aggregate_name") == "median":
        by.setdefault(b["run_name"], b)
        if b.get("aggregate_name") == "median":
            by[b["run_name"]] = b
b = by.get("BM_CheckWaiting/sessions:1000000")
if b:
    r = b["items_per_second"]
    print(f"engine checks/s, 1M waiting, random order: {r/1e6:.2f}M  (target >= 2M: "
          f"{'met' if r >= 2e6 else 'MISSED'})")
m = by.get("BM_MemoryPerWaitingSession/sessions:1000000/iterations:1")
if m:
    h, mo = m["bytes_per_session_heap"], m["bytes_per_session_model"]
    print(f"bytes per waiting session: heap {h:.1f}, model {mo:.1f}  (target <= 200: "
          f"{'met' if max(h, mo) <= 200 else 'MISSED'})")
for name, label, rate in (("bench-rooms.json", "anteroom-bench rooms", "checks_per_s"),
                          ("bench-rooms-pipeline4.json", "bench rooms, pipelining 4", "checks_per_s"),
                          ("bench-rooms-pipeline8.json", "bench rooms, pipelining 8", "checks_per_s"),
                          ("wrk.json", "wrk check.lua", "requests_per_s")):
    j = load(name)
    if j:
        print(f"HTTP {label}: {j[rate]:.0f} checks/s (target >= 100k: "
              f"{'met' if j[rate] >= 1e5 else 'MISSED'}), p50 {j['p50_ms']:.2f} ms, "
              f"p99 {j['p99_ms']:.2f} ms (target < 5: {'met' if j['p99_ms'] < 5 else 'MISSED'}), "
              f"errors {j['errors']}"
              + (f", server CPU {j['server_cpu_us_per_check']} us/check"
                 if "server_cpu_us_per_check" in j else ""))
peer = load("bench-rooms-peer-shape.json")
peer_wrk = load("wrk-peer-shape.json")
def peer_median(name, path):
    try:
        with open(os.path.join(out, name)) as f:
            x = json.load(f)["results"]
        for k in path:
            x = x[k]
        return x["median"]
    except (OSError, KeyError, ValueError):
        return None
for client, a in (("bench rooms", peer and peer["checks_per_s"]),
                  ("wrk", peer_wrk and peer_wrk["requests_per_s"])):
    if not a:
        continue
    for label, v in (("Redis sorted-set pipeline (node, 50 clients)",
                      peer_median("waitroom.json", ["checks"])),
                     ("Redis EVALSHA check (redis-benchmark -c 50 -P 1)",
                      peer_median("waitroom-lua.json", ["P1", "checks"])),
                     ("Redis EVALSHA check (redis-benchmark -c 50 -P 16)",
                      peer_median("waitroom-lua.json", ["P16", "checks"]))):
        if v:
            print(f"anteroom ({client}) {a:.0f} checks/s vs {label} {v:.0f}: x{a / v:.2f}")
PY
fi
echo "== done; raw results in $OUT"
