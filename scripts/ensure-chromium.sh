#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through playwright-core, which downloads no browser of
# its own. Run before `npm test` (pretest): a no-op when Chromium is there; as root on Debian it
# installs the `chromium` package; anywhere else it says what to do. CHROMIUM_PATH names another
# Chromium binary.
set -euo pipefail
browser="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$browser" ]; then exit 0; fi
if [ -n "${CHROMIUM_PATH:-}" ]; then
  echo "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file" >&2
  exit 1
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests" >&2
  # A mirror can fail once; three tries, then give up with apt's own message.
  for attempt in 1 2 3; do
    if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; then
      exit 0
    fi
    echo "apt-get failed (attempt $attempt of 3)" >&2
    sleep $((attempt * 5))
  done
  exit 1
fi
echo "The browser tests need Chromium: install it (Debian: apt-get install chromium) or set CHROMIUM_PATH." >&2
exit 1
