#!/usr/bin/env bash
# The launch as a benchmark (docs/benchmarks.md, "A drop over HTTP"): one
# `anteroom serve` as installed (embedded backend, durable, fsync everysec), and
# `anteroom-bench launch` driving a drop on it: N people arrive over A s into an event's
# pre-queue (one room, capacity 10,000), each checking in every C s; the start shuffles them;
# an admitted person leaves at their next check-in; mid-run the room goes random and back.
# Then the server is killed with SIGKILL and started again on its data: the restart's time to
# /readyz with everyone still waiting, and the room's counts after it.
# With --redis P: P processes on one redis-server instead (arrivals to the first, check-ins
# spread over all), Redis's CPU per answer reported, no restart.
#
#   scripts/bench-launch.sh [--no-build] [--people N] [--arrive-s A] [--checkin-s C]
#                           [--run-s R] [--redis P] [--out DIR] [-- more anteroom-bench launch flags]
#
# Loopback only; every step bounded by `timeout`; every process stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
PEOPLE=1000000
ARRIVE=60
CHECKIN=20
RUN=90
REDIS=0
OUT=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --people) PEOPLE="$2"; shift ;;
    --arrive-s) ARRIVE="$2"; shift ;;
    --checkin-s) CHECKIN="$2"; shift ;;
    --run-s) RUN="$2"; shift ;;
    --redis) REDIS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bench-launch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-launch.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
BUILD_DIR="build/release"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"
[[ -x "$BIN" && -x "$BENCH" ]] || { echo "bench-launch.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine

START=$(python3 -c "print($ARRIVE + max(10, $ARRIVE / 6))")
if [[ $REDIS -gt 0 ]]; then
  start_redis "$OUT/redis.log"
  redis_pid="${PIDS[-1]}"
  MORE=()
  for i in $(seq "$REDIS"); do
    start_store_server "$OUT/serve-$i.log" 2 "redis://127.0.0.1:$REDIS_PORT"
    if [[ $i -eq 1 ]]; then FIRST="$SERVER_URL"; else MORE+=(--check-server "$SERVER_URL"); fi
  done
  cpu0=$(run_ns "$redis_pid")
  set +e
  timeout $((${START%.*} + RUN + 120)) "$BENCH" launch --server "$FIRST" "${MORE[@]}" \
    --people "$PEOPLE" --arrive-s "$ARRIVE" --checkin-s "$CHECKIN" --start-after-s "$START" \
    --run-s "$RUN" "${EXTRA[@]}" | tee "$OUT/launch.json"
  rc=${PIPESTATUS[0]}
  set -e
  cpu1=$(run_ns "$redis_pid")
  python3 - "$OUT/launch.json" "$cpu0" "$cpu1" <<'PY' | tee "$OUT/redis.json"
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
cpu = (int(sys.argv[3]) - int(sys.argv[2])) / 1e9
print(json.dumps({"redis_cpu_s": round(cpu, 1), "redis_us_per_answer": round(cpu * 1e6 / max(1, j["answers"]), 1)}))
PY
  exit "$rc"
fi

start_server "$OUT/serve.log" 2
pid="${PIDS[-1]}"
data="$SERVER_DATA"
set +e
timeout $((${START%.*} + RUN + 120)) "$BENCH" launch --server "$SERVER_URL" --server-pid "$pid" \
  --people "$PEOPLE" --arrive-s "$ARRIVE" --checkin-s "$CHECKIN" --start-after-s "$START" \
  --run-s "$RUN" "${EXTRA[@]}" | tee "$OUT/launch.json"
rc=${PIPESTATUS[0]}
set -e

# The restart: SIGKILL, then the same data directory; the time until /readyz answers.
curl -fsS "$SERVER_URL/v1/rooms/launch" >"$OUT/room-before.json"
kill -KILL "$pid"
wait "$pid" 2>/dev/null || true
t0=$(date +%s%N)
start_server "$OUT/serve-again.log" 2 --data "$data"
for _ in $(seq 600); do
  curl -fsS "$SERVER_URL/readyz" >/dev/null 2>&1 && break
  sleep 0.01
done
t1=$(date +%s%N)
curl -fsS "$SERVER_URL/v1/rooms/launch" >"$OUT/room-after.json"
python3 - "$OUT" "$t0" "$t1" <<'PY' | tee "$OUT/restart.json"
import json, sys
out, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
before = json.load(open(f"{out}/room-before.json"))
after = json.load(open(f"{out}/room-after.json"))
print(json.dumps({"restart_to_ready_ms": round((t1 - t0) / 1e6),
                  "waiting_before": before["waiting"], "waiting_after": after["waiting"],
                  "active_before": before["active"], "active_after": after["active"]}))
PY
rm -rf "$data"
exit "$rc"
