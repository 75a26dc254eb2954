#!/bin/sh
# Install what the HTML report's browser test (tests/test_html_report.py) needs on a fresh
# Debian/Ubuntu machine, as root: Debian's `chromium` package (headless Chromium at
# /usr/bin/chromium) and the Python package playwright, which drives that binary
# (executable_path=...). Never runs `playwright install`: no browser is downloaded.
#
# Idempotent: apt runs only when chromium is missing, pip only when playwright is missing.
# Usage: sh .ci/install-chromium.sh [PYTHON]   (PYTHON defaults to python3)
# Environment: DRAWOPT_CHROMIUM_SKIP_APT=1 skips the apt step (e.g. no root).
set -eu

PY="${1:-python3}"

if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
    if [ "${DRAWOPT_CHROMIUM_SKIP_APT:-0}" != "1" ]; then
        echo "install-chromium: apt-get install chromium"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 chromium
    fi
else
    echo "install-chromium: chromium present"
fi

if ! "$PY" -c "import playwright" 2>/dev/null; then
    echo "install-chromium: pip install playwright"
    "$PY" -m pip install -q playwright
else
    echo "install-chromium: playwright present"
fi
