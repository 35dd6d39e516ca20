"""The n² cost page's measurement: run in a worker thread while the page shows its progress, and
the latest measurement of each layer shape kept for the server (it describes the machine)."""

from __future__ import annotations

import threading
import time

import streamlit as st

from models.store import stores
from models.store.keys import result_key
from models.teaching.attention_cost import CostMeasurement, LayerShape, measure as measure_cost

POLL_S = 0.2  # how often the page looks at the worker's progress


def _key(shape: LayerShape):
    return result_key("attention cost", shape)


def kept_measurement(shape: LayerShape) -> CostMeasurement | None:
    return stores.RESULTS.peek(_key(shape))


def measure(shape: LayerShape) -> CostMeasurement:
    """Measure in a worker thread, the progress bar following it; the result is kept."""
    done = {"steps": 0, "total": 1}
    outcome: dict[str, object] = {}

    def progress(steps: int, total: int) -> None:
        done.update(steps=steps, total=total)

    def work() -> None:
        try:
            outcome["result"] = measure_cost(shape, progress=progress)
        except Exception as error:  # handed to the page's thread, which raises it
            outcome["error"] = error

    worker = threading.Thread(target=work, name="attention-cost", daemon=True)
    bar = st.progress(0.0, text="Measuring each length…")
    worker.start()
    while worker.is_alive():
        bar.progress(done["steps"] / done["total"],
                     text=f"Measuring each length: {done['steps']} of {done['total']} done…")
        time.sleep(POLL_S)
    bar.empty()
    if "error" in outcome:
        raise outcome["error"]
    result = outcome["result"]
    stores.RESULTS.put(_key(shape), result)
    return result
