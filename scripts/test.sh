#!/usr/bin/env bash
# The whole test suite, on a fresh machine of this project's kind.
#
# It installs what the tests need first (today: nothing beyond the Rust
# toolchain and its crates; later issues add the Python MCP client and the
# Claude Code CLI here), then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  echo "failed to find cargo: install the Rust toolchain (rustup) first" >&2
  exit 1
fi

# Lints are part of the suite: warnings fail it.
cargo clippy --workspace --all-targets --locked -- -D warnings

# Property tests read PROPTEST_CASES when set; the defaults in the tests are
# sized for a 2-core machine.
cargo test --workspace --all-targets --locked
