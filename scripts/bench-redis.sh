#!/usr/bin/env bash
# Benchmarks of the Redis backend (results and how to read them: docs/benchmarks.md, "Redis
# backend"). One run, one Debian redis-server on a free loopback port, FLUSHALL between scenarios.
#
#   scripts/bench-redis.sh [--no-build] [--build-dir DIR] [--out DIR] [--reps N] [--duration S]
#                          [--jobs N] [--connections C] [--server-threads T] [--skip-peers]
#
#  1. throughput, 1 and 3 `anteroom serve --store redis://...` processes on the same Redis. The
#     client side is the same in both cases: 3 load generators run at once (C/3 connections
#     each), all against process 1, or one per process; their results are summed.
#       rooms   `anteroom-bench rooms`: one room (capacity 100, 10k sessions pre-joined by the
#               generators), C keep-alive connections in all, one check in flight each
#       queue   `anteroom-bench queue`: push + fetch + ack (the ack rides on the next fetch),
#               1 job per request, 2 producers + 2 workers per generator, pipelining 8; one
#               queue per generator; jobs/s = all jobs / the slowest generator's time
#     with Redis CPU per operation and EVALSHA's server time per call (INFO commandstats),
#  2. Redis commands per API operation: for each operation, N HTTP requests one at a time
#     against process 1, between CONFIG RESETSTAT and INFO commandstats (all commands, counted
#     also when a script calls them), with MONITOR running to tell the commands anteroom sends
#     (round trips) from those the scripts run; the sweeper's own traffic is left out,
#  3. the ceiling: redis-benchmark -c C -P 1 sending the EVALSHA anteroom sends, with the real
#     scripts as anteroom sends them (bench/assembled_script): room.lua `check` on a room of the same
#     shape (sessions rb-<12 digits> pre-joined, __rand_int__ picks one), queue.lua `push` and
#     `fetch` (jobs/s ceiling = 1 / (1/push + 1/fetch); it leaves out the ack), each also with
#     -P 16 (Redis's own limit once its network cost is shared), and the server time per call
#     of a trivial script, of room.lua's and queue.lua's definitions alone (each script up to its
#     "-- ---- operations" line), and of the 5-read check of bench-waitroom-lua.js (peers),
#  4. peers on the same Redis, same run (unless --skip-peers): the pipelined sorted-set waiting
#     room (bench-waitroom.js, a copy patched to use this Redis and the same room shape:
#     10k users, capacity 100) and BullMQ end to end (bench-bullmq-e2e.js), with anteroom's
#     BullMQ-shaped run (pushes of 100, 4 workers) on 1 process; ratios anteroom / peer,
#  5. a markdown summary.
# With --line-only, only the live channels' line reads (a line of LINE_SESSIONS, default 100000:
# the snapshot built and read, and the delta reads of a process one change behind).
# Steps 1 and 3 run --reps times (default 2, interleaved; medians). Loopback only; every step is
# bounded by `timeout`; every process started here is stopped by its PID. Raw outputs go to
# --out (default: a new temporary directory). About 4-5 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

BUILD=1
BUILD_DIR="build/release"
OUT=""
REPS=2
DURATION=8
JOBS=24000
CONNS=48
SERVER_THREADS=1
PEERS=1
LINE_ONLY=0
SESSIONS=10000
CAPACITY=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --connections) CONNS="$2"; shift ;;
    --server-threads) SERVER_THREADS="$2"; shift ;;
    --skip-peers) PEERS=0 ;;
    --line-only) LINE_ONLY=1 ;;
    -h|--help) awk 'NR > 1 && /^set -euo/ { exit } NR > 1' "$0"; exit 0 ;;
    *) echo "bench-redis.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
OUT="${OUT:-$(mktemp -d /tmp/anteroom-bench-redis.XXXXXX)}"
mkdir -p "$OUT"
echo "== results in $OUT"

# shellcheck source=scripts/lib/bench-common.sh
source "$ROOT/scripts/lib/bench-common.sh"

if [[ $BUILD -eq 1 ]]; then build_targets "$BUILD_DIR" anteroom anteroom-bench assembled_script; fi
BIN="$ROOT/$BUILD_DIR/anteroom"
BENCH="$ROOT/$BUILD_DIR/bench/anteroom-bench"  # the load generators
[[ -x "$BIN" ]] || { echo "bench-redis.sh: build $BUILD_DIR first" >&2; exit 1; }
# The scripts as anteroom sends them: the core's rules and messages, the prelude, then the script.
ROOM_LUA="$OUT/room.lua"
QUEUE_LUA="$OUT/queue.lua"
"$ROOT/$BUILD_DIR/bench/assembled_script" room >"$ROOM_LUA"
"$ROOT/$BUILD_DIR/bench/assembled_script" queue >"$QUEUE_LUA"
need redis-server redis-server redis-tools
need redis-benchmark redis-tools
need python3 python3

record_machine
{
  echo "redis: $(redis-server --version | head -1)"
  echo "settings: reps $REPS, duration ${DURATION}s, jobs $JOBS, connections $CONNS, server threads $SERVER_THREADS"
} | tee -a "$OUT/machine.txt"
HZ="$(getconf CLK_TCK)"
RESULTS="$OUT/results.jsonl"
: >"$RESULTS"

start_redis "$OUT/redis.log"
REDIS_PID="${PIDS[-1]}"
STORE="redis://127.0.0.1:$REDIS_PORT"
rcli() { timeout 60 redis-cli -p "$REDIS_PORT" "$@"; }
echo "redis-server: port $REDIS_PORT, pid $REDIS_PID"

URLS=()
SERVER_PIDS=()
for i in 1 2 3; do
  [[ $LINE_ONLY -eq 1 ]] && break
  start_store_server "$OUT/serve-$i.log" "$SERVER_THREADS" "$STORE"
  URLS+=("$SERVER_URL")
  SERVER_PIDS+=("${PIDS[-1]}")
done
echo "anteroom processes: ${URLS[*]} (pids ${SERVER_PIDS[*]})"

