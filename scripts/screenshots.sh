#!/usr/bin/env bash
# Screenshot every page of a built book with headless Chromium and NO network, to check
# that math, figures and widgets render from the bundled assets alone.
#
#   scripts/screenshots.sh [BUILD_DIR] [OUT_DIR]      (defaults: _build/html screenshots)
#   SCREENSHOT_VIA=file scripts/screenshots.sh ...    open pages as file:// instead of
#                                                     through a loopback HTTP server
# Remote hosts are unreachable for the browser: every name resolves to NOTFOUND and every
# non-loopback request is sent to a dead proxy. Pages are served from 127.0.0.1 only.
set -euo pipefail

build="${1:-_build/html}"
out="${2:-screenshots}"
via="${SCREENSHOT_VIA:-http}"
# The window is the whole screenshot (headless Chromium has no full-page mode): tall enough
# for the longest chapter, so figures and widgets far down the page are in the image.
window="${SCREENSHOT_WINDOW:-1280,24000}"
budget="${SCREENSHOT_BUDGET_MS:-20000}"

browser=""
for candidate in chromium chromium-browser google-chrome; do
    if command -v "$candidate" >/dev/null; then browser="$candidate"; break; fi
done
if [ -z "$browser" ]; then
    echo "screenshots: no Chromium found. Install it (Debian: apt-get install -y chromium)." >&2
    exit 1
fi
[ -f "$build/index.html" ] || { echo "screenshots: $build/index.html missing; run make book" >&2; exit 1; }

build="$(cd "$build" && pwd)"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
profile="$(mktemp -d)"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    rm -rf "$profile"
}
trap cleanup EXIT

if [ "$via" = http ]; then
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    python3 -m http.server "$port" --bind 127.0.0.1 --directory "$build" >/dev/null 2>&1 &
    server_pid=$!
    base="http://127.0.0.1:$port"
    for _ in $(seq 50); do
        python3 -c "import urllib.request; urllib.request.urlopen('$base/index.html')" \
            2>/dev/null && break
        sleep 0.1
    done
else
    base="file://$build"
fi

# Content pages: the root, the chapters, the bibliography (not search, genindex, the
# sphinx-proof index prf-prf.html, or _static).
mapfile -t pages < <(cd "$build" && find . -name '*.html' -not -path './_*' \
    -not -name search.html -not -name genindex.html -not -name index.html \
    -not -name 'prf-*.html' | sed 's|^\./||' | sort)

for page in "${pages[@]}"; do
    name="$(echo "${page%.html}" | tr '/' '_').png"
    rm -f "$out/$name"
    "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --no-first-run --no-default-browser-check \
        --user-data-dir="$profile" \
        --proxy-server=127.0.0.1:9 --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" \
        --hide-scrollbars --window-size="$window" --virtual-time-budget="$budget" \
        --screenshot="$out/$name" "$base/$page" >"$profile/log" 2>&1 || true
    if [ -s "$out/$name" ]; then
        echo "$out/$name"
    else
        echo "screenshots: no screenshot of $page:" >&2
        grep -v dbus "$profile/log" | tail -3 >&2
        failed=1
    fi
done
exit "${failed:-0}"
