#!/usr/bin/env bash
# The PostgreSQL store's tests start their own server (test/helpers/postgres.ts) with initdb and
# postgres from the PATH or Debian's /usr/lib/postgresql/<version>/bin. Run before `npm test`
# (pretest): a no-op when they are there; as root (or with sudo) on Debian it installs the
# `postgresql` package; anywhere else it says what to do. Prints the directory it found them in.
set -euo pipefail

find_bin() {
  local dir
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v postgres)"
    return 0
  fi
  # Debian keeps the server binaries off the PATH, one directory per major version; newest first.
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -rn); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

if dir="$(find_bin)"; then
  echo "PostgreSQL server binaries: $dir"
  exit 0
fi

if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  as_root=none
fi
if [ "${as_root[*]-}" != none ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's postgresql for the PostgreSQL store tests" >&2
  # A mirror can fail once; three tries, then give up with apt's own message.
  for attempt in 1 2 3; do
    if "${as_root[@]}" apt-get update -qq &&
      "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; then
      # The package starts a cluster of its own; the tests never use it (each starts a server).
      if dir="$(find_bin)"; then
        echo "PostgreSQL server binaries: $dir"
        exit 0
      fi
      echo "postgresql is installed but initdb, pg_ctl and postgres were not found" >&2
      exit 1
    fi
    echo "apt-get failed (attempt $attempt of 3)" >&2
    sleep $((attempt * 5))
  done
  exit 1
fi
echo "The PostgreSQL store tests need initdb, pg_ctl and postgres: install PostgreSQL (Debian: apt-get install postgresql) or put its bin directory on the PATH." >&2
exit 1