# evalsha_stats: "calls usec inner-usec" since the last CONFIG RESETSTAT: EVALSHA + EVAL calls and
# their server time, and the time of the commands the scripts ran (every other data command)
evalsha_stats() {
  rcli info commandstats | tr -d '\r' | awk -F'[:=,]' '
    $1 == "cmdstat_evalsha" || $1 == "cmdstat_eval" || $1 == "cmdstat_fcall" { c += $3; u += $5; next }
    $1 ~ /^cmdstat_/ && $1 !~ /^cmdstat_(config|info|script|function|flushall|ping|echo)/ { i += $5 }
    END { printf "%d %d %d\n", c, u, i }'
}

# ---- 1. throughput: 3 generators against 1 or 3 processes --------------------------------------
# run_generators KIND NPROC REP: KIND rooms or queue; writes one JSON line to $RESULTS.
run_generators() {
  local kind="$1" nproc="$2" rep="$3" g url pids=() files=() s0 s1 r0 r1 w0 w1
  rcli flushall >/dev/null
  rcli config resetstat >/dev/null
  r0="$(pid_cpu_ticks "$REDIS_PID")"
  s0="$(pid_cpu_ticks "${SERVER_PIDS[@]}")"
  w0="$(date +%s.%N)"
  for g in 0 1 2; do
    url="${URLS[$((g % nproc))]}"
    files+=("$OUT/$kind-${nproc}p-rep$rep-gen$g.json")
    if [[ $kind == rooms ]]; then
      timeout $((DURATION + 120)) "$BENCH" rooms --server "$url" --room bench \
        --sessions "$SESSIONS" --capacity "$CAPACITY" --connections $((CONNS / 3)) \
        --duration "$DURATION" >"${files[-1]}" 2>"${files[-1]%.json}.err" &
    else
      timeout 150 "$BENCH" queue --server "$url" --queue "q$g" --jobs $((JOBS / 3)) \
        --producers 2 --workers 2 --batch 1 --pipeline 8 --timeout 120 \
        >"${files[-1]}" 2>"${files[-1]%.json}.err" &
    fi
    pids+=("$!")
    PIDS+=("$!")
  done
  for g in 0 1 2; do wait "${pids[$g]}" || true; done
  w1="$(date +%s.%N)"
  r1="$(pid_cpu_ticks "$REDIS_PID")"
  s1="$(pid_cpu_ticks "${SERVER_PIDS[@]}")"
  rcli info commandstats | tr -d '\r' >"$OUT/cmdstats-$kind-${nproc}p-rep$rep.txt"
  BENCH_SESSIONS="$SESSIONS" python3 - "$kind" "$nproc" "$rep" "$((r1 - r0))" "$((s1 - s0))" "$HZ" \
    "$OUT/cmdstats-$kind-${nproc}p-rep$rep.txt" "$w0" "$w1" "${files[@]}" <<'PY' | tee -a "$RESULTS"
import json, os, re, sys
kind, nproc, rep, rt, st, hz, cmdstats, w0, w1 = sys.argv[1:10]
stats = {}
for line in open(cmdstats):
    m = re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", line)
    if m:
        stats[m.group(1)] = (int(m.group(2)), int(m.group(3)))
calls = sum(stats.get(k, (0, 0))[0] for k in ("evalsha", "eval", "fcall"))
usec = sum(stats.get(k, (0, 0))[1] for k in ("evalsha", "eval", "fcall"))
gens = []
for path in sys.argv[10:]:
    try:
        gens.append(json.loads(open(path).read().strip().splitlines()[-1]))
    except (OSError, ValueError, IndexError):
        gens.append({"error": "no answer from " + path})
rt, st, hz = int(rt), int(st), int(hz)
wall = float(w1) - float(w0)
j = {"scenario": kind, "processes": int(nproc), "rep": int(rep), "wall_s": round(wall, 2)}
if kind == "rooms":
    j["rate"] = sum(g.get("checks_per_s", 0) for g in gens)
    j["ops"] = sum(g.get("checks", 0) for g in gens)
    j["errors"] = sum(g.get("errors", 1) for g in gens)
    j["p99_ms"] = max(g.get("p99_ms", 0) for g in gens)
else:
    jobs = sum(g.get("jobs", 0) for g in gens)
    slowest = max(g.get("duration_s", 0) for g in gens) or 1
    j["rate"] = jobs / slowest
    j["ops"] = jobs
    j["errors"] = sum(g.get("errors", 1) for g in gens)
    j["all_acked"] = all(g.get("all_acked") for g in gens)
    j["push_to_fetch_p99_ms"] = max(g.get("push_to_fetch_p99_ms", 0) for g in gens)
j["rate"] = round(j["rate"])
j["evalsha_calls"] = calls
# per check (rooms: the generators' join-phase checks counted too) or per job; the sweeper's
# calls (10 a second per process) are in there as well
reqs = j["ops"] + (3 * int(os.environ["BENCH_SESSIONS"]) if kind == "rooms" else 0)
if reqs:
    j["evalsha_per_op"] = round(calls / reqs, 3)
    j["publish_per_op"] = round(stats.get("publish", (0, 0))[0] / reqs, 3)
    j["zadd_per_op_all"] = round(stats.get("zadd", (0, 0))[0] / reqs, 3)
    j["commands_per_op"] = round(sum(c for k, (c, u) in stats.items()
                                     if not k.startswith(("config", "info", "flushall"))) / reqs, 2)
j["evalsha_us_per_call"] = round(usec / calls, 1) if calls else None
inner = sum(u for k, (c, u) in stats.items()
            if k not in ("evalsha", "eval", "fcall") and not k.startswith(("config", "info", "flushall", "publish")))
j["commands_in_script_us_per_call"] = round(inner / calls, 1) if calls else None
# Redis and anteroom CPU over the whole scenario (rooms: the generators' join phase included).
j["redis_cores"] = round(rt / hz / wall, 2)
j["servers_cores"] = round(st / hz / wall, 2)
j["redis_cpu_us_per_evalsha"] = round(rt / hz * 1e6 / calls, 1) if calls else None
j["generators"] = gens
print(json.dumps(j))
PY
}

