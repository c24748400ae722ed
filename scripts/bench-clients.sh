#!/usr/bin/env bash
# The client packages' workers against the C load generator and BullMQ, in one run:
#
#   scripts/bench-clients.sh [--no-build] [--rounds N] [--jobs N] [--concurrency C] [--no-bullmq]
#                            [--out DIR]
#
# Each round (default 3; contenders alternate, so drift hits every one alike) starts a fresh
# `anteroom serve` as installed (embedded backend, fsync everysec, one thread per core) for each
# of:
#   c        the C client of ../shared/peers (bench-anteroom-queue.c): 1 producer pushing batches
#            of 100 while 4 workers loop fetch {"max":1} with the ack riding on the next fetch
#   node     bench/clients/node_worker.mjs: clients/node's Worker, concurrency C (default 50),
#            a no-op handler, beside a producer pushing batches of 100 (pushBulk)
#   python   bench/clients/python_worker.py: clients/python's Worker, the same
# and BullMQ end to end (bench-bullmq-e2e.js: addBulk(100) + one Worker, concurrency 50) on a
# fresh Debian redis-server. N jobs each (default 50,000).
#
# Medians of the rounds and the ratios (each worker to the C client, each to BullMQ) go to
# stdout and OUT/summary.txt; raw lines to OUT. Loopback only; every step is bounded by
# `timeout`; every process is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
ROUNDS=3
JOBS=50000
CONCURRENCY=50
BULLMQ=1
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --concurrency) CONCURRENCY="$2"; shift ;;
    --no-bullmq) BULLMQ=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "bench-clients.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-clients.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
BUILD_DIR="build/release"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
[[ -x "$BIN" ]] || { echo "bench-clients.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine

need cc gcc
need node nodejs
PYTHON=/usr/bin/python3
TOOLS="$(mktemp -d /tmp/anteroom-clients-tools.XXXXXX)"
trap 'cleanup; rm -rf "$TOOLS"' EXIT
cc -O2 -pthread -o "$TOOLS/client" /work/shared/peers/bench-anteroom-queue.c

# record NAME LINE T0 T1 S0 S1: the line, with the server's CPU over the run, to OUT/NAME.jsonl.
record() {
  python3 - "$2" "$3" "$4" "$5" "$6" >>"$OUT/$1.jsonl" <<'PY'
import json, sys
line, t0, t1, s0, s1 = sys.argv[1:]
try:
    d = json.loads(line)
except ValueError:
    d = {"ok": False, "raw": line[-300:]}
wall = float(s1) - float(s0)
if t0 and t1 and wall > 0:
    d["server_cores"] = round((int(t1) - int(t0)) / 1e9 / wall, 3)
print(json.dumps(d))
PY
  tail -1 "$OUT/$1.jsonl" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
print("   %-8s %9.0f jobs/s  ok=%s  server %s cores" % (sys.argv[1], float(d.get("rate") or 0),
                                                    d.get("ok"), d.get("server_cores", "-")))' "$1"
}

# measure NAME COMMAND...: a fresh server, the command with PORT and URL filled in, its line.
measure() {
  local name="$1" t0 t1 s0 s1 line port
  shift
  start_server "$OUT/serve-$name.log" "$(nproc)"
  port="${SERVER_URL##*:}"
  local cmd=()
  for a in "$@"; do a="${a//@PORT@/$port}"; cmd+=("${a//@URL@/$SERVER_URL}"); done
  t0="$(run_ns "${PIDS[-1]}")"
  s0="$(date +%s.%N)"
  line="$(timeout 180 "${cmd[@]}" 2>>"$OUT/$name.err" | tail -1 || true)"
  s1="$(date +%s.%N)"
  t1="$(run_ns "${PIDS[-1]}")"
  record "$name" "${line:-{\"ok\":false\}}" "$t0" "$t1" "$s0" "$s1"
  cleanup
}

if [[ $BULLMQ -eq 1 ]]; then prepare_peers; fi

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS"
  measure c env RIDE=1 "$TOOLS/client" @PORT@ "$JOBS" 1 4 100 "c-$round" 120000
  measure node node "$ROOT/bench/clients/node_worker.mjs" --url @URL@ --n "$JOBS" \
    --concurrency "$CONCURRENCY"
  measure python "$PYTHON" "$ROOT/bench/clients/python_worker.py" --url @URL@ --n "$JOBS" \
    --concurrency "$CONCURRENCY"
  if [[ $BULLMQ -eq 1 ]]; then
    start_redis "$OUT/redis.log"
    line="$(cd "$PEER_DIR" && timeout 180 node bench-bullmq-e2e.js --port "$REDIS_PORT" \
      --n "$JOBS" --conc "$CONCURRENCY" --limit-ms 120000 2>>"$OUT/bullmq.err" | tail -1 || true)"
    record bullmq "${line:-{\"ok\":false\}}" "" "" 0 1
    cleanup
  fi
done

python3 - "$OUT" "$BULLMQ" <<'PY' | tee "$OUT/summary.txt"
import json, os, statistics, sys
out, bullmq = sys.argv[1], sys.argv[2] == "1"
def med(name):
    path = os.path.join(out, name + ".jsonl")
    if not os.path.exists(path):
        return None
    rates = [float(json.loads(l).get("rate") or 0) for l in open(path) if l.strip()]
    oks = [json.loads(l).get("ok") for l in open(path) if l.strip()]
    return (statistics.median(rates) if rates else None), rates, all(oks)
c = med("c")
print("medians of %d rounds (jobs/s); every run acked every job: %s" % (
    len(c[1]), all(m[2] for m in (med(n) for n in ("c", "node", "python")) if m)))
print("  c (4 workers, ack riding): %.0f  %s" % (c[0], [round(r) for r in c[1]]))
b = med("bullmq") if bullmq else None
if b:
    print("  bullmq (concurrency 50):   %.0f  %s" % (b[0], [round(r) for r in b[1]]))
for name in ("node", "python"):
    m = med(name)
    line = "  %-6s worker:             %.0f  %s  x%.2f of c" % (name, m[0], [round(r) for r in m[1]],
                                                            m[0] / c[0])
    if b and b[0]:
        line += "  x%.2f of bullmq" % (m[0] / b[0])
    print(line)
PY
