#!/usr/bin/env bash
# What a webhook subscribed to every admission costs the room check (issue 30's target: at 1,000
# admissions a second, check throughput drops by at most 10%), in one run (docs/benchmarks.md,
# "Webhooks").
#
#   scripts/bench-webhooks.sh [--no-build] [--rounds N] [--out DIR]
#
# Each round starts `anteroom serve --threads 2` (durable) twice, alternating: without a webhook
# ("off") and with one subscribed to room.admitted ("on", delivered to bench/webhooks/receiver.mjs,
# a Node server answering 204). In both, room "peer" holds 20000 pre-joined sessions (capacity
# 1000) and wrk -t2 -c50 checks them (bench/wrk/check.lua) for HTTP_SECONDS while
# bench/webhooks/joiner.py joins 1,000 new sessions a second into room "flow" (capacity 10M:
# each join is an admission, so "on" pushes and delivers 1,000 webhooks a second). Reported: the
# checks/s of each, their ratio, and (on) the deliveries the receiver got, the connections they
# came on, and the CPU the receiver used from the joiner's start to the last delivery
# (utime+stime of /proc/PID/stat, and the run time of its threads from schedstat, which the tick
# counts undercount on a tickless VM): it shares these two cores with anteroom here, and would
# not on a real deployment.
#
# Loopback only; every step bounded by `timeout`; every process started here stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
ROUNDS=3
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "bench-webhooks.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
HTTP_SECONDS="${HTTP_SECONDS:-10}"
RATE="${RATE:-1000}"
BUILD_DIR="build/release"
OUT="${OUT:-$(mktemp -d /tmp/anteroom-webhooks.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"
need wrk wrk
need node nodejs
record_machine

SESSIONS=20000
CLK_TCK="$(getconf CLK_TCK)"
for round in $(seq "$ROUNDS"); do
  for mode in off on; do
    log="$OUT/serve-$mode-$round.log"
    start_server "$log" 2 --webhook-allow 127.0.0.1/32
    curl -sf -X PUT "$SERVER_URL/v1/rooms/flow" -H 'Content-Type: application/json' \
      -d '{"capacity": 10000000}' >/dev/null
    receiver_out="$OUT/receiver-$mode-$round.txt"
    if [[ $mode == on ]]; then
      node "$ROOT/bench/webhooks/receiver.mjs" >"$receiver_out" &
      PIDS+=("$!")
      receiver_pid="$!"
      for _ in $(seq 50); do grep -q '^PORT' "$receiver_out" 2>/dev/null && break; sleep 0.1; done
      port="$(sed -n 's/^PORT //p' "$receiver_out")"
      curl -sf -X PUT "$SERVER_URL/v1/webhooks/admissions" -H 'Content-Type: application/json' \
        -d "{\"url\": \"http://127.0.0.1:$port/\", \"types\": [\"room.admitted\"], \"rooms\": [\"flow\"]}" \
        >/dev/null
    fi
    timeout 120 "$BENCH" rooms --server "$SERVER_URL" --room peer --sessions "$SESSIONS" \
      --capacity 1000 --connections 50 --duration 1 >"$log.prejoin" 2>&1
    timeout $((HTTP_SECONDS + 30)) python3 "$ROOT/bench/webhooks/joiner.py" "$SERVER_URL" flow \
      "$RATE" "$((HTTP_SECONDS + 2))" >"$OUT/joiner-$mode-$round.json" &
    joiner_pid="$!"
    receiver_ticks_before=0
    receiver_ns_before=0
    if [[ $mode == on ]]; then
      receiver_ticks_before="$(pid_cpu_ticks "$receiver_pid")"
      receiver_ns_before="$(run_ns "$receiver_pid")"
    fi
    sleep 1
    timeout $((HTTP_SECONDS + 60)) wrk -t2 -c50 -d"${HTTP_SECONDS}s" --latency \
      -s "$ROOT/bench/wrk/check.lua" "$SERVER_URL" -- "$SESSIONS" peer >"$OUT/wrk-$mode-$round.txt"
    wait "$joiner_pid"
    received=0
    connections=0
    receiver_cpu_s=0
    receiver_run_s=0
    if [[ $mode == on ]]; then
      sleep 2  # the last deliveries
      receiver_cpu_s="$(awk -v a="$receiver_ticks_before" -v b="$(pid_cpu_ticks "$receiver_pid")" \
        -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / hz}')"
      receiver_run_s="$(awk -v a="$receiver_ns_before" -v b="$(run_ns "$receiver_pid")" \
        'BEGIN {printf "%.2f", (b - a) / 1e9}')"
      kill -TERM "$receiver_pid" 2>/dev/null || true
      wait "$receiver_pid" 2>/dev/null || true
      received="$(sed -n 's/^RECEIVED //p' "$receiver_out")"
      connections="$(sed -n 's/^CONNECTIONS //p' "$receiver_out")"
    fi
    python3 - "$OUT/wrk-$mode-$round.txt" "$OUT/joiner-$mode-$round.json" "$mode" "$round" \
      "${received:-0}" "${connections:-0}" "$receiver_cpu_s" "$receiver_run_s" \
      <<'PY' | tee -a "$OUT/rounds.jsonl"
