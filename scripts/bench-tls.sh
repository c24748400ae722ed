#!/usr/bin/env bash
# What TLS costs per request on a kept-alive connection: the room check and the worker loop,
# each against the same server over plain HTTP and over TLS (docs/benchmarks.md; the target is
# TLS <= 1.3x plain).
#
#   scripts/bench-tls.sh [--no-build] [--rounds N] [--seconds S] [--durable] [--pin]
#                        [--binary PATH] [--out DIR]
#
# Each round (default 3) runs, alternating plain and TLS so drift hits both alike, a fresh
# `anteroom serve --memory-only --threads 2` (memory only: no disk in the way, so the share TLS
# takes is the largest it can be; --durable: the default backend, fsync everysec) and:
#   check   wrk -t2 -c50 with bench/wrk/check.lua: check-ins of 20000 sessions of a room of
#           capacity 1000 (a warm-up pass joins them first)
#   worker  wrk -t2 -c4 with bench/wrk/worker_loop.lua: fetch with the ack riding on the next
#           fetch, on a queue filled with 400000 jobs beforehand
# --pin: the server on CPU 0 with --threads 1, wrk (-t1) and the filling on CPU 1, so that the
# client's own TLS does not share the server's core and caches (on this 2-core machine the
# figure nearest to a server with its own cores). --binary: another build (default
# build/release/anteroom; with it nothing is built).
# Reported: requests/s, p50/p99, and the server's CPU per request (schedstat), with the TLS/plain
# ratios. The certificate is a P-256 one made here by openssl; wrk speaks TLS 1.3 to it.
# Loopback only; every step bounded by `timeout`; every process started here stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
ROUNDS=3
SECONDS_EACH=10
DURABLE=0
PIN=0
BIN=""
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --seconds) SECONDS_EACH="$2"; shift ;;
    --durable) DURABLE=1 ;;
    --pin) PIN=1 ;;
    --binary) BIN="$2"; BUILD=0; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "bench-tls.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-tls.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

if [[ $BUILD -eq 1 ]]; then build_targets build/release anteroom; fi
BIN="${BIN:-$ROOT/build/release/anteroom}"
[[ -x "$BIN" ]] || { echo "bench-tls.sh: no $BIN: build build/release first" >&2; exit 1; }
# on CPU: the server's, and the client's (wrk, the filling), as --pin places them.
SERVER_CPU=() CLIENT_CPU=() THREADS=2 WRK_THREADS=2
if [[ $PIN -eq 1 ]]; then
  need taskset util-linux
  SERVER_CPU=(taskset -c 0) CLIENT_CPU=(taskset -c 1) THREADS=1 WRK_THREADS=1
fi
need wrk wrk
need openssl openssl
record_machine

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$OUT/key.pem" -out "$OUT/cert.pem" >"$OUT/openssl.log" 2>&1

SESSIONS=20000
JOBS=400000

# serve MODE LOG: a fresh memory-only server, plain or TLS; sets SERVER_URL and SERVER_PID.
serve() {
  local flags=(--threads "$THREADS" --log-level warn)
  if [[ $DURABLE -eq 1 ]]; then
    DATA_DIRS+=("$(mktemp -d /tmp/anteroom-bench-data.XXXXXX)")
    flags+=(--data "${DATA_DIRS[-1]}")
  else
    flags+=(--memory-only)
  fi
  [[ "$1" == tls ]] && flags+=(--tls-cert "$OUT/cert.pem" --tls-key "$OUT/key.pem")
  ANTEROOM_TOKEN_SECRET="bench-secret-$$" ANTEROOM_ADMIN_KEY="" \
    "${SERVER_CPU[@]}" "$BIN" serve --listen 127.0.0.1:0 "${flags[@]}" >"$2" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  SERVER_URL=""
  for _ in $(seq 100); do
    SERVER_URL="$(grep -o 'https\?://127\.0\.0\.1:[0-9]*' "$2" | head -1 || true)"
    [[ -n "$SERVER_URL" ]] && return 0
    sleep 0.1
  done
  echo "bench-tls.sh: the server did not start:" >&2
  cat "$2" >&2
  exit 1
}

