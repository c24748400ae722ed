#!/usr/bin/env bash
# The worker loop people write (and the durable default): one request in
# flight per connection, against the machine's physical limit and BullMQ, in one run.
#
#   scripts/bench-worker-loop.sh [--no-build] [--rounds N] [--jobs N] [--no-bullmq] [--out DIR]
#
# Each round (default 3, alternating, so drift hits every contender alike) runs, with the C
# client of ../shared/peers (bench-anteroom-queue.c: 1 producer pushing batches of 100 while 4
# workers loop fetch {"max":1,"wait_ms":1000,"lease_ms":30000} then ack):
#   limit     the stand-in server that answers at once and does no work (instant-queue-server.c)
#   durable   `anteroom serve` as installed: embedded backend, fsync everysec, one thread per core
#   memory    the same with --memory-only
#   always    the same with --fsync always
# once with the ack as its own request (plain) and once riding on the next fetch (RIDE=1: one
# request per job), plus BullMQ end to end (bench-bullmq-e2e.js: addBulk(100) + one Worker,
# concurrency 50) on a fresh Debian redis-server. Then 64 producers pushing one job per request
# (`anteroom-bench queue`), --fsync always against --memory-only. Last, one pass of each
# worker-loop shape under `strace -c -f` on the default server: syscalls per request.
#
# Medians of the rounds and the ratios go to stdout and OUT/summary.txt; raw lines to OUT.
# Loopback only; every step is bounded by `timeout`; every process is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
ROUNDS=3
JOBS=50000
BULLMQ=1
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --no-bullmq) BULLMQ=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "bench-worker-loop.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-loop.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
BUILD_DIR="build/release"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-worker-loop.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine

need cc gcc
need strace strace
TOOLS="$(mktemp -d /tmp/anteroom-loop-tools.XXXXXX)"
trap 'cleanup; rm -rf "$TOOLS"' EXIT  # cleanup runs between steps too: the tools outlive it
cc -O2 -pthread -o "$TOOLS/client" /work/shared/peers/bench-anteroom-queue.c
cc -O2 -o "$TOOLS/instant" /work/shared/peers/instant-queue-server.c

# show NAME KEY < JSONL: the last line's figure.
show() {
  tail -1 | python3 -c '
import json, sys
d = json.loads(sys.stdin.read() or "{}")
print("   %-18s %9.0f jobs/s  server %s cores" % (sys.argv[1], float(d.get(sys.argv[2]) or 0),
                                                d.get("server_cores", "-")))' "$1" "$2"
}

# run_client NAME RIDE PORT: one measurement, appended to OUT/NAME.jsonl, with the server's CPU.
run_client() {
  local name="$1" ride="$2" port="$3" t0 t1 s0 s1 line
  t0="$(run_ns "${PIDS[-1]}")"
  s0="$(date +%s.%N)"
  line="$(RIDE="$ride" timeout 120 "$TOOLS/client" "$port" "$JOBS" 1 4 100 "loop-$RANDOM" 60000 ||
          echo '{"ok":false}')"
  s1="$(date +%s.%N)"
  t1="$(run_ns "${PIDS[-1]}")"
  python3 - "$line" "$t0" "$t1" "$s0" "$s1" >>"$OUT/$name.jsonl" <<'PY'
import json, sys
line, t0, t1, s0, s1 = sys.argv[1:]
d = json.loads(line)
wall = float(s1) - float(s0)
d["server_cores"] = round((int(t1) - int(t0)) / 1e9 / wall, 3) if wall > 0 else None
if d.get("requests") and d.get("elapsed_ms"):  # server CPU per request, over the client's window
    d["server_us_per_request"] = round((int(t1) - int(t0)) / 1e3 / d["requests"], 2)
print(json.dumps(d))
PY
  show "$name" rate <"$OUT/$name.jsonl"
}

serve_port() { echo "${SERVER_URL##*:}"; }

measure_anteroom() {  # measure_anteroom NAME RIDE [SERVE-FLAGS...]
  local name="$1" ride="$2"
  shift 2
  start_server "$OUT/serve-$name.log" "$(nproc)" "$@"
  run_client "$name" "$ride" "$(serve_port)"
  cleanup
}

measure_limit() {  # measure_limit NAME RIDE
  local port
  port="$(free_port)"
  "$TOOLS/instant" "$port" "$JOBS" >"$OUT/instant.log" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  run_client "$1" "$2" "$port"
  cleanup
}

