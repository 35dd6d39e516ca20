#!/usr/bin/env bash
# Set everything up (packages, Chromium) and run the whole test suite, browser tests included.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
