"""Issue 22, point 6: long inputs queue visibly. One long forward runs at a time server-wide;
each waiting session sees how many are ahead of it; a session that cancels, reruns or closes its
tab leaves the line (Streamlit raises StopException or RerunException in the waiting thread at
its next `st` call) and the others move up.

Sessions are threads here, as they are in Streamlit's server; each test waits for states (a place
taken, a callback reached) with a generous deadline, never for a fixed time.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

from models import threads
from ui.attention import WaitingLine, one_at_a_time, place_text

DEADLINE_S = 30


def until(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Session:
    """A session's thread asking `line` to run its work; records the places it was shown, and
    raises `stop` from its notice once it has been shown one (a Cancel click or a closed tab)."""

    def __init__(self, line: WaitingLine, name: str, ran: list[str],
                 stop: BaseException | None = None):
        self.line, self.name, self.ran, self.stop = line, name, ran, stop
        self.places: list[int] = []
        self.release = threading.Event()
        self.outcome: BaseException | str | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _waiting(self, ahead: int) -> None:
        self.places.append(ahead)
        if self.stop is not None:
            raise self.stop

    def _work(self) -> str:
        self.ran.append(self.name)
        assert self.release.wait(DEADLINE_S)
        return self.name

    def _run(self) -> None:
        try:
            self.outcome = self.line.run(self._work, self._waiting)
        except BaseException as error:  # noqa: BLE001 - what ended the session's run
            self.outcome = error

    def start(self, line_length: int | None = None) -> Session:
        """Start, and wait until the line is `line_length` long (its place taken)."""
        self.thread.start()
        if line_length is not None:
            until(lambda: len(self.line) == line_length, f"{self.name} to take its place")
        return self

    def finish(self) -> None:
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive()


def test_waiting_sessions_see_their_places_and_run_in_order():
    line, ran = WaitingLine(), []
    first = Session(line, "first", ran).start(1)
    until(lambda: ran == ["first"], "the first to run")
    second = Session(line, "second", ran).start(2)
    third = Session(line, "third", ran).start(3)
    until(lambda: second.places and third.places, "both to be shown their places")
    assert second.places[0] == 1 and third.places[0] == 2
    assert ran == ["first"]  # nobody else runs while the first does

    first.release.set()
    first.finish()
    until(lambda: ran == ["first", "second"], "the second to run")
    until(lambda: third.places[-1] == 1, "the third to move up")
    assert set(third.places) == {1, 2}
    second.release.set()
    third.release.set()
    for session in (second, third):
        session.finish()
    assert ran == ["first", "second", "third"]
    assert [s.outcome for s in (first, second, third)] == ["first", "second", "third"]
    assert len(line) == 0


@pytest.mark.parametrize("stop", [RerunException(RerunData()), StopException()],
                         ids=["cancel or rerun", "tab closed"])
def test_a_run_stopped_while_waiting_leaves_the_line(stop):
    line, ran = WaitingLine(), []
    first = Session(line, "first", ran).start(1)
    until(lambda: ran == ["first"], "the first to run")
    leaving = Session(line, "leaving", ran, stop=stop).start()
    leaving.finish()  # its notice raised: the run stopped
    assert leaving.outcome is stop and leaving.places == [1]
    assert len(line) == 1  # its place is gone
    after = Session(line, "after", ran).start(2)
    until(lambda: after.places, "the next to be shown its place")
    assert after.places[0] == 1  # the stopped session is no longer ahead of it
    first.release.set()
    after.release.set()
    first.finish()
    after.finish()
    assert ran == ["first", "after"] and len(line) == 0


def test_work_that_fails_leaves_the_line():
    line = WaitingLine()

    def broken():
        raise ValueError("the forward failed")

    with pytest.raises(ValueError):
        line.run(broken, lambda ahead: None)
    assert len(line) == 0
    assert line.run(lambda: "next", lambda ahead: pytest.fail("nobody is ahead")) == "next"


def test_the_apps_line_waits_for_the_long_read_before_it():
    """ui.attention.one_at_a_time, the line the app uses, from two threads outside any script run
    (Streamlit's calls draw nothing there)."""
    started, release, results = threading.Event(), threading.Event(), []

    def long_read():
        started.set()
        assert release.wait(DEADLINE_S)
        return "first"

    first = threading.Thread(target=lambda: results.append(one_at_a_time(long_read)))
    first.start()
    assert started.wait(DEADLINE_S)
    second = threading.Thread(target=lambda: results.append(one_at_a_time(lambda: "second")))
    second.start()
    time.sleep(0.2)  # the second cannot finish while the first holds the line, however long
    assert results == []
    release.set()
    for thread in (first, second):
        thread.join(DEADLINE_S)
    assert results == ["first", "second"]


def test_the_place_is_said_in_words():
    assert place_text(1).startswith("1 long text ahead of yours")
    assert place_text(2).startswith("2 long texts ahead of yours")
    assert "yours starts when they finish" in place_text(3)


def test_the_lines_forward_runs_on_every_core_and_other_threads_keep_theirs(monkeypatch):
    """The line's one forward takes every core (models/threads.py `one_forward_threads`); a
    served session's thread, started before it and given its plan before its first torch work
    (as app.py's script threads are), keeps its one thread meanwhile, and the line's thread gets
    its own count back after. (Under pytest -n the operator's OMP_NUM_THREADS=1 would win: unset
    here.)"""
    for name in (threads.SETTING_VARIABLE, threads.THREADS_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    cores = threads.available_cores()
    assert threads.one_forward_threads() == cores
    inside, beside = [], []
    planned, started, release = threading.Event(), threading.Event(), threading.Event()

    def long_read():
        inside.append(torch.get_num_threads())
        started.set()
        assert release.wait(DEADLINE_S)
        inside.append(torch.get_num_threads())

    def session():  # another session's script thread: app.py applies the served plan first
        assert threads.configure_server_threads().threads == 1
        planned.set()
        assert started.wait(DEADLINE_S)
        beside.append(torch.get_num_threads())  # its first torch call after the line's start
        release.set()

    torch.set_num_threads(1)
    other = threading.Thread(target=session)
    other.start()
    assert planned.wait(DEADLINE_S)  # the session's plan first, then the line's forward
    reader = threading.Thread(target=lambda: one_at_a_time(long_read))
    reader.start()
    for thread in (reader, other):
        thread.join(DEADLINE_S)
    assert inside == [cores, cores] and beside == [1]
    assert torch.get_num_threads() == 1  # this thread, untouched
