#!/usr/bin/env bash
# Regenerates docs/report.png, the README's picture of the HTML report:
# profiles a real workload, renders the report with fsprof, and has
# Debian's headless Chromium photograph it (pngquant, if present, shrinks it).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
target/release/fsprof run -q --interval 100ms -o "$tmp/p.json" -- \
  sh -c 'find /usr/include -name "*.h" | xargs cat | wc -c; grep -r no_such_pattern /usr/include; true'
target/release/fsprof report "$tmp/p.json" --format html -o "$tmp/report.html"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$tmp/chromium" --hide-scrollbars --window-size=1400,1700 \
  --screenshot="$tmp/report.png" "file://$tmp/report.html" 2>/dev/null
if command -v pngquant >/dev/null; then
  pngquant --force --quality 60-85 --output docs/report.png "$tmp/report.png"
else
  cp "$tmp/report.png" docs/report.png
fi
ls -l docs/report.png