# ---- 3. the ceiling: redis-benchmark with the real scripts -----------------------------------
# resp ARG...: one command in RESP (for redis-cli --pipe)
# Every key the scripts take (room.lua's 14, queue.lua's 21: see their headers). With fewer, the
# missing ones are nil and a room cannot even be created: the ceiling would time an error.
ROOM_KEYS=()
for k in m l s d v x c cf g ln ld ev pq dw ps; do ROOM_KEYS+=("anteroom:{r:rb}:$k"); done
# room.lua's ARGV[4]: the 32 random bytes in hex every call carries (ENTROPY); a fixed value
# here, as nothing timed draws with it.
ROOM_ENTROPY="$(printf '5eed%.0s' {1..16})"
QUEUE_KEYS=()
for k in m j p h r d l x u a ax w hb wj poll key g gr gf go gp; do QUEUE_KEYS+=("anteroom:{q:rbq}:$k"); done

# rb_run NAME N ARGS...: redis-benchmark -c CONNS -P ${RB_PIPELINE:-1} -n N ARGS; one JSON line
# to $RESULTS
rb_run() {
  local name="$1" n="$2" r0 r1 txt calls usec
  shift 2
  rcli config resetstat >/dev/null
  r0="$(pid_cpu_ticks "$REDIS_PID")"
  txt="$(timeout 120 redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c "$CONNS" -P "${RB_PIPELINE:-1}" -n "$n" \
    -r "$SESSIONS" -q "$@" 2>&1 | tr '\r' '\n' | grep 'requests per second' | tail -1 || true)"
  r1="$(pid_cpu_ticks "$REDIS_PID")"
  read -r calls usec inner < <(evalsha_stats)
  python3 - "$name" "$REP" "$txt" "$((r1 - r0))" "$HZ" "$calls" "$usec" "$inner" <<'PY' | tee -a "$RESULTS"
import json, re, sys
name, rep, txt, rt, hz, calls, usec, inner = sys.argv[1:9]
m = re.search(r"([\d.]+) requests per second", txt)
calls, usec, inner = int(calls), int(usec), int(inner)
print(json.dumps({"scenario": "ceiling", "name": name, "rep": int(rep),
                  "rate": round(float(m.group(1))) if m else None,
                  "evalsha_calls": calls,
                  "evalsha_us_per_call": round(usec / calls, 1) if calls else None,
                  "commands_in_script_us_per_call": round(inner / calls, 1) if calls else None,
                  "redis_cpu_us_per_evalsha": round(int(rt) / int(hz) * 1e6 / calls, 1) if calls else None}))
PY
}

# The two forms anteroom sends a script in (Script in src/store/redis/cluster_client.h): an EVAL
# script (Redis 6, by EVALSHA) and a function library (Redis 7, FUNCTION LOAD once, then FCALL).
eval_form() {  # eval_form FILE: the EVAL script, on stdout
  echo 'local eval_call = {KEYS, ARGV}'
  cat "$1"
  echo 'return run(eval_call[1], eval_call[2])'
}
load_library() {  # load_library NAME FILE: FUNCTION LOAD REPLACE of FILE as function NAME
  { echo "#!lua name=$1"; cat "$2"; echo "redis.register_function('$1', run)"; } |
    rcli -x function load replace >/dev/null
}

room_ceiling() {
  rcli flushall >/dev/null
  local sha
  sha="$(eval_form "$ROOM_LUA" | rcli -x script load)"
  load_library bench_room "$ROOM_LUA"
  # capacity, grace 30 s, check-in timeout 1 h, no idle time-out, no rate cap (as bench rooms)
  rcli evalsha "$sha" "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" put '' 600000 "$ROOM_ENTROPY" "$CAPACITY" 30000 3600000 -1 -1 >/dev/null
  python3 - "$sha" "$SESSIONS" "$ROOM_ENTROPY" "${ROOM_KEYS[@]}" <<'PY' | rcli --pipe >/dev/null
import sys
sha, n, entropy, keys = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode(), sys.argv[4:]
out = sys.stdout.buffer
for i in range(n):
    args = [b"EVALSHA", sha.encode(), str(len(keys)).encode(), *(k.encode() for k in keys), b"check", b"", b"600000",
            entropy, b"rb-%012d" % i]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
PY
  echo "room rb: $(rcli zcard "${ROOM_KEYS[1]}") waiting, $(rcli hlen "${ROOM_KEYS[2]}") sessions"
  rb_run room-check 40000 FCALL bench_room "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" check "" 600000 "$ROOM_ENTROPY" "rb-__rand_int__"
  # as a Redis 6 gets it: the EVAL form by EVALSHA (every call makes the script's closures)
  rb_run room-check-evalsha 40000 EVALSHA "$sha" "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" check "" 600000 \
    "$ROOM_ENTROPY" "rb-__rand_int__"
  # the same with 16 calls in flight per connection: what Redis does when its network cost is
  # shared, as anteroom shares it (one pipelined connection per process)
  RB_PIPELINE=16 rb_run room-check-p16 80000 FCALL bench_room "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" check "" 600000 \
    "$ROOM_ENTROPY" "rb-__rand_int__"
}

queue_ceiling() {
  rcli flushall >/dev/null
  local sha first
  sha="$(eval_form "$QUEUE_LUA" | rcli -x script load)"
  load_library bench_queue "$QUEUE_LUA"
  # push: n=1, then payload, delay 0, priority 0, no dedupe, max_attempts 5
  first="$(rcli fcall bench_queue "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" push '' 1 '{"i":1}' 0 0 '' 5 '' | head -1)"
  if [[ "$first" != ok ]]; then
    echo "queue.lua push did not answer ok ($first): queue ceiling skipped" | tee -a "$OUT/notes.txt"
    return 0
  fi
  rb_run queue-push 20000 FCALL bench_queue "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" push "" 1 '{"i":1}' 0 0 "" 5 ""
  rb_run queue-push-evalsha 20000 EVALSHA "$sha" "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" push "" 1 '{"i":1}' 0 0 \
    "" 5 ""
  RB_PIPELINE=16 rb_run queue-push-p16 30000 FCALL bench_queue "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" push "" 1 \
    '{"i":1}' 0 0 "" 5 ""
  # fetch: worker, max 1, lease 60 s, no wait, no acks (the queue holds 60001 jobs)
  rb_run queue-fetch 20000 FCALL bench_queue "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" fetch "" rbw 1 60000 0 0
  RB_PIPELINE=16 rb_run queue-fetch-p16 30000 FCALL bench_queue "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" fetch "" \
    rbw 1 60000 0 0
}

