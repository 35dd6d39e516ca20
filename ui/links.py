"""A link for every view: each page's state lives in its URL, so a view can be shared or revisited.

What a link holds and how its values are read and written is ui/link_codec.py; this module
decides, run by run, when the URL is read into the session and when the session is written
into the URL.

Reading a link: a URL that carries `text` describes a whole view, so anything it leaves out falls
back to its default; a URL without `text` (such as `?layer=5`) only changes what it names. Values
the model or page cannot show fall back to valid ones with a note above the page: an index past
the model's layers or heads (`ui.state.index_slider`), a choice that is not among the options,
a number a slider refuses (the page is drawn again without it).

When the URL is a link to read: the browser sends its query with every rerun, but the query it
sends is only as new as the last write it has received. A rerun started by a control (a slider
moved twice quickly, on a slow connection) can carry a query older than the one the previous
run wrote. Streamlit's own query-bound widgets read the URL only on a page's first load and on
history navigation, and so does this module, in those words:

- an empty query is never read (Streamlit opens a page picked in the menu without one);
- the first run of a page (a new tab, a page picked by a link) reads it;
- a run Streamlit marks as browser back/forward (`is_history_navigation`) reads it;
- any other run reads it only when it differs from the query this session last wrote *and*
  none of the view's values changed since that write: the browser then sent the same widget
  values as before with a different query, which only following a link does (an example's link
  to the page already open). A rerun in which a control changed comes from that control, and
  its query is at best stale: it is not read.

Back and forward: Streamlit 1.67's frontend pushes a browser history entry whenever the server
changes the query (`handlePageInfoChanged` calls `history.pushState`, or `replaceState` during a
run started by back/forward, and does nothing when the query equals the address bar's), and on
`popstate` it reruns the app with that entry's query (`onHistoryChange`, `is_history_navigation`).
Each change of the view is therefore one history entry. Picking a page in the menu adds two
entries: the bare page URL (pushed by Streamlit) and the same page with its query (pushed when
this module writes it); going back over the bare one changes nothing on screen. The default
page's link is `/?…`: Streamlit rewrites `/attention_maps?…` to `/?…` with a history entry of its
own.

Widgets the browser never got: when a run starts, Streamlit drops the previous run's messages
that have not reached the browser yet (whether that run was stopped or had just finished). A
widget whose value was set in the session before it was drawn (by a link, or by a button's
callback) and whose message was dropped is later drawn with nothing telling the browser that
value: the browser shows the widget's default, and its next rerun sends that default back,
replacing the value (a link's `model=decoder`, `layer=3` and `present=true` were all lost when
a sentence was typed as the link's first run ended). So before any widget is drawn, each value of
the sidebar and of the page's controls whose widget the browser did not send with this rerun is
set again, which makes Streamlit send it with its widget; a widget the browser has keeps what
the browser sent (what its user is typing is never overwritten).

Writing: the query is written after the page has run, so it holds what the page shows (a slider
whose range changed with the input starts again from its default) and only the controls it drew.
It is written even when it equals the query the run was given, if that query is older than the
last write (the browser ignores a write equal to its address bar). A page whose last run ended
early (`st.stop()`, an error) may do so again, so its query is then also written before it runs.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit

import streamlit as st

from ui.link_codec import RESERVED, SHARED, apply_shared, shared_params
from ui.link_controls import PageControls, page_controls, page_file
from ui.link_values import Refused, control_text, link_text, quoted, read_value
from models.teaching.decks import view_of
from ui.deck_editor import add_message, add_view
from ui.state import CORRECTED, SIDEBAR_VALUES
from ui.run_record import drawn_keys, history_navigation, keys_in_browser
from ui.text import plain

# The public API of links, for pages and other ui modules (the codec's names re-exported).
__all__ = ["PAGE", "SHARED", "LinkedView", "PageControls", "link_text",
           "page_controls", "read_value", "shared_params"]

WRITTEN = "_link_written"  # session key: the query this session last wrote or read
PAGE = "_link_page"  # session key: the url path of the page this session ran last
ENDED = "_link_page_ended"  # session key: whether the last run reached its end
CARRIED_NOTES = "_link_notes"  # session key: notes for the next run, after a retry
CARRIED_VALUES = "_link_values"  # session key: the link's values a retry keeps

logger = logging.getLogger("attention_explorer")


def _same(first: object, second: object) -> bool:
    """Equal values of the same kind (2 and 2.0 are the same number; True is not 1)."""
    if isinstance(first, (bool, str)) or isinstance(second, (bool, str)):
        return type(first) is type(second) and first == second
    return first == second


@dataclass
class LinkedView:
    """The link of one run: what it set, the notes to show, and the page it belongs to."""

    url_path: str
    controls: PageControls
    incoming: dict[str, str]
    applied: dict[str, object] = field(default_factory=dict)  # page keys set from the link
    notes: list[str] = field(default_factory=list)
    slot: object = None  # the place above the page where notes appear
    link_slot: object = None  # the place in the sidebar where the link is offered
    written: dict[str, str] | None = None  # the query written in this run
    switched: bool = True  # the first run of this page (a page picked in the menu, or a new tab)
    title: str = ""  # the page's title (a slide made from this view starts with it)
    last_ended: bool = True  # whether this session's previous run reached its end

    # -- before the sidebar -------------------------------------------------------------
    @classmethod
    def restore(cls, page) -> LinkedView:
        """Read the URL into the session state. Call before any widget is drawn."""
        state = st.session_state
        view = cls(page.url_path, page_controls(page_file(page)), st.query_params.to_dict(),
                   notes=list(state.pop(CARRIED_NOTES, [])), slot=st.empty(),
                   switched=state.get(PAGE) != page.url_path, title=page.title)
        state[PAGE] = page.url_path
        state[CORRECTED] = set()
        view.last_ended = state.get(ENDED, True)
        state[ENDED] = False  # until check() at the run's end
        view._send_values_again(keys_in_browser())
        for key, value in state.pop(CARRIED_VALUES, {}).items():
            state[key] = view.applied[key] = value
        if view._is_new_link():
            whole = "text" in view.incoming
            try:
                apply_shared(view.incoming, whole, view.notes)
                view._apply_controls(whole)
            except Exception:  # the codec reads every value totally: this is the last line
                logger.exception("page %s could not read its link", page.url_path)
                view.notes.append("This link could not be read; the page is shown without it.")
            state[WRITTEN] = dict(view.incoming)  # the address bar's query until the next write
        return view

    def _send_values_again(self, in_browser: set[str] | None) -> None:
        """Set each value of the sidebar and of this page's controls whose widget the browser
        did not send with this rerun (`in_browser`) to itself: Streamlit then sends it with its
        widget (see the module's docstring). Without Streamlit's record of what the browser sent
        (None), every value after a run that did not reach its end."""
        if in_browser is None and self.last_ended:
            return
        state = st.session_state
        controls = self.controls
        keys = [*SIDEBAR_VALUES,
                *(key for key in map(str, state) if controls.prefix and controls.kind_of(key))]
        for key in keys:
            if key in state and key not in (in_browser or ()):
                state[key] = state[key]

    def _is_new_link(self) -> bool:
        """Whether this run's query is a link to open (see the module's docstring)."""
        if not self.incoming:
            return False
        if self.switched or history_navigation():
            return True
        written = st.session_state.get(WRITTEN)
        return self.incoming != written and not self._moved_since(written)

    def _moved_since(self, written: dict[str, str] | None) -> bool:
        """Whether a value of the view changed since `written` was written: the browser sent a
        control's new value with this rerun (its query may be older than that write)."""
        if written is None:
            return False
        now = self.params()
        names = set(written) | (set(now) & set(SHARED))
        return any(now.get(name) != written.get(name) for name in names)

    def _apply_controls(self, whole: bool) -> None:
        state = st.session_state
        controls = self.controls
        given = {name: text for name, text in self.incoming.items() if name not in RESERVED}
        if whole and controls.prefix:
            for key in [key for key in state if controls.kind_of(str(key))]:
                if controls.name_of(key) not in given:
                    del state[key]  # left out of a whole view: back to the default
        for name, text in given.items():
            key = controls.key_of(name)
            kind = controls.kind_of(key) if controls.prefix else None
            if kind is None:
                self.notes.append(f"{quoted(name)} is not a setting of this page; it was left "
                                  "out.")
                continue
            try:
                value = read_value(kind, text, state.get(key))
            except Refused as reason:
                self.notes.append(f"The link's {name}={quoted(text)} {reason}; it was left out.")
                continue
            state[key] = value
            self.applied[key] = value

    # -- after the sidebar, before the page ---------------------------------------------
    def params(self, drawn: set[str] | None = None) -> dict[str, str]:
        """The view in the session now: shared inputs, then this page's controls (only those
        in `drawn` when given: a control the page no longer shows is not part of the view)."""
        params = shared_params()
        controls = self.controls
        if not controls.prefix:
            return params
        present = [str(key) for key in st.session_state]
        for key in [*controls.kinds, *sorted(present)]:
            if key in st.session_state and controls.kind_of(key) \
                    and controls.name_of(key) not in params and (drawn is None or key in drawn):
                text = control_text(controls.kind_of(key), st.session_state[key])
                if text is not None:
                    params[controls.name_of(key)] = text
        return params

    def share(self) -> None:
        """Offer the link in the sidebar; write the URL now only if the page's last run ended
        early (`st.stop()` or an error), since this one may too.

        The URL is otherwise written after the page: only then is it what the page shows (a
        slider whose range changed starts again from its default), and only then has Streamlit's
        frontend moved to a newly picked page's path (a query written before that would make a
        history entry of the old path with the new page's query)."""
        if not self.switched and not self.last_ended:
            self._write()
        self._show_notes()
        self.link_slot = st.sidebar.empty()
        self._offer_link()
        st.sidebar.button("Add this view to the deck", key="deck_add_view", width="stretch",
                          icon=":material/playlist_add:", on_click=_add_to_deck,
                          args=(self.url_path, self.title),
                          help="The view as it is now becomes the last slide of the deck you "
                               "are building (see Slide decks).")
        message = add_message()
        if message:
            st.sidebar.caption(plain(message))

    def _offer_link(self) -> None:
        with self.link_slot.container():
            with st.popover("Link to this view", icon=":material/link:", width="stretch"):
                st.caption("Anyone who opens this link sees this page with the same sentence, "
                           "model and settings. Copy it with the button in the box's corner.")
                st.code(self.url(), language=None, wrap_lines=True)

    def _write(self, drawn: set[str] | None = None) -> None:
        """Write the view into the URL unless both the query this run was given and the last
        one written or read hold it already (the given one alone may be stale)."""
        params = self.params(drawn)
        state = st.session_state
        if params != st.query_params.to_dict() or params != state.get(WRITTEN):
            st.query_params.from_dict(params)
        state[WRITTEN] = self.written = params

    def url(self) -> str:
        """The full link: this server's address as the browser sees it, the page and query."""
        query = urlencode(self.written if self.written is not None else self.params())
        base = st.context.url
        if base:
            parts = urlsplit(base)
            root = f"{parts.scheme}://{parts.netloc}"
        else:
            host = st.context.headers.get("host") if st.context.headers else None
            root = f"http://{host}" if host else ""
        prefix = (st.get_option("server.baseUrlPath") or "").strip("/")
        path = "/".join(part for part in (prefix, self.url_path) if part)
        return f"{root}/{path}" + (f"?{query}" if query else "")

    def _show_notes(self) -> None:
        if self.notes:
            self.slot.info("  \n".join(plain(note) for note in dict.fromkeys(self.notes)),
                           icon=":material/link:")

    # -- after the page -----------------------------------------------------------------
    def check(self) -> None:
        """After the page: a note for each value from the link that it showed differently, and
        the URL and the offered link set to what it shows."""
        state = st.session_state
        corrected = state.get(CORRECTED, set())
        for key, value in self.applied.items():
            shown = state.get(key)
            if key not in state or _same(shown, value):
                continue
            if key not in corrected:
                name = self.controls.name_of(key)
                kind = self.controls.kind_of(key)
                self.notes.append(f"The link's {name}={control_text(kind, value)} is not "
                                  "available here; showing "
                                  f"{control_text(kind, shown) or 'another choice'}.")
        self._write(drawn_keys())
        self._offer_link()
        self._show_notes()
        state[ENDED] = True

    def retry_without_link(self, error: Exception) -> bool:
        """After the page failed on a value from the link (a slider refuses a number outside
        its range, a button refuses any value): draw the page again without it. False when
        the failure had nothing to do with the link."""
        if not self.applied:
            return False
        refused = _refusing_key(error, self.applied) or list(self.applied)
        logger.info("page %s refused %s from a link (%r); drawn again without", self.url_path,
                    refused, error)
        for key in refused:
            st.session_state.pop(key, None)
        shown = ", ".join(f"{self.controls.name_of(key)}="
                          f"{control_text(self.controls.kind_of(key), self.applied[key])}"
                          for key in refused)
        state = st.session_state
        state[CARRIED_NOTES] = self.notes + [
            f"The link's {shown} is outside what this page allows; it was left out."]
        state[CARRIED_VALUES] = {key: value for key, value in self.applied.items()
                                 if key not in refused}
        state[WRITTEN] = self.incoming  # the next run does not read the link again
        st.rerun()
        return True  # not reached: st.rerun() ends this run


def _add_to_deck(url_path: str, title: str) -> None:
    """Button callback: the view on screen (the query last written) as a slide."""
    query = st.session_state.get(WRITTEN) or {}
    page = "attention_maps" if url_path in ("", "maps_default") else url_path
    add_view(view_of(page, query), title)


def _refusing_key(error: BaseException, applied: dict[str, object]) -> list[str]:
    """The key of the widget that raised `error`, when it is one the link set (read from the
    `key` argument of the innermost Streamlit frame that has one)."""
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    for frame in reversed(frames):
        key = frame.f_locals.get("key")
        if isinstance(key, str) and key in applied:
            return [key]
    return []
