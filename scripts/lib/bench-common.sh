# Shared by scripts/bench.sh and scripts/bench-queues.sh (sourced, not run): installing what a
# step needs, starting `anteroom serve` on a free loopback port, and stopping every process
# started here by its PID on every exit path. Needs BIN (the anteroom binary) before
# start_server.

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }
need() {  # need COMMAND DEBIAN-PACKAGE...
  local cmd="$1"; shift
  command -v "$cmd" >/dev/null 2>&1 && return 0
  echo "== installing $* (for $cmd)"
  as_root apt-get install -y "$@" >/dev/null
}

# ---- processes we start, stopped by PID on every exit path -----------------------------------
PIDS=()
DATA_DIRS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
  local dir
  for dir in "${DATA_DIRS[@]}"; do rm -rf "$dir"; done
  DATA_DIRS=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_server LOG [THREADS [SERVE-FLAGS...]]: sets SERVER_URL and SERVER_DATA, records the PID.
# Unless the flags say --memory-only or --data, the server gets a fresh data directory (the
# default, durable backend with fsync everysec), removed by cleanup.
start_server() {
  local log="$1" threads="${2:-2}"
  shift 2 || shift $#
  local extra=("$@")
  SERVER_DATA=""
  if [[ " ${extra[*]} " != *" --memory-only "* && " ${extra[*]} " != *" --data "* ]]; then
    SERVER_DATA="$(mktemp -d /tmp/anteroom-bench-data.XXXXXX)"
    DATA_DIRS+=("$SERVER_DATA")
    extra+=(--data "$SERVER_DATA")
  fi
  if [[ " ${extra[*]} " != *" --log-level "* ]]; then extra+=(--log-level warn); fi
  ANTEROOM_TOKEN_SECRET="bench-secret-$$" ANTEROOM_ADMIN_KEY="" \
    "$BIN" serve --listen 127.0.0.1:0 --threads "$threads" "${extra[@]}" >"$log" 2>&1 &
  PIDS+=("$!")
  SERVER_URL=""
  for _ in $(seq 100); do
    SERVER_URL="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)"
    [[ -n "$SERVER_URL" ]] && return 0
    sleep 0.1
  done
  echo "bench.sh: the server did not start:" >&2
  cat "$log" >&2
  exit 1
}

# start_store_server LOG THREADS STORE-URL [SERVE-FLAGS...]: `anteroom serve --store URL` (state in
# a shared store such as Redis: no data directory); sets SERVER_URL, records the PID.
start_store_server() {
  local log="$1" threads="$2" store="$3"
  shift 3
  ANTEROOM_TOKEN_SECRET="bench-secret-$$" ANTEROOM_ADMIN_KEY="" \
    "$BIN" serve --listen 127.0.0.1:0 --threads "$threads" --store "$store" --log-level warn \
    "$@" >"$log" 2>&1 &
  PIDS+=("$!")
  SERVER_URL=""
  for _ in $(seq 100); do
    SERVER_URL="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)"
    [[ -n "$SERVER_URL" ]] && return 0
    sleep 0.1
  done
  echo "the server did not start:" >&2
  cat "$log" >&2
  exit 1
}

pid_cpu_ticks() {  # pid_cpu_ticks PID...: user + system clock ticks of these processes, summed
  local pid total=0
  for pid in "$@"; do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# The nanoseconds all of a process's threads have run (schedstat). Clock ticks in /proc/PID/stat
# undercount a busy server here by up to 3x (tickless kernel in a VM); %.0f, as mawk's %d stops
# at 2^31.
run_ns() {
  cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'
}

server_cpu_ticks() {  # user + system clock ticks of the last server started
  awk '{print $14 + $15}' "/proc/${PIDS[-1]}/stat"
}

# ---- peers ----------------------------------------------------------------------------------------
prepare_peers() {  # a writable copy of /work/shared/peers with its npm packages: sets PEER_DIR
  need node nodejs
  need npm npm
  PEER_DIR="$(mktemp -d /tmp/anteroom-peers.XXXXXX)"
  cp -r /work/shared/peers/. "$PEER_DIR/"
  (cd "$PEER_DIR" && { timeout 600 npm ci --no-audit --no-fund --loglevel=error 2>/dev/null ||
                       timeout 600 npm install --no-audit --no-fund --loglevel=error; })
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_redis() {  # start_redis LOG: Debian's redis-server on a free loopback port; sets REDIS_PORT
  need redis-server redis-server redis-tools
  REDIS_PORT="$(free_port)"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --daemonize no >"$1" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 100); do
    redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "the redis-server did not start:" >&2
  cat "$1" >&2
  exit 1
}

# ---- build and the run's record --------------------------------------------------------------
build_targets() {  # build_targets DIR TARGET...: the release preset for build/release, else DIR
  local dir="$1"; shift
  echo "== build ($dir)"
  if [[ "$dir" == "build/release" ]]; then
    cmake --preset release >/dev/null
    cmake --build --preset release --target "$@"
  else
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DANTEROOM_BUILD_TESTS=OFF >/dev/null
    cmake --build "$dir" --target "$@"
  fi
}

record_machine() {  # the date, commit, CPUs and load, to stdout and $OUT/machine.txt
  {
    echo "date: $(date -Is)"
    dirty="$(git diff --quiet 2>/dev/null || echo ' +uncommitted changes')"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo none)${dirty}"
    echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  } | tee "$OUT/machine.txt"
}
