#!/usr/bin/env bash
# Cost that grows with the work, over HTTP: the same operations with 1k, 100k
# and 1M waiting sessions, and with 1k, 100k and 1M ready jobs, on `anteroom serve` as installed
# (embedded backend, fsync everysec). The engine's rows are bench/engine_bench.cc's.
#
#   scripts/bench-scale.sh [--no-build] [--sizes "1000 100000 1000000"] [--seconds N] [--out DIR]
#
# Rooms: a fresh server per size; `anteroom-bench rooms` pre-joins N sessions (capacity 100, so
# N - 100 wait), then wrk -t1 -c50 with bench/wrk/check.lua checks them in turn. Reported:
# checks/s, p99, server CPU per check (schedstat), and resident memory per session (VmRSS
# growth over the pre-join / N: allocator and page granularity included).
# Queues: a fresh server per size; N jobs of priority -1 are pushed first (1000 per request), so
# they stay ready behind the measured ones; then the worker loop of bench-worker-loop.sh
# (../shared/peers/bench-anteroom-queue.c, plain shape, 4 workers, 50000 jobs of priority 0)
# runs on the same queue. Reported: jobs/s, server CPU per request, VmRSS growth per ready job.
# Loopback only; every step is bounded by `timeout`; every process is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
SIZES="1000 100000 1000000"
SECONDS_PER_RUN=8
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --sizes) SIZES="$2"; shift ;;
    --seconds) SECONDS_PER_RUN="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "bench-scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-scale.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
BUILD_DIR="build/release"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-scale.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine
need wrk wrk
need cc gcc
TOOLS="$(mktemp -d /tmp/anteroom-scale-tools.XXXXXX)"
trap 'cleanup; rm -rf "$TOOLS"' EXIT
cc -O2 -pthread -o "$TOOLS/client" /work/shared/peers/bench-anteroom-queue.c

rss_kb() { awk '/^VmRSS:/ {print $2}' /proc/"$1"/status; }

for n in $SIZES; do
  echo "== rooms: $n sessions"
  start_server "$OUT/serve-room-$n.log" "$(nproc)"
  pid="${PIDS[-1]}"
  rss0="$(rss_kb "$pid")"
  timeout 600 "$BENCH" rooms --server "$SERVER_URL" --room scale --sessions "$n" \
    --capacity 100 --connections 64 --duration 0.5 >"$OUT/prejoin-$n.json"
  rss1="$(rss_kb "$pid")"
  t0="$(run_ns "$pid")"
  timeout $((SECONDS_PER_RUN + 60)) wrk -t1 -c50 -d"${SECONDS_PER_RUN}s" --latency \
    -s "$ROOT/bench/wrk/check.lua" "$SERVER_URL" -- "$n" scale >"$OUT/wrk-room-$n.txt"
  t1="$(run_ns "$pid")"
  python3 - "$OUT/wrk-room-$n.txt" "$n" "$t0" "$t1" "$rss0" "$rss1" <<'PY' | tee -a "$OUT/rows.jsonl"
import json, re, sys
path, n, t0, t1, rss0, rss1 = sys.argv[1:]
j = next(json.loads(l) for l in open(path) if l.startswith('{"tool":"wrk"'))
n = int(n)
print(json.dumps({"kind": "room", "size": n, "per_s": j["requests_per_s"], "p99_ms": j.get("p99_ms"),
                  "server_us": round((int(t1) - int(t0)) / 1e3 / max(1, j["requests"]), 2),
                  "rss_bytes_per_item": round((int(rss1) - int(rss0)) * 1024 / n, 1)}))
PY
  cleanup
done

for n in $SIZES; do
  echo "== queues: $n ready jobs"
  start_server "$OUT/serve-queue-$n.log" "$(nproc)"
  pid="${PIDS[-1]}"
  rss0="$(rss_kb "$pid")"
  timeout 900 python3 - "$SERVER_URL" "$n" <<'PY'
import http.client, json, sys, urllib.parse
url, n = sys.argv[1], int(sys.argv[2])
u = urllib.parse.urlparse(url)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
done = 0
while done < n:
    k = min(1000, n - done)
    body = json.dumps({"jobs": [{"payload": {"filler": done + i}, "priority": -1} for i in range(k)]})
    c.request("POST", "/v1/queues/scale/jobs", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    if r.status != 201:
        sys.exit(f"prefill: {r.status}")
    done += k
PY
  rss1="$(rss_kb "$pid")"
  t0="$(run_ns "$pid")"
  line="$(timeout 180 "$TOOLS/client" "${SERVER_URL##*:}" 50000 1 4 100 scale 120000 ||
          echo '{"ok":false}')"
  t1="$(run_ns "$pid")"
  echo "$line" >"$OUT/client-queue-$n.json"
  python3 - "$line" "$n" "$t0" "$t1" "$rss0" "$rss1" <<'PY' | tee -a "$OUT/rows.jsonl"
import json, sys
line, n, t0, t1, rss0, rss1 = sys.argv[1:]
d = json.loads(line)
n = int(n)
print(json.dumps({"kind": "queue", "size": n, "ok": d.get("ok"), "per_s": d.get("rate"),
                  "server_us": round((int(t1) - int(t0)) / 1e3 / max(1, d.get("requests", 0)), 2),
                  "rss_bytes_per_item": round((int(rss1) - int(rss0)) * 1024 / n, 1)}))
PY
  cleanup
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
