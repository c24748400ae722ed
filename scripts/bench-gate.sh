#!/usr/bin/env bash
# The gate's cost (results and how to read them: docs/benchmarks.md, "The gate").
#
#   scripts/bench-gate.sh [--no-build] [--build-dir DIR] [--out DIR]
#
# In one run, alternating rounds (ROUNDS, default 3; medians reported):
#  1. `anteroom serve` (the default durable backend) with a room of 2000 admitted visitors
#     (let in on the spot by the gate: their cookies) and 10000 waiting sessions of another
#     room; wrk -t1 -c50 on /v1/gate/bench with the cookies (bench/wrk/gate.lua) against the
#     room check of the waiting sessions (bench/wrk/check.lua): target >= 1.5x; and /healthz
#     the same way (the HTTP floor: what a request costs this server doing nothing), with
#     anteroom's CPU per request for each;
#  2. Debian's nginx serving a static page on two ports, one behind auth_request to the gate,
#     one without; wrk -t1 -c50 on each: target >= 50%.
# Loopback only; every step bounded by `timeout`; every process stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
BUILD=1
BUILD_DIR="build/release"
OUT=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "bench-gate.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
HTTP_SECONDS="${HTTP_SECONDS:-10}"
ROUNDS="${ROUNDS:-3}"
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-gate.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"
need wrk wrk
need nginx nginx
if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-gate.sh: build $BUILD_DIR first" >&2; exit 1; }
record_machine

VISITORS=2000
start_server "$OUT/server.log" 2
SERVER_PID="${PIDS[-1]}"
PORT="${SERVER_URL##*:}"
curl -sf -XPUT "$SERVER_URL/v1/rooms/bench" -H 'Content-Type: application/json' \
  -d "{\"capacity\":$VISITORS,\"idle_timeout_ms\":null,\"grace_ms\":3600000}" >/dev/null
# Admitted on the spot, one gate request each (a browser's page load: only those are let in on
# the spot, and held for the grace until the cookie comes back): the cookies.
: >"$OUT/cookies.txt"
for i in $(seq "$VISITORS"); do
  curl -s -o /dev/null -D - -H 'Sec-Fetch-Mode: navigate' "$SERVER_URL/v1/gate/bench" |
    sed -n 's/^Set-Cookie: \([^;]*\);.*/\1/p' >>"$OUT/cookies.txt"
done
echo "== $(wc -l <"$OUT/cookies.txt") admitted visitors"
# The room check's usual shape: sessions already waiting, one check each.
timeout 300 "$BENCH" rooms --server "$SERVER_URL" --room checks --sessions 10000 --capacity 1 \
  --duration 0.1 >"$OUT/prejoin.txt" 2>&1

run() {  # run NAME URL SCRIPT ARGS...: one wrk line, with anteroom's CPU (ms) over the run
  local name="$1" url="$2" script="$3"
  shift 3
  local before after line
  before=$(pid_cpu_ticks "$SERVER_PID")
  line=$(timeout $((HTTP_SECONDS + 60)) wrk -t1 -c50 -d"${HTTP_SECONDS}s" --latency -s "$script" \
    "$url" -- "$@" | grep '^{"tool":"wrk"')
  after=$(pid_cpu_ticks "$SERVER_PID")
  echo "${line%\}},\"server_cpu_ms\":$(( (after - before) * 1000 / $(getconf CLK_TCK) ))}" >>"$OUT/$name.jsonl"
}

# nginx: one static page on two ports, gated and not.
NGINX_DIR="$(mktemp -d /tmp/anteroom-bench-nginx.XXXXXX)"
DATA_DIRS+=("$NGINX_DIR")
mkdir -p "$NGINX_DIR/www" "$NGINX_DIR/logs"
chmod 755 "$NGINX_DIR" "$NGINX_DIR/www"  # nginx's workers run as another user when started as root
head -c 2048 /dev/zero | tr '\0' 'x' >"$NGINX_DIR/www/page.html"
GATED=$(free_port)
PLAIN=$(free_port)
sed -e "s|{{PREFIX}}|$NGINX_DIR|g" -e "s|{{GATED_PORT}}|$GATED|g" -e "s|{{PLAIN_PORT}}|$PLAIN|g" \
  -e "s|{{ANTEROOM_PORT}}|$PORT|g" "$ROOT/bench/nginx/gate-bench.conf" >"$NGINX_DIR/nginx.conf"
nginx -c "$NGINX_DIR/nginx.conf" -p "$NGINX_DIR" -g 'daemon off;' >"$OUT/nginx.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PLAIN/page.html" >/dev/null && break; sleep 0.1; done
COOKIE="$(head -1 "$OUT/cookies.txt")"
[[ "$(curl -s -o /dev/null -w '%{http_code}' -H "Cookie: $COOKIE" "http://127.0.0.1:$GATED/page.html")" == 200 ]] ||
  { echo "bench-gate.sh: the gated page does not pass:" >&2
    curl -s -i -H "Cookie: $COOKIE" "http://127.0.0.1:$GATED/page.html" | head -5 >&2
    cat "$OUT/nginx.log" "$NGINX_DIR/logs/error.log" >&2; exit 1; }

for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  run floor "$SERVER_URL" "$ROOT/bench/wrk/gate.lua" "$OUT/cookies.txt" /healthz
  run gate "$SERVER_URL" "$ROOT/bench/wrk/gate.lua" "$OUT/cookies.txt"
  run check "$SERVER_URL" "$ROOT/bench/wrk/check.lua" 10000 checks
  run nginx-gated "http://127.0.0.1:$GATED" "$ROOT/bench/wrk/gate.lua" "$OUT/cookies.txt" /page.html
  run nginx-plain "http://127.0.0.1:$PLAIN" "$ROOT/bench/wrk/gate.lua" "$OUT/cookies.txt" /page.html
done

python3 - "$OUT" <<'PY'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
def load(name):
    rows = [json.loads(l) for l in (out / f"{name}.jsonl").read_text().splitlines() if l]
    med = {k: statistics.median(r[k] for r in rows) for k in ("requests_per_s", "p50_ms", "p99_ms", "non_2xx")}
    med["server_us_per_req"] = statistics.median(r["server_cpu_ms"] * 1000 / r["requests"] for r in rows)
    return med
m = {n: load(n) for n in ("floor", "gate", "check", "nginx-gated", "nginx-plain")}
for n, r in m.items():
    print(f"{n:12s} {r['requests_per_s']:9.0f} req/s  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  "
          f"anteroom {r['server_us_per_req']:.1f} us CPU/req  non-2xx {r['non_2xx']:.0f}")
print(f"gate / healthz (the HTTP floor of this server): {m['gate']['requests_per_s'] / m['floor']['requests_per_s']:.2f}x")
print(f"gate / room check:         {m['gate']['requests_per_s'] / m['check']['requests_per_s']:.2f}x (target >= 1.5x)")
print(f"nginx gated / nginx plain: {m['nginx-gated']['requests_per_s'] / m['nginx-plain']['requests_per_s']:.0%} (target >= 50%)")
(out / "summary.json").write_text(json.dumps(m, indent=1))
PY
