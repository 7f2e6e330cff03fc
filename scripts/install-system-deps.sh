#!/usr/bin/env bash
# Installs the Debian packages some tests need (Chromium for the docs test, PostgreSQL for the
# storage tests). Safe to run again; does nothing for packages already present.
set -euo pipefail
packages=()
# Each entry: a command that proves the package is there, and the package name.
need() { command -v "$1" >/dev/null 2>&1 || packages+=("$2"); }
# One `need COMMAND PACKAGE` line per package.
need chromium chromium
need pg_ctlcluster postgresql
if [ "${#packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-system-deps: need root to install: ${packages[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi
