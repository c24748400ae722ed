#!/usr/bin/env bash
# The live channel under load (results and how to read them: docs/benchmarks.md,
# "Live channel (WebSocket push)").
#
#   scripts/bench-live.sh [--quick] [--no-build] [--build-dir DIR] [--out DIR] [--sizes "N ..."]
#                         [--redis S]
#
# For each N (default 1000 10000 100000; --quick: 1000 only) a fresh
# `anteroom serve --memory-only --listen 127.0.0.1:0 --max-connections 250000` (stopped by its
# PID) and `anteroom-bench live -n N --server-pid PID --json`: N WebSocket clients waiting on one
# room, admissions at RATE/s for SECONDS s, delay from each change to each client's updated
# position, server memory per live connection. Writes results.md (a Markdown table) to --out.
#
# The file-descriptor limit is raised for this shell only (ulimit; the hard limit too when
# running as root). No system setting is changed: connections are spread over the source
# addresses 127.0.0.1, 127.0.0.2, ... instead of widening the ephemeral port range.
# --redis S: beyond one process. One Debian redis-server and S `anteroom serve --store redis://...`
# processes on it (each --threads SERVER_THREADS, default 1 here), and `bench live --processes S
# --servers ...`: S generator processes, part i connecting to server i. Each process holds N/S
# connections, under the per-process fd limit (N = 100000 with S = 6 here: 16,667 each). Adds
# Redis's CPU per change (its schedstat over the admissions) and the delay to the last client.
# Default sizes in this mode: 100000.
# Environment: RATE (admissions/s, default 10), SECONDS_OF_ADMISSIONS (default 10), CAPACITY
# (default 10), SERVER_THREADS (default 2), CLIENT_THREADS (default 2), CONNECT_RATE (default
# 5000/s), LIVE_TICK_MS (the server's --live-tick-ms, default: the server's).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

SIZES="1000 10000 100000"
BUILD=1
BUILD_DIR="build/release"
OUT=""
REDIS_SERVERS=0
SIZES_GIVEN=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) SIZES="1000" ;;
    --sizes) SIZES="$2"; SIZES_GIVEN=1; shift ;;
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --redis) REDIS_SERVERS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench-live.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $REDIS_SERVERS -gt 0 && $SIZES_GIVEN -eq 0 ]]; then SIZES="100000"; fi
PROCS=$(( REDIS_SERVERS > 0 ? REDIS_SERVERS : 1 ))
RATE="${RATE:-10}"
SECONDS_OF_ADMISSIONS="${SECONDS_OF_ADMISSIONS:-10}"
CAPACITY="${CAPACITY:-10}"
if [[ $REDIS_SERVERS -gt 0 ]]; then SERVER_THREADS="${SERVER_THREADS:-1}"; CLIENT_THREADS="${CLIENT_THREADS:-1}"; fi
SERVER_THREADS="${SERVER_THREADS:-2}"
CLIENT_THREADS="${CLIENT_THREADS:-2}"
CONNECT_RATE="${CONNECT_RATE:-5000}"
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-live.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

# ---- file descriptors: each connection is one on each side --------------------------------------
WANT_FDS=250000
if [[ "$(ulimit -Hn)" != "unlimited" && "$(ulimit -Hn)" -lt $WANT_FDS ]]; then
  ulimit -Hn "$WANT_FDS" 2>/dev/null || echo "bench-live.sh: cannot raise the hard fd limit (needs CAP_SYS_RESOURCE)"
fi
HARD="$(ulimit -Hn)"
if [[ "$HARD" == "unlimited" || "$HARD" -ge $WANT_FDS ]]; then ulimit -n "$WANT_FDS"; else ulimit -n "$HARD"; fi
FDS="$(ulimit -n)"
echo "== file descriptors: $FDS"

# ---- build -----------------------------------------------------------------------------------------
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench loopback_floor; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-live.sh: build $BUILD_DIR first" >&2; exit 1; }

record_machine

# ---- runs ------------------------------------------------------------------------------------------
SERVE_FLAGS=(--memory-only --max-connections 250000)
if [[ -n "${LIVE_TICK_MS:-}" ]]; then SERVE_FLAGS+=(--live-tick-ms "$LIVE_TICK_MS"); fi
RUN_SIZES=()
for n in $SIZES; do
  if (( n / PROCS + 500 > FDS )); then
    # Each side holds one descriptor per connection and the hard limit could not be raised
    # (no CAP_SYS_RESOURCE, e.g. in a container): the largest N that fits instead.
    fit=$(( (FDS - 500) * PROCS / 1000 * 1000 ))
    echo "-- N=$n needs $((n / PROCS + 500)) file descriptors per process, the limit is $FDS:" \
      "running N=$fit instead" | tee "$OUT/live-$n.skipped"
    n=$fit
  fi
  [[ " ${RUN_SIZES[*]} " == *" $n "* ]] || RUN_SIZES+=("$n")