import json, sys
wrk, joiner, mode, rnd, received, connections, receiver_cpu_s, receiver_run_s = sys.argv[1:]
j = json.loads([l for l in open(wrk) if l.startswith('{"tool":"wrk"')][-1])
flow = json.loads(open(joiner).read().strip().splitlines()[-1])
print(json.dumps({"mode": mode, "round": int(rnd), "checks_per_s": j["requests_per_s"],
                  "p99_ms": j.get("p99_ms"), "admissions_per_s": flow["joins_per_s"],
                  "join_errors": flow["errors"], "admissions": flow["joins"],
                  "webhooks_received": int(received), "receiver_connections": int(connections),
                  "receiver_cpu_s": float(receiver_cpu_s), "receiver_run_s": float(receiver_run_s)}))
PY
    cleanup
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, statistics, sys
rounds = [json.loads(l) for l in open(os.path.join(sys.argv[1], "rounds.jsonl"))]
def med(mode, key):
    return statistics.median(r[key] for r in rounds if r["mode"] == mode)
ratios = [on["checks_per_s"] / off["checks_per_s"]
          for off, on in zip([r for r in rounds if r["mode"] == "off"],
                             [r for r in rounds if r["mode"] == "on"])]
print("\n== summary (medians of the rounds)")
print("| webhook | checks/s | p99 ms | admissions/s | webhooks received / admissions |")
print("|---|---|---|---|---|")
for mode in ("off", "on"):
    got = [r for r in rounds if r["mode"] == mode]
    share = "" if mode == "off" else f'{sum(r["webhooks_received"] for r in got)} / {sum(r["admissions"] for r in got)}'
    print(f'| {mode} | {med(mode, "checks_per_s"):.0f} | {med(mode, "p99_ms")} | '
          f'{med(mode, "admissions_per_s"):.0f} | {share} |')
print(f"\nchecks/s with the webhook / without, per round: {', '.join(f'{x:.3f}' for x in ratios)}; "
      f"median {statistics.median(ratios):.3f}")
on = [r for r in rounds if r["mode"] == "on"]
print("receiver connections (on), per round: "
      + ", ".join(f'{r["receiver_connections"]} for {r["webhooks_received"]} deliveries' for r in on))
print("receiver CPU (on), per round, from the joiner's start to the last delivery: "
      + ", ".join(f'{r["receiver_cpu_s"]:.2f} s utime+stime / {r["receiver_run_s"]:.2f} s run '
                  f'({1e6 * r["receiver_run_s"] / max(r["webhooks_received"], 1):.0f} us run per delivery)'
                  for r in on))
PY
