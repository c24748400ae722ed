#!/usr/bin/env bash
# Durability benchmarks (results and how to read them: docs/benchmarks.md).
#
#   scripts/bench-durability.sh [--peers] [--no-build] [--build-dir DIR] [--out DIR] [--reps N]
#                               [--skip-throughput] [--skip-restart] [--skip-compaction]
#
#  1. builds anteroom and restart_bench,
#  2. throughput under each policy, in the same run, as a ratio to --memory-only:
#     `anteroom serve --threads 1` with --memory-only, --fsync no, everysec, always, and
#       queue-unbatched  push+fetch+ack, 1 job per request, pipelining 8 (4 producers, 4 workers)
#       queue-batched    100 jobs per request (2 producers, 4 workers, pipelining 2)
#       push-64          64 producers, one push of 1 job in flight each, no workers (group commit)
#       rooms            `anteroom-bench rooms`: 64 connections checking in, pipelining 4
#     each --reps times (default 3; medians),
#  3. p99 latency while compaction runs: a server holding 1M queued jobs, sent SIGUSR1 (snapshot
#     now) every 2 s during `bench rooms` (one request in flight per connection), against the same
#     without compaction,
#  4. restart time against state size: bench/restart_bench (recovery from the log alone and
#     from a snapshot, 100k jobs + 10k waiting sessions and 1M jobs + 100k waiting sessions),
#  5. with --peers, durable peers in the same run: beanstalkd in memory, with its binlog (fsync
#     every 50 ms) and with fsync on every write (-f0), against anteroom's beanstalkd-shape
#     workload; BullMQ end to end on Debian's redis-server with appendfsync everysec and always,
#     against anteroom's bullmq-shape workload; anteroom under everysec and always.
#
# Loopback only; every step is bounded by `timeout`; every process started here is stopped by
# its PID; data directories are temporary and removed. Raw outputs go to --out.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
BUILD_DIR="build/release"
OUT=""
REPS=3
RESTART=1
COMPACTION=1
THROUGHPUT=1
PEERS=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --skip-restart) RESTART=0 ;;
    --skip-compaction) COMPACTION=0 ;;
    --skip-throughput) THROUGHPUT=0 ;;
    --peers) PEERS=1 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "bench-durability.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-durability.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench restart_bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-durability.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine

# ---- throughput per policy -----------------------------------------------------------------------
declare -A QUEUE=(
  [queue-unbatched]="--jobs 200000 --producers 4 --workers 4 --batch 1 --pipeline 8"
  [queue-batched]="--jobs 1000000 --producers 2 --workers 4 --batch 100 --pipeline 2"
  [push-64]="--jobs 200000 --producers 64 --workers 0 --batch 1 --pipeline 1"
)
ROOMS="--sessions 20000 --capacity 1000 --connections 64 --pipeline 4 --duration 5"
for rep in $(seq "$((THROUGHPUT ? REPS : 0))"); do
  for mode in memory no everysec always; do
    if [[ $mode == memory ]]; then flags=(--memory-only); else flags=(--fsync "$mode"); fi
    start_server "$OUT/serve-$mode.log" 1 "${flags[@]}"
    for name in queue-unbatched queue-batched push-64; do
      # shellcheck disable=SC2086
      line="$(timeout 300 "$BENCH" queue --server "$SERVER_URL" --queue "$name" \
        ${QUEUE[$name]} --timeout 240 || true)"
      echo "{\"mode\":\"$mode\",\"workload\":\"$name\",\"result\":${line:-null}}" |
        tee -a "$OUT/throughput.jsonl"
    done
    # shellcheck disable=SC2086
    line="$(timeout 120 "$BENCH" rooms --server "$SERVER_URL" --room bench $ROOMS || true)"
    echo "{\"mode\":\"$mode\",\"workload\":\"rooms\",\"result\":${line:-null}}" |
      tee -a "$OUT/throughput.jsonl"
    cleanup
  done
done

