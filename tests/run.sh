#!/usr/bin/env bash
# The test command (README step 2; .ci/run calls it too).
# Installs the system packages the replay tests and the HTML report's browser test
# need when it can (root + apt),
# then runs the whole suite once. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .ci/install-gl.sh ]; then
  bash .ci/install-gl.sh || echo "tests/run.sh: could not install OpenGL packages; replay tests will be skipped" >&2
fi
if [ -f .ci/install-capture.sh ]; then
  bash .ci/install-capture.sh || echo "tests/run.sh: could not install spirv-tools/orjson; capture contract tests will be skipped" >&2
fi
if [ -f .ci/install-scenes.sh ]; then
  bash .ci/install-scenes.sh || echo "tests/run.sh: could not install the glTF scenes; real-scene tests will be skipped" >&2
fi
if [ -f .ci/install-chromium.sh ]; then
  bash .ci/install-chromium.sh || echo "tests/run.sh: could not install chromium; the HTML report's browser test will be skipped" >&2
fi
exec python3 -m pytest -q "$@"