# fill URL: the room of the check, and the queue of the worker loop filled with JOBS jobs.
fill() {
  timeout 300 "${CLIENT_CPU[@]}" python3 - "$1" "$JOBS" <<'PY'
import http.client, json, ssl, sys, urllib.parse
url, jobs = urllib.parse.urlsplit(sys.argv[1]), int(sys.argv[2])
if url.scheme == "https":
    conn = http.client.HTTPSConnection(url.hostname, url.port,
                                       context=ssl._create_unverified_context())
else:
    conn = http.client.HTTPConnection(url.hostname, url.port)
def call(method, path, body):
    conn.request(method, path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    assert r.status in (200, 201), (path, r.status)
call("PUT", "/v1/rooms/peer", {"capacity": 1000})
batch = {"jobs": [{"payload": {"n": i}} for i in range(1000)]}
for _ in range(jobs // 1000):
    call("POST", "/v1/queues/bench/jobs", batch)
PY
}

# measure NAME ROUND MODE CONNECTIONS SCRIPT ARGS...: one wrk run, a JSON line to rounds.jsonl.
measure() {
  local name="$1" round="$2" mode="$3" conns="$4" script="$5"
  shift 5
  local before after
  before="$(run_ns "$SERVER_PID")"
  timeout $((SECONDS_EACH + 60)) "${CLIENT_CPU[@]}" wrk -t"$WRK_THREADS" -c"$conns" \
    -d"${SECONDS_EACH}s" --latency \
    -s "$ROOT/bench/wrk/$script" "$SERVER_URL" -- "$@" >"$OUT/wrk-$name-$mode-$round.txt"
  after="$(run_ns "$SERVER_PID")"
  python3 - "$OUT/wrk-$name-$mode-$round.txt" "$name" "$mode" "$round" "$before" "$after" \
    <<'PY' | tee -a "$OUT/rounds.jsonl"
import json, sys
path, name, mode, rnd, b_ns, a_ns = sys.argv[1:]
j = json.loads([l for l in open(path) if l.startswith('{"tool":"wrk"')][-1])
j.update(bench=name, mode=mode, round=int(rnd),
         cpu_us_per_request=round((int(a_ns) - int(b_ns)) / 1e3 / max(1, j["requests"]), 2))
print(json.dumps(j))
PY
}

echo "== $ROUNDS alternating rounds of ${SECONDS_EACH}s each"
for round in $(seq "$ROUNDS"); do
  for mode in plain tls; do
    serve "$mode" "$OUT/serve-$mode-$round.log"
    fill "$SERVER_URL"
    timeout 60 "${CLIENT_CPU[@]}" wrk -t"$WRK_THREADS" -c50 -d3s -s "$ROOT/bench/wrk/check.lua" \
      "$SERVER_URL" -- \
      "$SESSIONS" peer >/dev/null  # the warm-up joins every session
    measure check "$round" "$mode" 50 check.lua "$SESSIONS" peer
    measure worker "$round" "$mode" 4 worker_loop.lua bench
    cleanup
  done
done

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, os, statistics, sys
rounds = [json.loads(l) for l in open(os.path.join(sys.argv[1], "rounds.jsonl"))]
def med(bench, mode, key):
    return statistics.median(r[key] for r in rounds if r["bench"] == bench and r["mode"] == mode)
print("\n== summary (medians of the rounds)")
print("| | plain req/s | TLS req/s | plain p50/p99 ms | TLS p50/p99 ms | plain CPU us/req | TLS CPU us/req | TLS/plain time per request | TLS/plain CPU |")
print("|---|---|---|---|---|---|---|---|---|")
for bench in ("check", "worker"):
    p, t = med(bench, "plain", "requests_per_s"), med(bench, "tls", "requests_per_s")
    pc, tc = med(bench, "plain", "cpu_us_per_request"), med(bench, "tls", "cpu_us_per_request")
    print(f"| {bench} | {p:.0f} | {t:.0f} | {med(bench, 'plain', 'p50_ms'):.2f} / "
          f"{med(bench, 'plain', 'p99_ms'):.2f} | {med(bench, 'tls', 'p50_ms'):.2f} / "
          f"{med(bench, 'tls', 'p99_ms'):.2f} | {pc:.2f} | {tc:.2f} | {p / t:.3f}x | {tc / pc:.3f}x |")
PY
