#!/usr/bin/env bash
# The server's answer time while `anteroom backup` runs (results: docs/benchmarks.md, "Online
# backup (embedded)").
#
#   scripts/bench-backup.sh [--no-build] [--build-dir DIR] [--out DIR] [--sessions N] [--jobs N]
#                           [--seconds N]
#
# One server (embedded backend, fsync everysec, 2 I/O threads) is filled with N waiting sessions
# (`anteroom-bench rooms`, capacity 100, so N - 100 wait; default 1,000,000) and N ready jobs
# (`anteroom-bench queue`, 1000 per request; default 1,000,000). Then, twice: `anteroom-bench
# rooms` checks in on another room for --seconds (32 connections, one request in flight each),
# once alone (the baseline) and once while `anteroom backup` runs against the server, started 1 s
# into the run. Reported: the check-ins' p50, p99 and max in each run, the backup's wall time,
# size, and the fork pause the server logged.
# Loopback only; every step is bounded by `timeout`; every process started here is stopped by its
# PID; the data directory and the backup are temporary and removed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
BUILD_DIR="build/release"
OUT=""
SESSIONS=1000000
JOBS=1000000
RUN_SECONDS=20
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --sessions) SESSIONS="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --seconds) RUN_SECONDS="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bench-backup.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-backup.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-backup.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine
BACKUPS="$(mktemp -d /tmp/anteroom-backups.XXXXXX)"
trap 'cleanup; rm -rf "$BACKUPS"' EXIT

start_server "$OUT/serve.log" 2 --fsync everysec --log-level info
pid="${PIDS[-1]}"
echo "== filling: $SESSIONS waiting sessions, $JOBS ready jobs"
t0=$(date +%s.%N)
timeout 1800 "$BENCH" rooms --server "$SERVER_URL" --room line --sessions "$SESSIONS" \
  --capacity 100 --connections 64 --duration 0.5 >"$OUT/prejoin.json"
timeout 1800 "$BENCH" queue --server "$SERVER_URL" --queue backlog --jobs "$JOBS" \
  --producers 2 --workers 0 --batch 1000 --pipeline 2 --timeout 1700 >"$OUT/prefill.json"
t1=$(date +%s.%N)
echo "filled in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s; server VmRSS $(awk '/^VmRSS:/ {print $2, $3}' /proc/"$pid"/status)" |
  tee -a "$OUT/machine.txt"

probe() {  # probe NAME: check-ins on room `probe` for RUN_SECONDS, one JSON line in $OUT/NAME.json
  timeout $((RUN_SECONDS + 120)) "$BENCH" rooms --server "$SERVER_URL" --room "probe-$1" \
    --sessions 20000 --capacity 1000 --connections 32 --pipeline 1 --duration "$RUN_SECONDS" \
    >"$OUT/$1.json"
}

echo "== baseline: check-ins alone"
probe alone
echo "== check-ins while anteroom backup runs"
probe during &
PROBE=$!
sleep 1
b0=$(date +%s.%N)
timeout 900 "$BIN" backup --server "$SERVER_URL" --to "$BACKUPS/b" >"$OUT/backup.json"
b1=$(date +%s.%N)
wait "$PROBE"
bytes="$(du -sb "$BACKUPS/b" | cut -f1)"
pause="$( (grep -o 'paused [0-9.]* ms' "$OUT/serve.log" || true) | awk '{print $2}' | tail -1)"
python3 - "$OUT" "$(awk -v a="$b0" -v b="$b1" 'BEGIN {print b - a}')" "$bytes" "${pause:-0}" <<'PY' | tee "$OUT/result.json"
import json, sys
out, secs, size, pause = sys.argv[1:]
alone = json.load(open(f"{out}/alone.json"))
during = json.load(open(f"{out}/during.json"))
backup = json.load(open(f"{out}/backup.json"))
pick = lambda d: {k: d[k] for k in ("checks_per_s", "p50_ms", "p99_ms", "max_ms", "errors")}
print(json.dumps({"alone": pick(alone), "during_backup": pick(during),
                  "backup_seconds": round(float(secs), 2), "backup_bytes": int(size),
                  "fork_pause_ms": float(pause), "sessions": backup["sessions"],
                  "jobs": backup["jobs"], "snapshot": backup["snapshot"]}))
PY
