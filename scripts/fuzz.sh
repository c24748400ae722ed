#!/usr/bin/env bash
# The libFuzzer targets of fuzz/: builds them (the `fuzz` preset: clang, ASan+UBSan, in
# build/fuzz) and runs each for SECONDS (default 60) on a copy of its seed corpus
# (fuzz/corpus/TARGET, never written to). Exits non-zero on any crash, leak, timeout or
# out-of-memory, naming the reproducer, which replays with:
#   build/fuzz/fuzz/fuzz_TARGET REPRODUCER
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default: every target)
#   FUZZ_JOBS=2 scripts/fuzz.sh 20             (two targets at a time: CI's smoke)
#
# Each run's corpus (the seeds and what the run added) stays in build/fuzz/runs/TARGET and its
# reproducers in build/fuzz/artifacts/TARGET; the summary line per target (executions,
# coverage, corpus) is what docs/security.md records.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=60
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  SECONDS_PER_TARGET=$1
  shift
fi
ALL_TARGETS=(gate_urls http_request json_bodies log_records resp_reader schedules tokens
             webhook_inputs websocket_frames)
TARGETS=("$@")
[[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=("${ALL_TARGETS[@]}")
JOBS=${FUZZ_JOBS:-1}

# The largest input per target: what one request, body, file or frame sequence needs to
# reach everything, small enough to keep executions fast.
max_len() {
  case $1 in
    gate_urls) echo 4096 ;;          # a path or a return URL
    http_request) echo 32768 ;;      # a 16 KiB header and a body over the limits
    json_bodies) echo 16384 ;;
    log_records) echo 65536 ;;       # several records, a small snapshot
    resp_reader) echo 16384 ;;
    schedules) echo 512 ;;           # an expression (at most 256 bytes) and a zone name
    tokens) echo 4096 ;;
    webhook_inputs) echo 4096 ;;     # a URL, allow-list lines, a Retry-After, a secret
    websocket_frames) echo 16384 ;;  # a message over the 4 KiB read limit, in fragments
    *) echo "unknown target: $1" >&2; return 1 ;;
  esac
}
for t in "${TARGETS[@]}"; do max_len "$t" >/dev/null; done

bash scripts/setup.sh
echo "=== fuzz: build"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
BUILD=build/fuzz

run_target() {
  local t=$1
  local corpus=$BUILD/runs/$t artifacts=$BUILD/artifacts/$t log=$BUILD/runs/$t.log
  rm -rf "$corpus" "$artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp fuzz/corpus/"$t"/* "$corpus"/
  local rc=0
  "$BUILD"/fuzz/fuzz_"$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
    -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$artifacts"/ \
    "$corpus" >"$log" 2>&1 || rc=$?
  local done_line execs
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  local peak
  peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  local found
  found=$(find "$artifacts" -type f | sort)
  if [[ $rc -ne 0 || -n $found ]]; then
    echo "FAIL $t (exit $rc): $(grep -m1 -E 'ERROR|runtime error|fuzz check failed' "$log" || true)"
    for f in $found; do echo "  reproducer: $f  (replay: $BUILD/fuzz/fuzz_$t $f)"; done
    echo "  log: $log"
    tail -n 40 "$log" | sed 's/^/  | /'
    return 1
  fi
  echo "ok   $t: ${execs:-?} executions in ${SECONDS_PER_TARGET}s, peak RSS ${peak:-?} MB;" \
    "${done_line#*DONE }"
}

echo "=== fuzz: ${TARGETS[*]} for ${SECONDS_PER_TARGET}s each, $JOBS at a time"
failed=0
pids=()
for t in "${TARGETS[@]}"; do
  run_target "$t" &
  pids+=($!)
  if [[ ${#pids[@]} -ge $JOBS ]]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
if [[ $failed -ne 0 ]]; then
  echo "fuzz: FAILED (reproducers above)"
  exit 1
fi
echo "fuzz: all ${#TARGETS[@]} targets ran clean"
