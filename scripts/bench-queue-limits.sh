#!/usr/bin/env bash
# What a queue's limits cost, and whether a binding one holds:
#
#   scripts/bench-queue-limits.sh [--no-build] [--rounds N] [--jobs N] [--hold-s S] [--out DIR]
#                                 [--shapes "plain limited ..."]
#
# Each round (default 3; the shapes' order flips every round, so drift hits all alike) runs the
# worker loop of `anteroom-bench queue` (1 producer pushing batches of 100, 4 workers fetching
# one job a request with the ack riding on the next fetch) on a fresh durable server
# (`anteroom serve`, fsync everysec, 2 threads), as:
#   plain      no settings, no group: the figure the others are held to
#   limited    a queue-wide and a per-group rate and concurrency configured, none binding
#              (1,000,000 a second, 10,000 / 1,000 in flight), jobs without a group
#   scheduled  the same limits, and 100 schedules on the queue (99 daily crons in zones, one
#              every minute), none due while the loop runs: what schedules cost a queue's fetches
#   workflow   the scheduled shape, and 1,000 jobs waiting on a job delayed by a day (every
#              workflow feature configured, none binding: what they cost the loop)
#   unkept     no settings but keep_acked count 0: acks keep no finished job (what the default
#              retention of 1,000 finished jobs costs plain)
#   groups-N   the same limits, the jobs spread over N groups (10, 1,000, 100,000), on top of a
#              backlog of 200,000 jobs pushed first over the same groups, so every fetch
#              chooses among N limited groups
# jobs/s and the server's CPU per job (schedstat ns / jobs: one fetch each, the ack riding on it), medians of the rounds and
# the ratio of each shape's to plain's in the same round (--shapes picks and orders them). Then
# once (unless --hold-s 0), a binding rate (1,000 jobs
# a second for the whole queue, burst 10) held for --hold-s seconds (default 60): the jobs
# handed out per second against 1,000.
#
# Loopback only; every step bounded by `timeout`; every process stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
ROUNDS=3
JOBS=50000
HOLD_S=60
OUT=""
SHAPES=(plain limited scheduled workflow unkept groups-10 groups-1000 groups-100000)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --hold-s) HOLD_S="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --shapes) read -r -a SHAPES <<<"$2"; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench-queue-limits.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-limits.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
BUILD_DIR="build/release"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"
record_machine

LIMITS='{"limits":[{"key":null,"rate":{"limit":1000000,"period_ms":1000},"concurrency":10000},
{"key":"group","rate":{"limit":1000000,"period_ms":1000},"concurrency":1000}]}'

settings() {  # settings QUEUE BODY
  curl -sf -X PUT -H 'Content-Type: application/json' --data "$2" \
    "$SERVER_URL/v1/queues/$1/settings" >/dev/null
}

# one SHAPE ROUND: one measurement, appended to OUT/rounds.jsonl.
one() {
  local shape="$1" round="$2" groups=0 q="limits-$RANDOM" t0 t1 line
  start_server "$OUT/serve-$shape-$round.log" 2
  case "$shape" in
    plain) ;;
    limited) settings "$q" "$LIMITS" ;;
    unkept) settings "$q" '{"keep_acked":{"count":0}}' ;;
    scheduled|workflow)
      settings "$q" "$LIMITS"
      for k in $(seq 99); do
        curl -sf -X PUT -H 'Content-Type: application/json' "$SERVER_URL/v1/schedules/$q-$k" \
          --data "{\"queue\":\"$q\",\"cron\":\"$((k % 60)) 3 * * *\",\"tz\":\"Europe/Berlin\",\"job\":{\"payload\":$k}}" >/dev/null
      done
      curl -sf -X PUT -H 'Content-Type: application/json' "$SERVER_URL/v1/schedules/$q-minute" \
        --data "{\"queue\":\"$q\",\"every_ms\":60000,\"start_at\":$(( $(date +%s%3N) + 3600000 )),\"job\":{\"payload\":0}}" >/dev/null
      if [[ $shape == workflow ]]; then
        local first
        first="$(curl -sf -X POST -H 'Content-Type: application/json' "$SERVER_URL/v1/queues/$q/jobs" \
          --data '{"payload":"later","delay_ms":86400000}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
        python3 - "$first" >"$OUT/waiting.json" <<'PY'