# Live channels' line reads on a line of LINE_SESSIONS (default 100000) waiting sessions: the
# first read after a change builds the room's line snapshot (ZRANGE + concat + SET), every
# other process's read of that version is one GET of it (commandstats: the build, the mean of
# 5 reads). A process that keeps the line of the version before asks for the changes since
# (room.lua's delta log) instead: the medians of 100 such reads, each after one change (a join
# or a leave), next to the same read answering the counts alone, from SLOWLOG. Also: what a
# ZRANGE of the whole line costs alone, and the snapshot's size.
line_read() {
  local n="${LINE_SESSIONS:-100000}" build_us read_us zrange_us
  rcli flushall >/dev/null
  load_library bench_room "$ROOM_LUA"
  rcli fcall bench_room "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" put '' 600000 "$ROOM_ENTROPY" 10 30000 3600000 -1 -1 >/dev/null
  python3 - "$n" "$ROOM_ENTROPY" "${ROOM_KEYS[@]}" <<'PY' | rcli --pipe >/dev/null
import sys
n, entropy, keys = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3:]
out = sys.stdout.buffer
for i in range(n):
    args = [b"FCALL", b"bench_room", str(len(keys)).encode(), *(k.encode() for k in keys),
            b"check", b"", b"600000", entropy, b"s%021d" % i]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
PY
  # line_us [-r N] COMMAND...: usec_per_call of the command's type after running it once (N times)
  line_us() {
    local times=1
    if [[ $1 == -r ]]; then times="$2"; shift 2; fi
    rcli config resetstat >/dev/null
    rcli -r "$times" "$@" >/dev/null
    rcli info commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$(echo "$1" | tr 'A-Z' 'a-z')" \
      '$1 == c { print $7 }'
  }
  build_us="$(line_us FCALL bench_room "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" line "" 600000 "$ROOM_ENTROPY" 0)"
  read_us="$(line_us -r 5 FCALL bench_room "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" line "" 600000 "$ROOM_ENTROPY" 0)"
  zrange_us="$(line_us ZRANGE "${ROOM_KEYS[1]}" 0 -1)"
  local size
  size="$(rcli strlen "${ROOM_KEYS[9]}")"
  # Then rounds of one change (a join, or a waiting session leaving) and one read by a process
  # that keeps the line of the version before (deltas), or by one whose hub already has the new
  # version (the counts alone): each call's own server time from SLOWLOG (every call logged).
  rcli config set slowlog-log-slower-than 0 >/dev/null
  rcli config set slowlog-max-len 1000 >/dev/null
  rcli slowlog reset >/dev/null
  python3 - "$REDIS_PORT" "$n" "$ROOM_ENTROPY" "${ROOM_KEYS[@]}" <<'PY'
import socket, sys
port, n, entropy, keys = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def reply():
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-", b":"):
        return rest
    if kind == b"$":
        return None if int(rest) < 0 else f.read(int(rest) + 2)[:-2]
    return None if int(rest) < 0 else [reply() for _ in range(int(rest))]
def call(*args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    return reply()
def room(op, now, ttl, *args):
    return call("FCALL", "bench_room", len(keys), *keys, op, now, ttl, entropy, *args)
counts = room("line", "", 600000, 0)[2]
ver, inc = int(counts[0]), int(counts[9])
call("SLOWLOG", "RESET")
for i in range(100):
    if i % 2 == 0:
        room("check", "", 600000, "late-%d" % i)
    else:
        room("leave", "", 600000, b"s%021d" % (1000 + 7 * i), 1)
    room("line", "", 600000, 0, ver, inc)       # deltas: kept the version before
    room("line", "", 600000, ver + 1, 0, 0)     # the hub has this version: counts alone
    ver += 1
PY
  rcli slowlog get 1000 | python3 -c '
import sys, statistics
# redis-cli prints each entry as: id, time, duration, the arguments, client, name
lines = sys.stdin.read().split("\n")
out = {"delta": [], "counts": [], "check": [], "leave": []}
i = 0
while i < len(lines):
    if lines[i + 3:i + 4] == ["FCALL"] and lines[i + 4] == "bench_room":
        # FCALL bench_room NKEYS KEYS... op now ttl entropy [since kept-version kept-incarnation]
        at = i + 6 + int(lines[i + 5])
        dur, op, since = int(lines[i + 2]), lines[at], lines[at + 4]
        if op == "line":
            out["delta" if since == "0" else "counts"].append(dur)
        elif op in out:
            out[op].append(dur)
    i += 1
print(" ".join(str(statistics.median(v)) if v else "0" for v in out.values()))' >"$OUT/line-rounds.txt"
  rcli config set slowlog-log-slower-than 10000 >/dev/null
  local delta_us counts_us check_us leave_us
  read -r delta_us counts_us check_us leave_us <"$OUT/line-rounds.txt"
  python3 - "$n" "$build_us" "$read_us" "$zrange_us" "$size" "$delta_us" "$counts_us" "$check_us" \
    "$leave_us" <<'PY' | tee -a "$RESULTS"
import json, sys
n, build, read, zrange, size, delta, counts, check, leave = sys.argv[1:]
print(json.dumps({"scenario": "line-read", "sessions": int(n), "build_us": float(build),
                  "snapshot_read_us": float(read), "zrange_whole_line_us": float(zrange),
                  "snapshot_bytes": int(size), "delta_read_us": float(delta),
                  "counts_only_read_us": float(counts), "join_us": float(check),
                  "leave_us": float(leave)}))
PY
}

if [[ $LINE_ONLY -eq 1 ]]; then
  line_read
  exit 0
fi

for REP in $(seq "$REPS"); do
  echo "== rep $REP of $REPS"
  for np in 1 3; do
    echo "-- rooms, $np process(es), 3 generators x $((CONNS / 3)) connections, ${DURATION}s"
    run_generators rooms "$np" "$REP"
  done
  echo "-- ceiling: redis-benchmark -c $CONNS, room.lua check"
  room_ceiling
  for np in 1 3; do
    echo "-- queue, $np process(es), 3 generators x $((JOBS / 3)) jobs"
    run_generators queue "$np" "$REP"
  done
  echo "-- ceiling: redis-benchmark -c $CONNS, queue.lua push, then fetch"
  queue_ceiling
