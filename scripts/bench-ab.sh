#!/usr/bin/env bash
# Two builds of `anteroom` on the two hot paths, in alternation: did a change cost speed?
#
#   scripts/bench-ab.sh OLD-BINARY [NEW-BINARY] [--rounds N] [--jobs N] [--out DIR]
#
# NEW-BINARY defaults to build/release/anteroom. Each round runs, old then new (the order
# flips every round, so drift and warm caches hit both alike), on a fresh durable server
# (`anteroom serve`, fsync everysec, 2 threads):
#   worker loop  the C client of ../shared/peers (bench-anteroom-queue.c): 1 producer pushing
#                batches of 100 while 4 workers loop fetch {"max":1} with the ack riding on the
#                next fetch (one request per job); jobs/s and the server's CPU per request
#   room check   20000 sessions pre-joined to a room of capacity 1000 (`anteroom-bench rooms`),
#                then wrk -t2 -c50 -d10s with bench/wrk/check.lua (every check of a session
#                already there); checks/s and the server's CPU per check
# The same load generators drive both builds (this tree's). Reported: the median of each
# figure per build and the median of the per-round ratios new/old (pairing keeps the ratio
# meaningful when the machine's speed drifts).
#
# Loopback only; every step bounded by `timeout`; every process stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

OLD=""
NEW="$ROOT/build/release/anteroom"
ROUNDS=5
JOBS=50000
OUT=""
positional=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "bench-ab.sh: unknown argument $1" >&2; exit 2 ;;
    *) positional+=("$1") ;;
  esac
  shift
done
[[ ${#positional[@]} -ge 1 ]] || { echo "usage: scripts/bench-ab.sh OLD-BINARY [NEW-BINARY]" >&2; exit 2; }
OLD="$(realpath "${positional[0]}")"
[[ ${#positional[@]} -ge 2 ]] && NEW="$(realpath "${positional[1]}")"
BENCH="$ROOT/build/release/bench/anteroom-bench"
for f in "$OLD" "$NEW" "$BENCH"; do
  [[ -x "$f" ]] || { echo "bench-ab.sh: $f is not built" >&2; exit 1; }
done
HTTP_SECONDS="${HTTP_SECONDS:-10}"
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-ab.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"
echo "old: $OLD" | tee "$OUT/binaries.txt"
echo "new: $NEW" | tee -a "$OUT/binaries.txt"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
record_machine
need wrk wrk
need cc gcc
TOOLS="$(mktemp -d /tmp/anteroom-ab-tools.XXXXXX)"
trap 'cleanup; rm -rf "$TOOLS"' EXIT
cc -O2 -pthread -o "$TOOLS/client" /work/shared/peers/bench-anteroom-queue.c

SESSIONS=20000

# worker_loop BUILD ROUND: one measurement of the worker loop, appended to OUT/rounds.jsonl.
worker_loop() {
  local build="$1" round="$2" t0 t1 line
  start_server "$OUT/serve-loop-$build-$round.log" 2
  t0="$(run_ns "${PIDS[-1]}")"
  line="$(RIDE=1 timeout 120 "$TOOLS/client" "${SERVER_URL##*:}" "$JOBS" 1 4 100 "ab-$RANDOM" \
          60000 || echo '{}')"
  t1="$(run_ns "${PIDS[-1]}")"
  cleanup
  python3 - "$line" "$t0" "$t1" "$build" "$round" <<'PY' | tee -a "$OUT/rounds.jsonl"
import json, sys
line, t0, t1, build, rnd = sys.argv[1:]
d = json.loads(line or "{}")
rate = float(d.get("rate") or 0)
cpu = (int(t1) - int(t0)) / 1e3 / d["requests"] if d.get("requests") else None
print(json.dumps({"path": "worker_loop", "build": build, "round": int(rnd), "per_s": rate,
                  "ok": d.get("ok", False), "server_us": round(cpu, 2) if cpu else None}))
PY
}

# room_check BUILD ROUND: one measurement of the room check, appended to OUT/rounds.jsonl.
room_check() {
  local build="$1" round="$2" t0 t1
  start_server "$OUT/serve-room-$build-$round.log" 2
  timeout 120 "$BENCH" rooms --server "$SERVER_URL" --room peer --sessions "$SESSIONS" \
    --capacity 1000 --connections 50 --duration 1 >"$OUT/prejoin-$build-$round.txt" 2>&1
  t0="$(run_ns "${PIDS[-1]}")"
  timeout $((HTTP_SECONDS + 60)) wrk -t2 -c50 -d"${HTTP_SECONDS}s" --latency \
    -s "$ROOT/bench/wrk/check.lua" "$SERVER_URL" -- "$SESSIONS" peer \
    >"$OUT/wrk-$build-$round.txt"
  t1="$(run_ns "${PIDS[-1]}")"
  cleanup
  python3 - "$OUT/wrk-$build-$round.txt" "$t0" "$t1" "$build" "$round" <<'PY' | tee -a "$OUT/rounds.jsonl"
import json, sys
path, t0, t1, build, rnd = sys.argv[1:]
j = json.loads([l for l in open(path) if l.startswith('{"tool":"wrk"')][-1])
print(json.dumps({"path": "room_check", "build": build, "round": int(rnd),
                  "per_s": j["requests_per_s"], "p99_ms": j["p99_ms"],
                  "server_us": round((int(t1) - int(t0)) / 1e3 / max(1, j["requests"]), 2)}))
PY
}

for round in $(seq "$ROUNDS"); do
  order=(old new)
  (( round % 2 == 0 )) && order=(new old)
  echo "== round $round of $ROUNDS (${order[*]})"
  for build in "${order[@]}"; do
    if [[ $build == old ]]; then BIN="$OLD"; else BIN="$NEW"; fi
    worker_loop "$build" "$round"
    room_check "$build" "$round"
  done
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT/rounds.jsonl" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\n== summary: medians of the rounds; new/old is the median of the per-round ratios")
print("| path | old per s | new per s | new/old per s | old server us | new server us | new/old us |")
print("|---|---|---|---|---|---|---|")
for path in ("worker_loop", "room_check"):
    def of(build, key):
        return {r["round"]: r[key] for r in rows if r["path"] == path and r["build"] == build
                and r.get(key)}
    def ratio(key):
        old, new = of("old", key), of("new", key)
        pairs = [new[k] / old[k] for k in old if k in new]
        return f"{statistics.median(pairs):.3f} ({min(pairs):.2f}-{max(pairs):.2f})" if pairs else "-"
    def med(build, key):
        v = list(of(build, key).values())
        return f"{statistics.median(v):.0f}" if key == "per_s" and v else (
            f"{statistics.median(v):.2f}" if v else "-")
    print(f"| {path} | {med('old', 'per_s')} | {med('new', 'per_s')} | {ratio('per_s')} | "
          f"{med('old', 'server_us')} | {med('new', 'server_us')} | {ratio('server_us')} |")
PY
