#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this project's kind.
#
# Installs what the tests need first (the official Python MCP client into a
# virtualenv under target/), then runs lints, every Rust test of the
# workspace, and the Python tests that drive the real daemon.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "failed to find cargo: install the Rust toolchain (rustup) first" >&2
  exit 1
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "failed to find python3: install Python 3.10 or newer first" >&2
  exit 1
fi

venv=target/test-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt

# The dashboard's browser test drives Debian's Chromium through
# chromedriver (tests/python/test_dashboard_browser.py); installed once.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "failed to find chromium and chromedriver: install them (apt-get install chromium chromium-driver) as root first" >&2
    exit 1
  fi
fi

# The real Claude Code CLI, run offline against our scripted model server by
# crates/agency-cli/tests/suite/claude_code.rs (pinned: this release works with
# node 20). The test fails, rather than skips, without it.
if ! command -v npm >/dev/null 2>&1; then
  echo "failed to find npm: install Node.js 20 and npm first" >&2
  exit 1
fi
if [ ! -x target/claude-code/node_modules/.bin/claude ]; then
  npm install --prefix target/claude-code --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@2.1.197
fi
export AGENCY_CLAUDE_BIN="$PWD/target/claude-code/node_modules/.bin/claude"

# PostgreSQL: the store conformance suite, the copy from SQLite and the
# service suite run on it too, each test in a database of its own made on
# this server (AGENCY_TEST_POSTGRES, by default the local server's `test`
# database, trust authentication).
pg_url="${AGENCY_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}"
if [ -z "${AGENCY_TEST_POSTGRES:-}" ] && ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  echo "failed to reach PostgreSQL at 127.0.0.1:5432: start one (apt-get install postgresql; trust authentication for 127.0.0.1, a database named test) or set AGENCY_TEST_POSTGRES to a server's URL" >&2
  exit 1
fi
export AGENCY_TEST_POSTGRES="$pg_url"

# Lints are part of the suite: warnings fail it.
cargo clippy --workspace --all-targets --locked -- -D warnings

# The API documentation builds without warnings (broken or private
# intra-doc links, stray HTML), and its examples compile and run:
# `--all-targets` below leaves doctests out.
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --locked
cargo test --workspace --doc --locked

# Property tests read PROPTEST_CASES when set; the defaults in the tests are
# sized for a 2-core machine.
cargo test --workspace --all-targets --locked

# The service suite again, on PostgreSQL. Skipped by name: the tests that
# wrap or break the SQLite store or the file blob store on purpose (crash,
# faults_io, group_commit, spawn_prep) and the garbage-collection stories
# that age blobs by their files' times; the PostgreSQL blob store's own
# collection is tested in crates/agency-postgres/tests/blobs.rs.
AGENCY_TEST_STORE=postgres cargo test --locked -p agency-service --test service -- \
  --skip crash:: --skip faults_io:: --skip group_commit:: --skip spawn_prep:: \
  --skip retention::issue9_item11_gc_ --skip retention::issue9_item11_an_agent_cannot_collect_garbage

# The real daemon, driven by the official Python MCP client.
cargo build --locked -p agency-cli --bin agency
AGENCY_BIN="$PWD/target/debug/agency" "$venv/bin/python" -m pytest tests/python -q
