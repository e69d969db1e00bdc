#!/usr/bin/env bash
# Installs the build and test dependencies from Debian 12's packages. Idempotent: apt-get only
# installs what is missing. See docs/dependencies.md for why each library was chosen.
set -euo pipefail
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  librdkafka-dev librocksdb-dev libsimdjson-dev libfmt-dev libspdlog-dev libjemalloc-dev
  libboost1.81-dev libcli11-dev libexpected-dev libssl-dev libjwt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  kcat wrk curl time python3 python3-yaml python3-jwt python3-cryptography clang-format
  chromium chromium-driver python3-selenium
  clang libclang-rt-14-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
