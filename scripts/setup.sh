#!/usr/bin/env bash
# Installs what anteroom needs on Debian 12, and nothing that is already there.
# Safe to run again: it only calls apt-get when a package is missing.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config git curl
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libssl-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libhiredis-dev redis-server redis-tools
  nodejs npm
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