done
for n in "${RUN_SIZES[@]}"; do
  MULTI=()
  if [[ $REDIS_SERVERS -gt 0 ]]; then
    start_redis "$OUT/redis-$n.log"
    REDIS_PID="${PIDS[-1]}"
    urls=() pids=()
    for i in $(seq "$REDIS_SERVERS"); do
      start_store_server "$OUT/serve-$n-$i.log" "$SERVER_THREADS" "redis://127.0.0.1:$REDIS_PORT" \
        "${SERVE_FLAGS[@]:1}"
      urls+=("$SERVER_URL") pids+=("${PIDS[-1]}")
    done
    echo "== N=$n: $REDIS_SERVERS x anteroom serve --threads $SERVER_THREADS on redis-server" \
      "(pid $REDIS_PID), $PROCS generator processes"
    MULTI=(--servers "$(IFS=,; echo "${urls[*]}")" --processes "$PROCS" --redis-pid "$REDIS_PID")
    SERVER_URL="${urls[0]}"
    SERVER_PIDS="$(IFS=,; echo "${pids[*]}")"
  else
    echo "== N=$n: anteroom serve --threads $SERVER_THREADS ${SERVE_FLAGS[*]}"
    start_server "$OUT/serve-$n.log" "$SERVER_THREADS" "${SERVE_FLAGS[@]}"
    SERVER_PIDS="${PIDS[-1]}"
  fi
  echo "server: $SERVER_URL (pid $SERVER_PIDS); load: $(cut -d' ' -f1-3 /proc/loadavg)"
  cut -d' ' -f1-3 /proc/loadavg >"$OUT/load-$n.txt"
  # Opening N connections takes N/CONNECT_RATE s; admissions and the last pushes take less
  # than a minute more.
  limit=$(( n / CONNECT_RATE * 3 + SECONDS_OF_ADMISSIONS + 240 ))
  WATCHER=""
  if [[ $REDIS_SERVERS -gt 0 ]]; then
    # Redis's time per script op over the admissions alone: every call goes to the slow log
    # (threshold 0) from the moment the bench says the admissions start until they are done.
    (
      r=(redis-cli -p "$REDIS_PORT")
      wait_for() { for _ in $(seq 12000); do grep -q "$1" "$OUT/live-$n.err" 2>/dev/null && return; sleep 0.05; done; }
      wait_for "admissions from"
      "${r[@]}" config set slowlog-max-len 1000000 >/dev/null
      "${r[@]}" slowlog reset >/dev/null
      "${r[@]}" config set slowlog-log-slower-than 0 >/dev/null
      wait_for "pushes done"
      "${r[@]}" config set slowlog-log-slower-than 10000 >/dev/null
      "${r[@]}" slowlog get 1000000 >"$OUT/slowlog-$n.txt"
      "${r[@]}" slowlog reset >/dev/null
    ) &
    WATCHER=$!
  fi
  set +e
  timeout "$limit" "$BENCH" live --server "$SERVER_URL" -n "$n" --capacity "$CAPACITY" \
    --rate "$RATE" --duration "$SECONDS_OF_ADMISSIONS" --threads "$CLIENT_THREADS" \
    --connect-rate "$CONNECT_RATE" --server-pid "$SERVER_PIDS" "${MULTI[@]}" --json \
    >"$OUT/live-$n.json" 2>"$OUT/live-$n.err"
  rc=$?
  if [[ -n "$WATCHER" ]]; then kill "$WATCHER" 2>/dev/null; wait "$WATCHER" 2>/dev/null; fi
  set -e
  cat "$OUT/live-$n.err" >&2
  cat "$OUT/live-$n.json"
  echo " load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/load-$n.txt"
  [[ $rc -eq 0 ]] || echo "-- N=$n: bench live exited $rc"
  cleanup
done

