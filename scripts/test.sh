#!/usr/bin/env bash
# README command 2: the whole test suite, twice: an optimised build, then the same tests under
# AddressSanitizer + UndefinedBehaviorSanitizer; then a short smoke of every fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

for preset in release asan; do
  echo "=== $preset: build"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  echo "=== $preset: test"
  ctest --preset "$preset"
done

# Every libFuzzer target for 15 s, two at a time: with the clang build (about 6.5 CPU-minutes)
# some 4 minutes on 2 cores. Longer runs: scripts/fuzz.sh SECONDS; see docs/security.md.
echo "=== fuzz: smoke"
FUZZ_JOBS=2 bash scripts/fuzz.sh 15