done

# ---- Lua cost per call: what a script costs before it does any work --------------------------
REP=1
echo "== server time per call of smaller scripts (redis-benchmark -c $CONNS)"
rcli flushall >/dev/null
sha="$(rcli script load 'return 1')"
rb_run trivial-script 40000 EVALSHA "$sha" 0
# each script up to its "-- ---- operations" line, as an EVAL script: what defining its functions
# costs every call of the EVAL form (the library form makes them once, when it loads)
if grep -q '^-- ---- operations' "$ROOM_LUA"; then
  sha="$( (sed -n '1,/^-- ---- operations/p' "$ROOM_LUA"; echo 'return 1') |
    rcli -x script load)"
  rb_run room-definitions-only 40000 EVALSHA "$sha" "${#ROOM_KEYS[@]}" "${ROOM_KEYS[@]}" nop "" 600000 x
fi
if grep -q '^-- ---- operations' "$QUEUE_LUA"; then
  sha="$( (sed -n '1,/^-- ---- operations/p' "$QUEUE_LUA"; echo 'return 1') |
    rcli -x script load)"
  rb_run queue-definitions-only 40000 EVALSHA "$sha" "${#QUEUE_KEYS[@]}" "${QUEUE_KEYS[@]}" nop ""
fi
line_read

# bench-waitroom-lua.js's check (HLEN, ZCARD, ZRANK, HGET, ZRANGEBYSCORE) on the same shape
WAITROOM_LUA=/work/shared/peers/bench-waitroom-lua.js
if [[ -r $WAITROOM_LUA ]]; then
  python3 - "$WAITROOM_LUA" "$SESSIONS" "$CAPACITY" >"$OUT/waitroom-lua-seed.resp" <<'PY'
import re, sys, time
src = open(sys.argv[1]).read()
m = re.search(r"const CHECK = `(.*?)`;", src, re.S)
if not m:
    sys.exit(0)
users, cap, now = int(sys.argv[2]), int(sys.argv[3]), int(time.time())
out = sys.stdout.buffer
def cmd(*args):
    args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
cmd("SCRIPT", "LOAD", m.group(1))
for i in range(users):
    uid = "u:%012d" % i
    if i < cap:
        cmd("HSET", "room:participants", uid, now)
    else:
        cmd("ZADD", "room:waiting", now + i / 1e6, uid)
    cmd("ZADD", "room:checkin", now + 3600, uid)
PY
  if [[ -s "$OUT/waitroom-lua-seed.resp" ]]; then
    rcli --pipe <"$OUT/waitroom-lua-seed.resp" >/dev/null
    sha="$(python3 -c '
import re, sys
print(re.search(r"const CHECK = `(.*?)`;", open(sys.argv[1]).read(), re.S).group(1), end="")' \
      "$WAITROOM_LUA" | rcli -x script load)"
    rb_run waitroom-5-read-check 40000 EVALSHA "$sha" 3 room:participants room:waiting \
      room:checkin "u:__rand_int__" "$(($(date +%s) - 30))"
  fi
fi

# ---- 2. Redis commands per API operation ---------------------------------------------------------
echo "== Redis commands per API operation (HTTP one request at a time to ${URLS[0]}, MONITOR on)"
rcli flushall >/dev/null
{ timeout 240 python3 - "${URLS[0]}" "$REDIS_PORT" "$OUT" <<'PY' || echo "per-operation step failed" >>"$OUT/notes.txt"; } | tee -a "$RESULTS"
import collections, http.client, json, re, subprocess, sys, time, urllib.parse
url, port, out = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)

def call(method, path, body=None):
    data = json.dumps(body) if body is not None else None
    conn.request(method, path, body=data,
                 headers={"Content-Type": "application/json"} if data is not None else {})
    r = conn.getresponse()
    txt = r.read()
    if r.status >= 300:
        raise RuntimeError(f"{method} {path}: {r.status} {txt[:200]!r}")
    return json.loads(txt) if txt else None

def rcli(*args):
    return subprocess.run(["redis-cli", "-p", port, *args], capture_output=True, text=True,
                          timeout=30).stdout

def cmdstats():
    calls = collections.Counter()
    for line in rcli("info", "commandstats").splitlines():
        m = re.match(r"cmdstat_([^:]+):calls=(\d+)", line)
        if m:
            calls[m.group(1)] += int(m.group(2))
    return calls

ADMIN = {"config|resetstat", "info", "monitor", "config", "client", "command", "echo"}
MARK = "bench-redis-window-start"
TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"')

def parse_monitor(path):
    """Top-level commands anteroom sent and the commands scripts ran, per owner ('op' or
    'sweeper': the registry sweep every 100 ms and what it triggers)."""
    top = {"op": collections.Counter(), "sweeper": collections.Counter()}
    inner = {"op": collections.Counter(), "sweeper": collections.Counter()}
    owner, active = "op", False
    for line in open(path, errors="replace"):
        m = re.match(r"^\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$", line.strip())
        if not m:
            continue
        addr, args = m.group(1), TOKEN.findall(m.group(2))
        if not args:
            continue
        name = args[0].lower()
        # only what happened between CONFIG RESETSTAT (which MONITOR does not show: the ECHO
        # sent right after it on the same connection marks it) and INFO, as commandstats saw it
        if name == "echo" and len(args) > 1 and args[1] == MARK:
            active = True
            continue
        if name == "info":
            active = False
            continue
        if not active:
            continue
        if addr == "lua":
            inner[owner][name] += 1
            continue
        if name in ADMIN or (name == "config" and len(args) > 1):
            continue
        owner = "op"
        if name in ("evalsha", "eval", "fcall"):
            nkeys = int(args[2]) if len(args) > 2 and args[2].isdigit() else 0
            op = args[3 + nkeys] if len(args) > 3 + nkeys else ""
            if nkeys == 1 or op in ("advance", "hint"):
                owner = "sweeper"
        elif name == "zadd" and "LT" not in args:
            owner = "sweeper"   # the sweeper records a deadline; operations lower it with LT
        top[owner][name] += 1
    return top, inner

results = []

