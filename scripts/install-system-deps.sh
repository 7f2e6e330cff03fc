#!/usr/bin/env bash
# Installs the Debian packages some tests need (Chromium for the docs test, PostgreSQL for the
# storage tests, the runtimes and frameworks of the example receivers in examples/receivers/), and the
# other Node.js releases the CLI is tested under. Safe to run again; does nothing for what is present.
set -euo pipefail
packages=()
# Each entry: a command that proves the package is there, and the package name.
need() { command -v "$1" >/dev/null 2>&1 || packages+=("$2"); }
# A library: a shell command that succeeds once it is there, and the package name.
need_lib() { sh -c "$1" >/dev/null 2>&1 || packages+=("$2"); }
# One `need COMMAND PACKAGE` (or `need_lib CHECK PACKAGE`) line per package.
need chromium chromium
need pg_ctlcluster postgresql
# The README's "Watch a delivery" makes its certificate with it (test/server/watch-delivery.test.ts).
need openssl openssl
# Example receivers (test/receivers/languages.test.ts). Frameworks come from Debian, not PyPI or
# rubygems: Flask is importable by Debian's /usr/bin/python3 only.
need /usr/bin/python3 python3
need_lib "/usr/bin/python3 -c 'import flask'" python3-flask
need go golang-go
need ruby ruby
need_lib "ruby -e 'require \"sinatra/base\"'" ruby-sinatra
need_lib "ruby -e 'require \"webrick\"'" ruby-webrick
need php php-cli
need javac default-jdk-headless
# Jackson, the JSON library a Java receiver would use (the JDK has none): jars in /usr/share/java.
need_lib "test -f /usr/share/java/jackson-databind.jar" libjackson2-databind-java
if [ "${#packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-system-deps: need root to install: ${packages[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi
# The other Node.js releases the CLI is tested under (scripts/other-nodes.json), from the npm registry
# into ~/.cache/partner-platform: not Debian packages, and no root needed. A failure is reported here
# and by the tests that need them, without holding up the rest.
node "$(dirname "$0")/other-nodes.mjs" install || true