# ---- p99 while compaction runs ----------------------------------------------------------------------
if [[ $COMPACTION -eq 1 ]]; then
  for compact in off on; do
    if [[ $compact == on ]]; then min=1; else min=1048576; fi
    start_server "$OUT/serve-compact-$compact.log" 1 --fsync everysec --compact-min-mb "$min" \
      --log-level info
    timeout 300 "$BENCH" queue --server "$SERVER_URL" --queue preload --jobs 1000000 \
      --producers 2 --workers 0 --batch 1000 --pipeline 2 --timeout 240 >/dev/null || true
    # With compaction on, SIGUSR1 asks for a snapshot (~150 MB) every 2 s during the measurement.
    if [[ $compact == on ]]; then
      (for _ in 1 2 3 4; do sleep 2; kill -USR1 "${PIDS[-1]}" 2>/dev/null || true; done) &
      KICKER=$!
    fi
    line="$(timeout 120 "$BENCH" rooms --server "$SERVER_URL" --room compact --sessions 20000 \
      --capacity 1000 --connections 32 --pipeline 1 --duration 10 || true)"
    if [[ $compact == on ]]; then wait "$KICKER" || true; fi
    snaps="$(grep -c 'compaction: snapshot' "$OUT/serve-compact-$compact.log" || true)"
    pause="$( (grep -o 'paused [0-9.]* ms' "$OUT/serve-compact-$compact.log" || true) | awk '{print $2}' |
      sort -n | tail -1 || true)"
    echo "{\"compaction\":\"$compact\",\"snapshots\":${snaps:-0},\"max_pause_ms\":${pause:-0},\"result\":${line:-null}}" |
      tee -a "$OUT/compaction.jsonl"
    cleanup
  done
fi

# ---- restart time ---------------------------------------------------------------------------------
if [[ $RESTART -eq 1 ]]; then
  ANTEROOM_BENCH_DIR="$(mktemp -d /tmp/anteroom-restart.XXXXXX)"
  DATA_DIRS+=("$ANTEROOM_BENCH_DIR")
  ANTEROOM_BENCH_DIR="$ANTEROOM_BENCH_DIR" timeout 900 "$ROOT/$BUILD_DIR/bench/restart_bench" \
    --benchmark_format=json --benchmark_out="$OUT/restart.json" | tee "$OUT/restart.txt"
fi

# ---- durable peers ----------------------------------------------------------------------------------
if [[ $PEERS -eq 1 ]]; then
  echo "== peers, copied from /work/shared/peers"
  need beanstalkd beanstalkd
  need redis-server redis-server redis-tools
  prepare_peers
  declare -A SHAPES=(
    [beanstalkd-shape]="--jobs 200000 --producers 1 --pipeline 64 --workers 4 --worker-pipeline 1 --batch 1"
    [bullmq-shape]="--jobs 200000 --producers 1 --workers 4 --push-batch 100 --batch 1 --pipeline 8"
  )
  for rep in $(seq "$REPS"); do
    for mode in everysec always; do
      start_server "$OUT/serve-peer-$mode.log" 1 --fsync "$mode"
      for name in beanstalkd-shape bullmq-shape; do
        # shellcheck disable=SC2086
        line="$(timeout 300 "$BENCH" queue --server "$SERVER_URL" --queue "$name" \
          ${SHAPES[$name]} --timeout 240 || true)"
        echo "{\"mode\":\"$mode\",\"workload\":\"$name\",\"result\":${line:-null}}" |
          tee -a "$OUT/peer-shapes.jsonl"
      done
      cleanup
    done
    for fsync in everysec always; do
      aof="$(mktemp -d /tmp/anteroom-redis-aof.XXXXXX)"
      DATA_DIRS+=("$aof")
      REDIS_PORT="$(free_port)"
      redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly yes \
        --appendfsync "$fsync" --dir "$aof" --daemonize no >"$OUT/redis-$fsync.log" 2>&1 &
      PIDS+=("$!")
      for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
      (cd "$PEER_DIR" && timeout 200 node bench-bullmq-e2e.js --port "$REDIS_PORT" --n 100000 \
        --limit-ms 150000 || true) |
        python3 -c 'import json,sys
for l in sys.stdin:
    l = l.strip()
    if l.startswith("{"):
        j = json.loads(l); j["appendfsync"] = sys.argv[1]; print(json.dumps(j))' "$fsync" |
        tee -a "$OUT/bullmq-aof.jsonl"
      cleanup
    done
  done
  (cd "$PEER_DIR" && timeout 600 node bench-beanstalkd.js mem binlog fsync0) | tee "$OUT/beanstalkd.txt"
  cp "$PEER_DIR"/results/beanstalkd-*.json "$OUT/" 2>/dev/null || true
  rm -rf "$PEER_DIR"
fi

# ---- summary ---------------------------------------------------------------------------------------
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
def lines(name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(l) for l in f if l.strip().startswith("{")]
    except OSError:
        return []
rate = {}
for j in lines("throughput.jsonl"):
    r = j.get("result") or {}
    v = r.get("jobs_per_s", r.get("checks_per_s"))
    if v:
        rate.setdefault((j["workload"], j["mode"]), []).append((v, r.get("p99_ms", r.get("push_to_fetch_p99_ms"))))
print("\n== throughput (median of runs; ratio to --memory-only in the same run)")
print(f"{'workload':16s} {'memory':>10s} {'no':>16s} {'everysec':>16s} {'always':>16s}")
for w in ("queue-unbatched", "queue-batched", "push-64", "rooms"):
    base = rate.get((w, "memory"))
    if not base:
        continue
    b = statistics.median(x[0] for x in base)
    cells = [f"{b:10.0f}"]
    for m in ("no", "everysec", "always"):
        xs = rate.get((w, m))
        if not xs:
            cells.append(f"{'-':>16s}")
            continue
        v = statistics.median(x[0] for x in xs)
        cells.append(f"{v:9.0f} x{v / b:4.2f}")
    print(f"{w:16s} " + " ".join(cells))
for j in lines("compaction.jsonl"):
    r = j.get("result") or {}
    print(f"compaction {j['compaction']:3s}: {j['snapshots']} snapshots (longest fork pause "
          f"{j['max_pause_ms']} ms); rooms checks {r.get('checks_per_s')}/s, p50 {r.get('p50_ms')} ms, "
          f"p99 {r.get('p99_ms')} ms, max {r.get('max_ms')} ms")
shape = {}
for j in lines("peer-shapes.jsonl"):
    r = j.get("result") or {}
    if r.get("jobs_per_s"):
        shape.setdefault((j["workload"], j["mode"]), []).append(r["jobs_per_s"])
def sm(w, m):
    xs = shape.get((w, m))
    return statistics.median(xs) if xs else None
for fsync in ("everysec", "always"):
    xs = [j["rate"] for j in lines("bullmq-aof.jsonl") if j.get("ok") and j.get("appendfsync") == fsync]
    a = sm("bullmq-shape", fsync)
    if xs and a:
        b = statistics.median(xs)
        print(f"BullMQ e2e on Redis appendfsync {fsync}: {b:.0f} jobs/s; anteroom --fsync {fsync} "
              f"bullmq-shape {a:.0f} jobs/s: x{a / b:.2f}")
import glob
for path in glob.glob(os.path.join(out, "beanstalkd-*.json")):
    res = json.load(open(path))["results"]
    for mode, r in res.items():
        comb = r["combined"]["median"]
        ours = sm("beanstalkd-shape", "always" if mode == "fsync0" else "everysec")
        if ours:
            print(f"beanstalkd[{mode}] put-then-drain {comb:.0f} jobs/s; anteroom beanstalkd-shape "
                  f"--fsync {'always' if mode == 'fsync0' else 'everysec'} {ours:.0f} jobs/s: x{ours / comb:.2f}")
try:
    res = json.load(open(os.path.join(out, "restart.json")))["benchmarks"]
    for b in res:
        print(f"restart {b['name']}: {b['real_time']:.0f} ms (log {b.get('log_MB', 0):.1f} MB, "
              f"snapshot {b.get('snapshot_MB', 0):.1f} MB)")
except (OSError, KeyError, ValueError):
    pass
PY
echo "== done; raw results in $OUT"
