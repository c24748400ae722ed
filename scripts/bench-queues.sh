#!/usr/bin/env bash
# Queue benchmarks (results and how to read them: docs/benchmarks.md).
#
#   scripts/bench-queues.sh [--peers] [--no-build] [--build-dir DIR] [--out DIR] [--reps N]
#                           [--server-threads N]
#
#  1. builds anteroom (the release preset, or DIR),
#  2. starts `anteroom serve --listen 127.0.0.1:0 --threads N` (default 1: the load generator
#     needs the other core; with 2, both I/O threads contend for the one queue's lock) and runs
#     `anteroom-bench queue`
#     (push + fetch + ack end to end over HTTP, client and server on the same cores):
#       unbatched      1 job per request, HTTP pipelining 8 (4 producers, 4 workers)
#       unbatched-p1   1 job per request, one request in flight per connection (4 + 16)
#       batched        100 jobs per request (2 producers, 4 workers, pipelining 2)
#       bullmq-shape   BullMQ's e2e workload: pushes of 100, workers take 1 job at a time
#       beanstalkd-shape  bench-beanstalkd.js's: 1 producer pipelining 64 single-job pushes,
#                      4 workers with one request in flight each (fetch carrying the last ack)
#       latency        push to fetch on an idle queue: 2000 jobs/s paced, 4 long-polling workers
#     each --reps times (default 3; the median is reported), plus server CPU per job,
#  3. with --peers: on the same machine, in the same run, BullMQ end to end (bench-bullmq-e2e.js
#     against Debian's redis-server on a free port) and beanstalkd (bench-beanstalkd.js, in
#     memory and with its binlog), from a copy of /work/shared/peers, and prints the ratios.
#
# Loopback only; every step is bounded by `timeout`; every process started here is stopped by
# its PID. Raw outputs go to --out (default: a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

PEERS=0
BUILD=1
BUILD_DIR="build/release"
OUT=""
REPS=3
SERVER_THREADS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --peers) PEERS=1 ;;
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --server-threads) SERVER_THREADS="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bench-queues.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-queues.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-queues.sh: build $BUILD_DIR first" >&2; exit 1; }

record_machine

# ---- anteroom ------------------------------------------------------------------------------------
declare -A WORKLOADS=(
  [unbatched]="--jobs 300000 --producers 4 --workers 4 --batch 1 --pipeline 8"
  [unbatched-p1]="--jobs 100000 --producers 4 --workers 16 --batch 1 --pipeline 1"
  [batched]="--jobs 2000000 --producers 2 --workers 4 --batch 100 --pipeline 2"
  [bullmq-shape]="--jobs 200000 --producers 1 --workers 4 --push-batch 100 --batch 1 --pipeline 8"
  [beanstalkd-shape]="--jobs 200000 --producers 1 --pipeline 64 --workers 4 --worker-pipeline 1 --batch 1"
  [latency]="--jobs 10000 --producers 1 --workers 4 --batch 1 --rate 2000"
)
echo "== anteroom serve --threads $SERVER_THREADS; anteroom-bench queue, ${REPS} runs each"
echo "server threads: $SERVER_THREADS" >>"$OUT/machine.txt"
start_server "$OUT/serve.log" "$SERVER_THREADS"
echo "server: $SERVER_URL"
HZ="$(getconf CLK_TCK)"
for name in unbatched unbatched-p1 batched bullmq-shape beanstalkd-shape latency; do
  for rep in $(seq "$REPS"); do
    t0="$(server_cpu_ticks)"
    # shellcheck disable=SC2086
    line="$(timeout 300 "$BENCH" queue --server "$SERVER_URL" --queue "$name-$rep" \
      ${WORKLOADS[$name]} --timeout 240 || true)"
    t1="$(server_cpu_ticks)"
    echo "$line" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read() or "{}") or {"error": "no answer"}