def measure(name, n, fn, note=""):
    mon_path = f"{out}/monitor-{re.sub('[^a-z0-9]+', '-', name.lower())}.txt"
    mon_file = open(mon_path, "w")
    mon = subprocess.Popen(["redis-cli", "-p", port, "monitor"], stdout=mon_file,
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):  # wait until MONITOR is attached ("OK")
            time.sleep(0.02)
            if open(mon_path).read(2) == "OK":
                break
        subprocess.run(["redis-cli", "-p", port], input=f"CONFIG RESETSTAT\nECHO {MARK}\n",
                       capture_output=True, text=True, timeout=30)
        t0 = time.time()
        for i in range(n):
            fn(i)
        secs = time.time() - t0
        time.sleep(0.15)  # registry updates and PUBLISH follow the answers
        stats = cmdstats()
    finally:
        mon.terminate()
        try:
            mon.wait(timeout=5)
        except subprocess.TimeoutExpired:
            mon.kill()
            mon.wait()
        mon_file.close()
    top, inner = parse_monitor(mon_path)
    for k in ADMIN:
        stats.pop(k, None)
    # commandstats counts everything: take away the sweeper's share (seen in MONITOR)
    for c in (top["sweeper"], inner["sweeper"]):
        for k, v in c.items():
            stats[k] -= v
    top_op = sum(top["op"].values())
    evalsha = stats["evalsha"] + stats["eval"] + stats["fcall"]
    in_script = sum(stats.values()) - top_op
    j = {"scenario": "per-op", "op": name, "requests": n, "secs": round(secs, 2),
         "top_level_per_req": round(top_op / n, 3),
         "evalsha_per_req": round(evalsha / n, 3),
         "top_level_other": {k: round(v / n, 3) for k, v in top["op"].items()
                             if k not in ("evalsha", "eval", "fcall")},
         "in_script_per_req": round(in_script / n, 2),
         "in_script_per_req_monitor": round(sum(inner["op"].values()) / n, 2),
         "in_script_by_command": {k: round(v / n, 2) for k, v in inner["op"].most_common()},
         "sweeper_commands_left_out": sum(top["sweeper"].values()) + sum(inner["sweeper"].values()),
         "note": note}
    print(json.dumps(j), flush=True)

R = "/v1/rooms/ops"
ROOM = {"capacity": 100, "checkin_timeout_ms": 3600000, "idle_timeout_ms": None}
measure("room PUT (create)", 50, lambda i: call("PUT", f"/v1/rooms/opsx{i}", ROOM))
call("PUT", R, ROOM)
measure("check: new session (joins; first 100 admitted)", 1000,
        lambda i: call("POST", R + "/check", {"session": f"s{i}"}))
measure("check: waiting session (the bench's case)", 1000,
        lambda i: call("POST", R + "/check", {"session": f"s{100 + i % 900}"}))
measure("check: active session", 500, lambda i: call("POST", R + "/check", {"session": f"s{i % 100}"}))
measure("touch (active)", 500, lambda i: call("POST", R + "/touch", {"session": f"s{i % 100}"}))
measure("GET room", 200, lambda i: call("GET", R))
measure("leave final (waiting)", 400,
        lambda i: call("POST", R + "/leave", {"session": f"s{500 + i}", "final": True}))
measure("leave final (active: frees a slot, admits the next)", 100,
        lambda i: call("POST", R + "/leave", {"session": f"s{i}", "final": True}))

Q = "/v1/queues/opsq"
measure("push (1 job)", 1000, lambda i: call("POST", Q + "/jobs", {"payload": {"i": i}}))
state = {"lease": None}
def fetch_ack(i):
    body = {"worker": "w1", "max": 1}
    if state["lease"]:
        body["ack"] = [state["lease"]]
    jobs = call("POST", Q + "/fetch", body)["jobs"]
    state["lease"] = jobs[0]["lease"] if jobs else None
measure("fetch + ack of the previous job (the worker loop)", 1000, fetch_ack)
if state["lease"]:
    call("POST", Q + "/ack", {"leases": [state["lease"]]})
measure("fetch, queue empty (wait_ms 0)", 200, lambda i: call("POST", Q + "/fetch", {"worker": "w1"}))
leases = []
for i in range(300):
    call("POST", Q + "/jobs", {"payload": {"i": i}})
for i in range(300):
    leases.append(call("POST", Q + "/fetch", {"worker": "w2", "max": 1})["jobs"][0]["lease"])
measure("ack (its own request)", 300, lambda i: call("POST", Q + "/ack", {"leases": [leases[i]]}))
measure("push (100 jobs in one request)", 50,
        lambda i: call("POST", Q + "/jobs", {"jobs": [{"payload": {"i": k}} for k in range(100)]}))
measure("GET queue (stats)", 200, lambda i: call("GET", Q))
PY

# ---- 4. peers on the same Redis -------------------------------------------------------------------
if [[ $PEERS -eq 1 ]]; then
  echo "== peers on the same redis-server (copied from /work/shared/peers)"
  prepare_peers || echo "npm could not install the peers' packages" | tee -a "$OUT/notes.txt"
  # bench-waitroom.js starts its own redis-server on a fixed port: the copy uses ours instead,
  # with this room's shape (10k users, capacity 100), fewer checks and one repetition.
  sed -e 's/const PORT = 6393,/const PORT = +process.env.PEER_REDIS_PORT,/' \
    -e "s/CAPACITY = 1000,/CAPACITY = $CAPACITY,/" -e "s/USERS = 20000,/USERS = $SESSIONS,/" \
    -e 's/CHECKS = 200000,/CHECKS = 60000,/' -e 's/REPS = 3;/REPS = 1;/' \
    -e 's/await startRedis(PORT)/{ port: PORT, pid: +process.env.PEER_REDIS_PID, stop: async () => {} }/' \
    "$PEER_DIR/bench-waitroom.js" >"$PEER_DIR/bench-waitroom-here.js"
  patched=1
  for want in 'PORT = +process.env.PEER_REDIS_PORT,' "CAPACITY = $CAPACITY," "USERS = $SESSIONS," \
      'CHECKS = 60000,' 'REPS = 1;' 'pid: +process.env.PEER_REDIS_PID'; do
    grep -qF "$want" "$PEER_DIR/bench-waitroom-here.js" || patched=0
  done
  if [[ $patched -eq 1 ]]; then
    rcli flushall >/dev/null
    r0="$(pid_cpu_ticks "$REDIS_PID")"
    (cd "$PEER_DIR" && PEER_REDIS_PORT="$REDIS_PORT" PEER_REDIS_PID="$REDIS_PID" \
      timeout 200 node bench-waitroom-here.js || true) | tee "$OUT/peer-waitroom.txt"
    r1="$(pid_cpu_ticks "$REDIS_PID")"
    python3 - "$OUT/peer-waitroom.txt" "$((r1 - r0))" "$HZ" <<'PY' | tee -a "$RESULTS"