import json, sys
print(json.dumps({"jobs": [{"payload": k, "depends_on": [sys.argv[1]]} for k in range(1000)]}))
PY
        curl -sf -X POST -H 'Content-Type: application/json' "$SERVER_URL/v1/queues/$q/jobs" \
          --data @"$OUT/waiting.json" >/dev/null
      fi
      ;;
    groups-*)
      groups="${shape#groups-}"
      settings "$q" "$LIMITS"
      timeout 300 "$BENCH" queue --server "$SERVER_URL" --queue "$q" --jobs 200000 \
        --workers 0 --push-batch 1000 --groups "$groups" >"$OUT/prefill-$shape-$round.json"
      ;;
  esac
  t0="$(run_ns "${PIDS[-1]}")"
  line="$(timeout 300 "$BENCH" queue --server "$SERVER_URL" --queue "$q" --jobs "$JOBS" \
          --workers 4 --push-batch 100 --batch 1 --groups "$groups" || true)"
  t1="$(run_ns "${PIDS[-1]}")"
  cleanup
  python3 - "$line" "$t0" "$t1" "$shape" "$round" <<'PY' | tee -a "$OUT/rounds.jsonl"
import json, sys
line, t0, t1, shape, rnd = sys.argv[1:]
d = json.loads(line.strip().splitlines()[-1] if line.strip() else "{}")
rate = float(d.get("jobs_per_s") or 0)
jobs = d.get("jobs") or 0
cpu = (int(t1) - int(t0)) / 1e3 / jobs if jobs else None
print(json.dumps({"shape": shape, "round": int(rnd), "jobs_per_s": rate,
                  "server_us_per_job": round(cpu, 2) if cpu else None, "raw": d}))
PY
}

for round in $(seq "$ROUNDS"); do
  order=("${SHAPES[@]}")
  if (( round % 2 == 0 )); then order=(); for ((k=${#SHAPES[@]}-1; k>=0; k--)); do order+=("${SHAPES[k]}"); done; fi
  echo "== round $round of $ROUNDS (${order[*]})"
  for shape in "${order[@]}"; do one "$shape" "$round"; done
done

# The binding rate: 1,000 a second for the queue, burst 10, for HOLD_S seconds of jobs.
if (( HOLD_S > 0 )); then
start_server "$OUT/serve-hold.log" 2
q="hold-$RANDOM"
settings "$q" '{"limits":[{"key":null,"rate":{"limit":1000,"period_ms":1000,"burst":10}}]}'
start_ns="$(date +%s%N)"
hold_line="$(timeout $((HOLD_S * 3 + 60)) "$BENCH" queue --server "$SERVER_URL" --queue "$q" \
  --jobs $((HOLD_S * 1000 + 10)) --workers 4 --push-batch 100 --batch 10 --timeout $((HOLD_S * 3 + 30)) \
  || true)"
end_ns="$(date +%s%N)"
cleanup
echo "$hold_line" >"$OUT/hold.json"
else
  echo "" >"$OUT/hold.json"; start_ns=0; end_ns=0
fi

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT/rounds.jsonl" "$OUT/hold.json" "$HOLD_S" "$start_ns" "$end_ns" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
shapes = []
for r in rows:
    if r["shape"] not in shapes: shapes.append(r["shape"])
plain = {r["round"]: r for r in rows if r["shape"] == "plain"}
print(f"{'shape':>14} {'jobs/s':>10} {'server us/job':>14} {'ratio to plain':>15}  (rounds)")
for s in shapes:
    rs = [r for r in rows if r["shape"] == s]
    rate = statistics.median(r["jobs_per_s"] for r in rs)
    cpus = [r["server_us_per_job"] for r in rs if r["server_us_per_job"]]
    cpu = statistics.median(cpus) if cpus else float("nan")
    ratios = [r["jobs_per_s"] / plain[r["round"]]["jobs_per_s"] for r in rs
              if r["round"] in plain and plain[r["round"]]["jobs_per_s"] > 0]
    ratio = statistics.median(ratios) if ratios else float("nan")
    print(f"{s:>14} {rate:>10.0f} {cpu:>14.2f} {ratio:>15.3f}  "
          + " ".join(f"{x:.3f}" for x in ratios))
hold_s, t0, t1 = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if hold_s == 0:
    sys.exit(0)
try:
    d = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
except Exception:
    d = {}
jobs = d.get("jobs") or 0
secs = d.get("duration_s") or (t1 - t0) / 1e9
rate = float(d.get("jobs_per_s") or 0)
print(f"binding rate 1000/s (burst 10) over {secs:.1f} s: {jobs} jobs, {rate:.1f} jobs/s, "
      f"{(rate - 1000) / 10:+.2f}% of the limit (the first 10 come at once)")
PY