j["workload"], j["server_cpu_us_per_job"] = sys.argv[1], round(int(sys.argv[2]) / int(sys.argv[3]) * 1e6 / max(1, j.get("jobs", 1)), 2)
print(json.dumps(j))' "$name" "$((t1 - t0))" "$HZ" | tee -a "$OUT/anteroom.jsonl"
  done
done
cleanup

# ---- peers ---------------------------------------------------------------------------------------
if [[ $PEERS -eq 1 ]]; then
  echo "== peers, copied from /work/shared/peers"
  need beanstalkd beanstalkd
  prepare_peers
  start_redis "$OUT/redis.log"
  for rep in $(seq "$REPS"); do
    redis-cli -p "$REDIS_PORT" flushall >/dev/null
    (cd "$PEER_DIR" && timeout 120 node bench-bullmq-e2e.js --port "$REDIS_PORT" --n 100000 \
      --limit-ms 90000 || true) | tee -a "$OUT/bullmq-e2e.jsonl"
  done
  cleanup
  (cd "$PEER_DIR" && timeout 400 node bench-beanstalkd.js mem binlog) | tee "$OUT/beanstalkd.txt"
  cp "$PEER_DIR"/results/beanstalkd-*.json "$OUT/" 2>/dev/null || true
  rm -rf "$PEER_DIR"
fi

# ---- summary -------------------------------------------------------------------------------------
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
def lines(name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except OSError:
        return []
runs = {}
for j in lines("anteroom.jsonl"):
    runs.setdefault(j.get("workload"), []).append(j)
def med(name, key):
    xs = [r[key] for r in runs.get(name, []) if key in r]
    return statistics.median(xs) if xs else None
print("\n== summary (against the queue targets)")
for name, target in (("unbatched", 50e3), ("unbatched-p1", 50e3), ("batched", 500e3),
                     ("bullmq-shape", None), ("beanstalkd-shape", None)):
    rate = med(name, "jobs_per_s")
    if rate is None:
        continue
    ok = all(r.get("all_acked") and r.get("errors") == 0 for r in runs[name])
    verdict = "" if target is None else f" (target >= {target/1e3:.0f}k: {'met' if rate >= target else 'MISSED'})"
    print(f"{name:16s} {rate:9.0f} jobs/s{verdict}, push->fetch p99 {med(name, 'push_to_fetch_p99_ms'):.2f} ms, "
          f"server CPU {med(name, 'server_cpu_us_per_job'):.1f} us/job, all acked: {'yes' if ok else 'NO'}")
p50, p99 = med("latency", "push_to_fetch_p50_ms"), med("latency", "push_to_fetch_p99_ms")
if p99 is not None:
    print(f"latency       push->fetch on an idle queue: p50 {p50:.3f} ms, p99 {p99:.3f} ms "
          f"(target p99 < 2 ms: {'met' if p99 < 2 else 'MISSED'})")
bull = [j["rate"] for j in lines("bullmq-e2e.jsonl") if j.get("ok")]
if bull:
    b = statistics.median(bull)
    print(f"BullMQ e2e (addBulk 100, Worker concurrency 50): {b:.0f} jobs/s; "
          f"anteroom bullmq-shape x{med('bullmq-shape', 'jobs_per_s') / b:.2f}, "
          f"unbatched x{med('unbatched', 'jobs_per_s') / b:.2f}")
for path in glob.glob(os.path.join(out, "beanstalkd-*.json")):
    res = json.load(open(path))["results"]
    for mode, r in res.items():
        comb, cons = r["combined"]["median"], r["consume"]["median"]
        print(f"beanstalkd[{mode}] put-then-drain {comb:.0f} jobs/s (reserve+delete x4 {cons:.0f}/s); "
              f"anteroom beanstalkd-shape x{med('beanstalkd-shape', 'jobs_per_s') / comb:.2f}, "
              f"unbatched x{med('unbatched', 'jobs_per_s') / comb:.2f}, "
              f"unbatched-p1 x{med('unbatched-p1', 'jobs_per_s') / comb:.2f}")
PY
echo "== done; raw results in $OUT"
