"""Streamlit's own limits, stated as the app's (models/limits.py).

.streamlit/config.toml sets them; a server started with other values (`streamlit run app.py
--server.maxUploadSize 200`) would hold uploads and messages the app would refuse, so the app
says so once in the server log.
"""

from __future__ import annotations

import functools
import logging

import streamlit as st

from models.limits import MESSAGE_BYTES, STREAMLIT_UPLOAD_MIB, WIDGET_STATE_BYTES

MEGABYTE = 10**6  # Streamlit counts message sizes in units of 10**6 bytes

# Each Streamlit option and the value the app's limits give it.
OPTIONS = {
    "server.maxUploadSize": STREAMLIT_UPLOAD_MIB,
    "server.maxMessageSize": MESSAGE_BYTES // MEGABYTE,
    "server.maxWidgetStateSize": WIDGET_STATE_BYTES // MEGABYTE,
}


def differing() -> dict[str, int]:
    """The options this server runs with that differ from the app's limits, with their values."""
    running = {option: st.get_option(option) for option in OPTIONS}
    return {option: value for option, value in running.items() if value != OPTIONS[option]}


@functools.cache
def warn_if_limits_differ() -> None:
    """Log, once per server, any of Streamlit's limits that differ from the app's."""
    for option, value in differing().items():
        logging.getLogger("attention_explorer").warning(
            "%s is %s, and the app's limit (models/limits.py) is %s: Streamlit may hold more than "
            "the app accepts", option, value, OPTIONS[option])