# ---- the floor: the kernel alone, one message to each of N loopback connections ------------------
FLOOR="$ROOT/$BUILD_DIR/bench/loopback_floor"
if [[ -x "$FLOOR" ]]; then
  n="${RUN_SIZES[-1]}"
  echo "== floor: loopback_floor $n 2 5 (2 sender threads, one reader; no anteroom code)"
  "$FLOOR" "$n" 2 5 180 | tee "$OUT/floor.txt"
fi

# ---- the table -------------------------------------------------------------------------------------
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" "${RUN_SIZES[*]}" <<'PY'
import json, os, sys
out, sizes = sys.argv[1], sys.argv[2].split()
rows = []
for n in sizes:
    path = os.path.join(out, f"live-{n}.json")
    try:
        j = json.loads(open(path).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        rows.append(f"| {n} | (no result: see live-{n}.err) |||||||||")
        continue
    load = open(os.path.join(out, f"load-{n}.txt")).read().split()[:3]
    target = "met" if j["max_ms"] <= 1000 and j["wrong_positions"] == 0 else "MISSED"
    rows.append(
        f"| {j['connections']:,} | {j['changes']} at {j['rate']:g}/s | {j['samples']:,} | "
        f"{j['p50_ms']:.0f} | {j['p99_ms']:.0f} | {j['max_ms']:.0f} ({target}) | "
        f"{j['messages_per_s']:,.0f} | {j['server_bytes_per_connection']:,.0f} | "
        f"{j['generator_rss_kb'] / 1024:,.0f} | {j['wrong_positions']} | {j['fill_s']:.1f} | "
        f"{' '.join(load)} |")
table = "\n".join([
    "| N | changes | delay samples | p50 ms | p99 ms | max ms (1 s target) | messages/s | "
    "server bytes/conn | generator MiB | wrong | open s | load before |",
    "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
] + rows)
more = []
for n in sizes:
    try:
        j = json.loads(open(os.path.join(out, f"live-{n}.json")).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        continue
    redis = (f"{j['redis_cpu_s'] * 1e3 / j['changes']:.1f}"
             if j.get("redis_cpu_s", -1) >= 0 and j["changes"] else "")
    per_msg = (f"{j['server_cpu_s'] * 1e6 / j['messages']:.1f}"
               if j["server_cpu_s"] >= 0 and j["messages"] else "")
    more.append(
        f"| {j['connections']:,} | {j.get('servers', 1)} / {j.get('processes', 1)} | "
        f"{j.get('last_client_p50_ms', 0):.0f} / {j.get('last_client_p99_ms', 0):.0f} / "
        f"{j.get('last_client_max_ms', 0):.0f} | {j['fanout_p50_ms']:.0f} | {per_msg} | {redis} |")
table += "\n\n" + "\n".join([
    "| N | servers / generator processes | last client per change p50 / p99 / max ms | "
    "fan-out p50 ms | server CPU us per message | Redis CPU ms per change |",
    "|---:|---|---|---:|---:|---:|",
] + more)
# Redis's own time per script op during the admissions (bench-live.sh --redis: SLOWLOG at 0).
import collections
ops = []
for n in sizes:
    path = os.path.join(out, f"slowlog-{n}.txt")
    if not os.path.exists(path):
        continue
    try:
        j = json.loads(open(os.path.join(out, f"live-{n}.json")).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        continue
    lines = open(path, "rb").read().decode("latin-1").split("\n")
    calls, usec = collections.Counter(), collections.Counter()
    for i, line in enumerate(lines):
        if line.upper() != "FCALL" or i < 1 or not lines[i - 1].isdigit() or not lines[i + 2].isdigit():
            continue
        fn = lines[i + 1].rsplit("_", 1)[0]  # anteroom_<script>_<hash of its code>
        op = fn + (" " + lines[i + 3 + int(lines[i + 2])] if fn == "anteroom_room" else "")
        calls[op] += 1
        usec[op] += int(lines[i - 1])
    k = max(1, j["changes"])
    for op in sorted(calls, key=lambda o: -usec[o]):
        ops.append(f"| {j['connections']:,} | {op} | {calls[op]:,} | {usec[op] / 1e3:,.1f} | "
                   f"{usec[op] / calls[op]:,.1f} | {usec[op] / 1e3 / k:,.2f} |")
if ops:
    table += "\n\n" + "\n".join([
        "| N | script op (during the admissions) | calls | Redis ms | us per call | Redis ms per change |",
        "|---:|---|---:|---:|---:|---:|",
    ] + ops)
open(os.path.join(out, "results.md"), "w").write(table + "\n")
print("\n" + table)
PY
echo "== done; raw results in $OUT"