import json, re, sys
txt = open(sys.argv[1]).read()
m = re.search(r"waitroom: checks/s.*?median\s+([\d,]+)", txt)
print(json.dumps({"scenario": "peer", "name": "waitroom-pipeline",
                  "rate": int(m.group(1).replace(",", "")) if m else None}))
PY
  else
    echo "bench-waitroom.js has changed: could not point it at this Redis; skipped" |
      tee -a "$OUT/notes.txt"
  fi
  rcli flushall >/dev/null
  (cd "$PEER_DIR" && timeout 120 node bench-bullmq-e2e.js --port "$REDIS_PORT" --n 30000 \
    --limit-ms 90000 || true) | tee "$OUT/peer-bullmq-e2e.json"
  python3 - "$OUT/peer-bullmq-e2e.json" <<'PY' | tee -a "$RESULTS"
import json, sys
try:
    j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    j = {}
print(json.dumps({"scenario": "peer", "name": "bullmq-e2e", "rate": round(j["rate"]) if j.get("ok") else None,
                  "bullmq": j.get("bullmq"), "ok": j.get("ok")}))
PY
  echo "-- anteroom, BullMQ's shape (pushes of 100, 4 workers, pipelining 8), 1 process"
  rcli flushall >/dev/null
  line="$(timeout 150 "$BENCH" queue --server "${URLS[0]}" --queue bullmq-shape --jobs 30000 \
    --producers 1 --workers 4 --push-batch 100 --batch 1 --pipeline 8 --timeout 120 || true)"
  echo "{\"scenario\":\"bullmq-shape\",\"processes\":1,\"result\":${line:-null}}" | tee -a "$RESULTS"
  rm -rf "$PEER_DIR"
fi
cleanup

# ---- 5. summary ----------------------------------------------------------------------------------
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
python3 - "$RESULTS" "$CONNS" "$OUT/machine.txt" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
conns = sys.argv[2]
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def pick(scenario, **kw):
    return [r for r in rows if r.get("scenario") == scenario
            and all(r.get(k) == v for k, v in kw.items())]
def fmt(x, d=0):
    return "n/a" if x is None else f"{x:,.{d}f}"
def us(x):
    return "n/a" if x is None else f"{x:,.1f} us"
def ratio(a, b):
    return "n/a" if not a or not b else f"x{a / b:.2f}"

print()
print("### Throughput: 1 and 3 anteroom processes on one Redis (medians of %d reps)\n"
      % max([r.get("rep", 1) for r in rows] + [1]))
print("| workload | 1 process | 3 processes | 3 / 1 | Redis cores busy (1p / 3p) | Redis CPU per EVALSHA (3p) | EVALSHA server time per call (3p) | redis-benchmark -c %s, same EVALSHA | **3 processes / redis-benchmark** (target >= 0.70) | redis-benchmark -c %s -P 16 | 3 processes / -P 16 |" % (conns, conns))
print("|---|---|---|---|---|---|---|---|---|---|---|")
ceil = {}
for name in ("room-check", "queue-push", "queue-fetch", "room-check-p16", "queue-push-p16",
             "queue-fetch-p16", "trivial-script", "room-definitions-only",
             "queue-definitions-only", "waitroom-5-read-check", "room-check-evalsha",
             "queue-push-evalsha"):
    rs = pick("ceiling", name=name)
    ceil[name] = {"rate": med([r["rate"] for r in rs]),
                  "inner": med([r.get("commands_in_script_us_per_call") for r in rs]),
                  "us": med([r["evalsha_us_per_call"] for r in rs]),
                  "cpu": med([r["redis_cpu_us_per_evalsha"] for r in rs])}
qp, qf = ceil["queue-push"]["rate"], ceil["queue-fetch"]["rate"]
queue_ceiling = 1 / (1 / qp + 1 / qf) if qp and qf else None
qp16, qf16 = ceil["queue-push-p16"]["rate"], ceil["queue-fetch-p16"]["rate"]
queue_ceiling16 = 1 / (1 / qp16 + 1 / qf16) if qp16 and qf16 else None
for kind, c, c16 in (("rooms", ceil["room-check"]["rate"], ceil["room-check-p16"]["rate"]),
                     ("queue", queue_ceiling, queue_ceiling16)):
    one, three = pick(kind, processes=1), pick(kind, processes=3)
    a, b = med([r["rate"] for r in one]), med([r["rate"] for r in three])
    errs = sum(r.get("errors", 0) for r in one + three)
    acked = all(r.get("all_acked", True) for r in one + three)
    label = (f"room checks/s (waiting sessions, {conns} connections in all)" if kind == "rooms"
             else "queue jobs/s (push + fetch&ack, 1 job/request)")
    ceil_label = (f"{fmt(c)} (check)" if kind == "rooms" else
                  f"{fmt(c)} (push {fmt(qp)}, fetch {fmt(qf)}: 1/(1/push+1/fetch))")
    note = "" if errs == 0 and acked else f" (errors {errs}{'' if acked else ', NOT all acked'})"
    print(f"| {label}{note} | {fmt(a)} | {fmt(b)} | {ratio(b, a)} | "
          f"{fmt(med([r['redis_cores'] for r in one]), 2)} / {fmt(med([r['redis_cores'] for r in three]), 2)} | "
          f"{us(med([r['redis_cpu_us_per_evalsha'] for r in three]))} | "
          f"{us(med([r['evalsha_us_per_call'] for r in three]))} "
          f"({us(med([r.get('commands_in_script_us_per_call') for r in three]))} in its commands) | "
          f"{ceil_label} | **{ratio(b, c)}** | {fmt(c16)} | {ratio(b, c16)} |")