if [[ $BULLMQ -eq 1 ]]; then prepare_peers; fi

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS"
  for ride in 0 1; do
    shape=$([[ $ride -eq 1 ]] && echo ride || echo plain)
    measure_limit "limit-$shape" "$ride"
    measure_anteroom "durable-$shape" "$ride"
    measure_anteroom "memory-$shape" "$ride" --memory-only
    measure_anteroom "always-$shape" "$ride" --fsync always
  done
  if [[ $BULLMQ -eq 1 ]]; then
    start_redis "$OUT/redis.log"
    (cd "$PEER_DIR" && timeout 180 node bench-bullmq-e2e.js --port "$REDIS_PORT" --n "$JOBS" \
      --limit-ms 120000 || echo '{"ok":false}') | tail -1 >>"$OUT/bullmq.jsonl"
    show bullmq rate <"$OUT/bullmq.jsonl"
    cleanup
  fi
  # 64 producers, one job per push: what group commit buys under `always`.
  for mode in always memory; do
    flags=(--fsync always)
    [[ $mode == memory ]] && flags=(--memory-only)
    start_server "$OUT/serve-p64-$mode.log" "$(nproc)" "${flags[@]}"
    timeout 180 "$BENCH" queue --server "$SERVER_URL" --jobs 50000 --producers 64 \
      --workers 0 --batch 1 --pipeline 1 --threads 2 --timeout 150 >>"$OUT/p64-$mode.jsonl" ||
      echo '{"ok":false}' >>"$OUT/p64-$mode.jsonl"
    show "p64-$mode" jobs_per_s <"$OUT/p64-$mode.jsonl"
    cleanup
  done
done

# ---- syscalls per request on the default server ----------------------------------------------
echo "== syscalls per request (strace -c -f; one pass each, 20000 jobs: strace slows everything)"
for ride in 0 1; do
  shape=$([[ $ride -eq 1 ]] && echo ride || echo plain)
  start_server "$OUT/serve-strace-$shape.log" "$(nproc)"
  server_pid="${PIDS[-1]}"
  timeout 120 strace -c -f -p "$server_pid" -o "$OUT/strace-$shape.txt" &
  tracer=$!
  sleep 1
  line="$(RIDE="$ride" timeout 120 "$TOOLS/client" "$(serve_port)" 20000 1 4 100 "strace-$RANDOM" \
          100000 || echo '{"ok":false,"requests":0}')"
  echo "$line" >"$OUT/strace-$shape.json"
  cleanup  # stops the server; strace ends with it and writes its table
  wait "$tracer" 2>/dev/null || true
  python3 - "$OUT/strace-$shape.txt" "$line" "$shape" <<'PY' | tee -a "$OUT/syscalls.txt"
import json, sys
path, line, shape = sys.argv[1:]
requests = json.loads(line).get("requests", 0) or 1
rows = {}
for l in open(path):
    parts = l.split()
    if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] not in ("total",):
        rows[parts[-1]] = int(parts[3])
total = sum(rows.values())
top = ", ".join(f"{k} {v / requests:.2f}" for k, v in sorted(rows.items(), key=lambda kv: -kv[1])[:8])
print(f"{shape}: {total / requests:.2f} syscalls per request ({requests} requests): {top}")
PY
done

# ---- summary -------------------------------------------------------------------------------------
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, statistics, sys
out = sys.argv[1]
def med(name, key="rate"):
    path = os.path.join(out, name + ".jsonl")
    if not os.path.exists(path):
        return None
    vals = []
    for l in open(path):
        try:
            d = json.loads(l)
        except ValueError:
            continue
        ok = d.get("ok", d.get("errors", 1) == 0)  # `anteroom-bench queue` reports errors
        if ok and d.get(key):
            vals.append(float(d[key]))
    return statistics.median(vals) if vals else None
def fmt(v):
    return "-" if v is None else f"{v:,.0f}"
def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}"
bull = med("bullmq")
print("| shape | physical limit | durable (default) | memory-only | fsync always | durable / limit | durable / memory | durable / BullMQ |")
print("|---|---|---|---|---|---|---|---|")
for shape in ("plain", "ride"):
    lim, dur, mem, alw = (med(f"{k}-{shape}") for k in ("limit", "durable", "memory", "always"))
    print(f"| {shape} | {fmt(lim)} | {fmt(dur)} | {fmt(mem)} | {fmt(alw)} | {ratio(dur, lim)} | {ratio(dur, mem)} | {ratio(dur, bull)} |")
print(f"BullMQ end to end: {fmt(bull)} jobs/s")
print("server CPU per request (us, medians): " + ", ".join(
    f"{k}-{shape} {med(f'{k}-{shape}', 'server_us_per_request') or 0:.1f}"
    for shape in ("plain", "ride") for k in ("limit", "durable", "memory")))
a, m = med("p64-always", "jobs_per_s"), med("p64-memory", "jobs_per_s")
print(f"64 producers, one job per push: fsync always {fmt(a)}, memory-only {fmt(m)}: {ratio(a, m)}x")
PY
cat "$OUT/syscalls.txt" >>"$OUT/summary.txt"
