"""What Streamlit records about the run in progress, read where ui/links.py needs it: the widgets
drawn so far, the widgets whose values the browser sent with this rerun, and whether the
browser's back or forward button started it. Each reads Streamlit 1.67's internals and falls back
to a safe answer where they are not there."""

from __future__ import annotations


def drawn_keys() -> set[str] | None:
    """Keys of the widgets drawn so far in this run, from Streamlit's own record of the run
    (internal to Streamlit 1.67; None, meaning every key, if that record is not there)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    from streamlit.runtime.state import get_session_state

    try:
        drawn = get_script_run_ctx().shared.widget_ids_this_run
        mapping = get_session_state()._state._key_id_mapper.id_key_mapping
    except AttributeError:
        return None
    return {key for widget_id, key in mapping.items() if widget_id in drawn}


def keys_in_browser() -> set[str] | None:
    """Keys of the widgets whose values the browser sent with this rerun, which are the widgets
    it has drawn (internal to Streamlit 1.67; None if that record is not there). Call before
    any widget of the run is drawn."""
    from streamlit.runtime.state import get_session_state

    try:
        state = get_session_state()._state
        sent = state._new_widget_state
        mapping = state._key_id_mapper.id_key_mapping
    except AttributeError:
        return None
    return {key for widget_id, key in mapping.items() if widget_id in sent}


def history_navigation() -> bool:
    """Whether the browser's back or forward button started this run (Streamlit 1.67 marks
    such runs; False where that mark does not exist)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    return bool(getattr(get_script_run_ctx(), "is_history_navigation", False))