for kind, what in (("rooms", "check"), ("queue", "job (a push and a fetch carrying the previous ack)")):
    for n in (1, 3):
        rs = pick(kind, processes=n)
        if rs and rs[0].get("evalsha_per_op") is not None:
            print(f"\n{n} process(es), {kind}: per {what}: EVALSHA {med([r['evalsha_per_op'] for r in rs]):.3f}, "
                  f"PUBLISH {med([r['publish_per_op'] for r in rs]):.3f}, ZADD (in scripts and registry) "
                  f"{med([r['zadd_per_op_all'] for r in rs]):.3f}; all commands, inside scripts included: "
                  f"{med([r['commands_per_op'] for r in rs]):.1f} (commandstats of the whole run).", end="")
print()
print("\n### What one script call costs Redis (redis-benchmark -c %s, -P 1 unless said, INFO commandstats)\n" % conns)
print("| script | calls/s | server time per call (commandstats) | of which the commands it ran | Redis CPU per call (with network I/O) |")
print("|---|---|---|---|---|")
for name, label in (("trivial-script", "`return 1`"),
                    ("waitroom-5-read-check", "bench-waitroom-lua.js's check (5 reads)"),
                    ("room-definitions-only", "room.lua up to its operations (definitions, no work)"),
                    ("queue-definitions-only", "queue.lua up to its operations (definitions, no work)"),
                    ("room-check", "room.lua `check`, waiting session (FCALL)"),
                    ("room-check-evalsha", "room.lua `check`, as EVALSHA (Redis 6's path)"),
                    ("room-check-p16", "room.lua `check`, -P 16"),
                    ("queue-push", "queue.lua `push`, 1 job (FCALL)"),
                    ("queue-push-evalsha", "queue.lua `push`, as EVALSHA"),
                    ("queue-push-p16", "queue.lua `push`, -P 16"),
                    ("queue-fetch", "queue.lua `fetch`, 1 job, no ack"),
                    ("queue-fetch-p16", "queue.lua `fetch`, -P 16")):
    c = ceil[name]
    if c["rate"] is None:
        continue
    print(f"| {label} | {fmt(c['rate'])} | {us(c['us'])} | {us(c['inner'])} | {us(c['cpu'])} |")

for r in pick("line-read"):
    print(f"\nLive channels' line read, {r['sessions']:,} waiting: the first read of a version "
          f"(builds the snapshot, {r['snapshot_bytes']:,} bytes) {r['build_us'] / 1000:.1f} ms, "
          f"each other process's read {r['snapshot_read_us'] / 1000:.2f} ms; a ZRANGE of the "
          f"whole line alone {r['zrange_whole_line_us'] / 1000:.1f} ms (what every process's "
          f"read cost before the snapshot, plus the script's own handling).")
    if "delta_read_us" in r:
        print(f"A process keeping the line of the version before reads the change instead: "
              f"{r['delta_read_us']:.0f} us (median, after one join or leave; the same read "
              f"answering the counts alone {r['counts_only_read_us']:.0f} us; the join itself "
              f"{r['join_us']:.0f} us, the leave {r['leave_us']:.0f} us).")

print("\n### Redis commands per API operation (one HTTP request at a time, process 1)\n")
print("| API operation | requests | top-level commands per request (round trips) | of which EVALSHA | other top-level | commands run inside the script per request (commandstats / MONITOR) | inside the script, by command |")
print("|---|---|---|---|---|---|---|")
for r in pick("per-op"):
    other = ", ".join(f"{k.upper()} {v:g}" for k, v in r["top_level_other"].items()) or "none"
    inner = ", ".join(f"{k.upper()} {v:g}" for k, v in list(r["in_script_by_command"].items())[:8])
    print(f"| {r['op']} | {r['requests']} | {r['top_level_per_req']:g} | {r['evalsha_per_req']:g} | "
          f"{other} | {r['in_script_per_req']:g} / {r['in_script_per_req_monitor']:g} | {inner} |")

print("\n### Peers on the same Redis, same run\n")
print("| peer (its workload) | peer | anteroom, 1 process | anteroom, 3 processes | ratio 1p | ratio 3p |")
print("|---|---|---|---|---|---|")
rooms1, rooms3 = (med([r["rate"] for r in pick("rooms", processes=n)]) for n in (1, 3))
queue1, queue3 = (med([r["rate"] for r in pick("queue", processes=n)]) for n in (1, 3))
wr = med([r["rate"] for r in pick("peer", name="waitroom-pipeline")])
if wr:
    print(f"| sorted-set waiting room, 5-command pipeline + follow-up (bench-waitroom.js, node, 50 clients, same room shape) | {fmt(wr)} checks/s | {fmt(rooms1)} | {fmt(rooms3)} | {ratio(rooms1, wr)} | **{ratio(rooms3, wr)}** |")
w5 = ceil["waitroom-5-read-check"]["rate"]
if w5:
    print(f"| the same check as 1 EVALSHA, 5 reads, no writes (bench-waitroom-lua.js's script, redis-benchmark -c {conns}) | {fmt(w5)} checks/s | {fmt(rooms1)} | {fmt(rooms3)} | {ratio(rooms1, w5)} | {ratio(rooms3, w5)} |")
bq = med([r["rate"] for r in pick("peer", name="bullmq-e2e")])
bs = [r for r in pick("bullmq-shape") if r.get("result")]
bsr = bs[0]["result"].get("jobs_per_s") if bs else None
if bq:
    print(f"| BullMQ e2e: addBulk 100 + Worker concurrency 50 (bench-bullmq-e2e.js) vs the queue workload above | {fmt(bq)} jobs/s | {fmt(queue1)} | {fmt(queue3)} | {ratio(queue1, bq)} | **{ratio(queue3, bq)}** |")
    if bsr:
        print(f"| BullMQ e2e vs anteroom on BullMQ's shape (pushes of 100, 4 workers, pipelining 8) | {fmt(bq)} jobs/s | {fmt(bsr)} | | {ratio(bsr, bq)} | |")
print()
print("Machine: " + "; ".join(l.strip() for l in open(sys.argv[3]) if l.strip()))
PY
echo "== done; raw results in $OUT"
