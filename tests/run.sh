#!/usr/bin/env bash
# The test command (README step 2; .ci/run calls it too).
# Installs the Debian packages the tests use when it can (root + apt: .ci/install-system.sh),
# then runs the whole suite once. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .ci/install-system.sh ]; then
  sh .ci/install-system.sh || echo "tests/run.sh: could not install the Debian packages; the tests that need them will be skipped" >&2
fi
exec python3 -m pytest -q "$@"
