#!/usr/bin/env bash
# Installs what anteroom needs on Debian 12, and nothing that is already there.
# Safe to run again: it only calls apt-get when a package is missing.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config git curl
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev libcli11-dev libspdlog-dev libfmt-dev libhowardhinnant-date-dev tzdata
  libtomlplusplus-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libhiredis-dev redis-server redis-tools
  libsystemd-dev help2man dpkg-dev
  chromium fonts-dejavu-core
  clang libclang-rt-14-dev
  python3-jwt python3-cryptography openssl
  python3-pytest python3-venv python3-setuptools python3-pip
  nginx caddy wrk
  prometheus
  iproute2 nftables
)
# Node.js runs the browser tests (Playwright). A machine may already have it from elsewhere
# (e.g. NodeSource, whose nodejs bundles npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -ne 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # nginx, caddy, redis-server and prometheus are only run by the tests (prometheus: its
  # promtool), on their own ports and config files: their packages must not start system
  # services (which would hold port 80, 6379 or 9090).
  # Where no policy-rc.d says so already (containers usually have one), one is put in place
  # for the install and removed after.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [ -n "$policy" ]; then
    $SUDO rm -f "$policy"
    trap - EXIT
  fi
fi

# The browser tests' npm packages (playwright-core, pinned by package-lock.json), installed
# again only when the lock file changed. Playwright drives Debian's chromium: it downloads no
# browser of its own.
BROWSER_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
INTEROP_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/interop"
if [ -f "$BROWSER_DIR/package-lock.json" ] &&
   ! cmp -s "$BROWSER_DIR/package-lock.json" "$BROWSER_DIR/node_modules/.installed-lock.json"; then
  echo "setup: npm ci in tests/browser"
  (cd "$BROWSER_DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error &&
    cp package-lock.json node_modules/.installed-lock.json)
fi

# The interop tests' npm packages (jose, standardwebhooks; pinned by package-lock.json), the same way.
if [ -f "$INTEROP_DIR/package-lock.json" ] &&
   ! cmp -s "$INTEROP_DIR/package-lock.json" "$INTEROP_DIR/node_modules/.installed-lock.json"; then
  echo "setup: npm ci in tests/interop"
  (cd "$INTEROP_DIR" && npm ci --no-audit --no-fund --loglevel=error &&
    cp package-lock.json node_modules/.installed-lock.json)
fi

# The OpenAPI test's npm packages (@readme/openapi-parser, ajv; pinned by package-lock.json),
# the same way.
OPENAPI_DIR="$(cd "$(dirname "$0")/.." && pwd)/tests/openapi"
if [ -f "$OPENAPI_DIR/package-lock.json" ] &&
   ! cmp -s "$OPENAPI_DIR/package-lock.json" "$OPENAPI_DIR/node_modules/.installed-lock.json"; then
  echo "setup: npm ci in tests/openapi"
  (cd "$OPENAPI_DIR" && npm ci --no-audit --no-fund --loglevel=error &&
    cp package-lock.json node_modules/.installed-lock.json)
fi
