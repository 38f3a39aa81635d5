#!/usr/bin/env bash
# Browser tier: the crate's wasm tests.
#   1. `wasm-pack test --node`: lib unit tests and the MemStore conformance suite compiled to wasm.
#   2. `wasm-pack test --headless --chrome`: IdbStore (conformance, format refusal, durability, 16 MiB
#      values, key order) in a page, a dedicated worker, a shared worker and a service worker.
# Needs wasm-pack 0.15.1, wasm-bindgen-cli equal to Cargo.lock's wasm-bindgen, chromium and
# chromium-driver, node. `wasm-pack test` runs no wasm-opt, so no binaryen is needed here.
# Both run without the default `deflate` feature and with `talc` (the allocator), as the npm module is
# built (plain-JSON segments);
# DEFLATE segments are covered natively (30-cargo-test) and in workerd (70-worker).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [ -f "$ROOT/scripts/env.sh" ]; then
  # shellcheck disable=SC1091
  source "$ROOT/scripts/env.sh"
fi

export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"

missing=()
command -v wasm-pack >/dev/null 2>&1 || missing+=("wasm-pack (cargo install --locked wasm-pack --version 0.15.1)")
command -v wasm-bindgen-test-runner >/dev/null 2>&1 || missing+=("wasm-bindgen-test-runner (cargo install wasm-bindgen-cli --version 0.2.130)")
command -v node >/dev/null 2>&1 || missing+=("node")
[ -x "$CHROMEDRIVER" ] || missing+=("chromedriver at $CHROMEDRIVER (apt-get install -y chromium chromium-driver)")
command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || missing+=("chromium (apt-get install -y chromium)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "40-browser: missing tools:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

cd "$ROOT"
echo "== 40-browser: wasm-pack test --node"
wasm-pack test --node -- --no-default-features --features talc
echo "== 40-browser: wasm-pack test --headless --chrome"
wasm-pack test --headless --chrome -- --no-default-features --features talc
echo "== 40-browser: ok"
