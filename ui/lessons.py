"""Guided lessons, one per theme of the chapters: short steps on the user's own sentence.

Content is plain data: a lesson is a list of steps; a step has a title, two or three sentences,
one live figure, a "try this" action and a check question. Figures are drawn from the app's
caches (the sidebar's trace, the teaching caches, the toy translator when it is trained); the
fine-tuning steps train their classifier on first use, once per machine, and keep it on disk. Progress (steps done, questions answered right) lives in the session.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from models.loading import kinds
from models.loading.kinds import DECODER, PRETRAINED
from ui.examples import BY_KEY, link_params
from ui.lesson_content import LESSONS
from ui.lesson_steps import Action, OpenPage, Question, SetSidebar, Switch, ToggleModel
from ui.lesson_figure_kit import FLAG, flag
from ui.state import sidebar_input

PROGRESS = "lessons_progress"  # session key: {"done": set, "right": set, "answers": dict}
STEP_KEY = "lessons_step"


BY_LESSON = {lesson.key: lesson for lesson in LESSONS}


# --- progress -------------------------------------------------------------------------------

def progress() -> dict:
    """This session's progress: steps done and questions answered right, as (lesson, step)."""
    return st.session_state.setdefault(PROGRESS, {"done": set(), "right": set(), "answers": {}})


def lesson_label(key: str) -> str:
    lesson = BY_LESSON[key]
    done = sum((key, n) in progress()["done"] for n in range(1, len(lesson.steps) + 1))
    mark = " ✓" if done == len(lesson.steps) else ""
    return f"{lesson.title} ({lesson.chapters}){mark}"


def valid_step(lesson: str) -> None:
    """Before the step picker: a step the lesson does not have moves to step 1 (the link
    then says so)."""
    count = len(BY_LESSON[lesson].steps)
    if st.session_state.get(STEP_KEY) not in range(1, count + 1):
        st.session_state[STEP_KEY] = 1


def restart_lesson() -> None:
    """The lesson picker's callback: a new lesson starts at step 1."""
    st.session_state[STEP_KEY] = 1


def step_label(lesson: str) -> Callable[[int], str]:
    steps = BY_LESSON[lesson].steps
    done = progress()["done"]
    return lambda number: (f"{number}. {steps[number - 1].title}"
                           + (" ✓" if (lesson, number) in done else ""))


def _move(lesson: str, number: int, by: int) -> None:
    """Previous (by = -1), next (1) or finish (0); moving on or finishing marks the step done."""
    if by >= 0:
        progress()["done"].add((lesson, number))
    st.session_state[STEP_KEY] = number + by


def _answered(lesson: str, number: int, key: str) -> None:
    choice = st.session_state.get(key)
    if choice is None:
        return
    state = progress()
    state["answers"][(lesson, number)] = choice
    question = BY_LESSON[lesson].steps[number - 1].question
    if choice == question.right_index:
        state["right"].add((lesson, number))
        state["done"].add((lesson, number))
    else:
        state["right"].discard((lesson, number))


def _set_sidebar(text: str | None, kind: str | None) -> None:
    if text is not None:
        st.session_state["sb_text"] = text
        st.session_state["sb_pair"] = ""
    if kind is not None:
        st.session_state["sb_kind"] = kind


def _toggle_model() -> None:
    """Between the pretrained encoder and the causal decoder."""
    causal = kinds.spec(st.session_state.get("sb_kind", kinds.default_kind().value)).causal
    st.session_state["sb_kind"] = (PRETRAINED if causal else DECODER).value


def _toggle_flag(name: str) -> None:
    st.session_state[FLAG + name] = not flag(name)


def _try_this(action: Action, key: str) -> None:
    st.markdown("**Try this**")
    if isinstance(action, SetSidebar):
        st.button(action.label, key=key, on_click=_set_sidebar, args=(action.text, action.kind))
    elif isinstance(action, ToggleModel):
        causal = sidebar_input().source.causal
        st.button("Switch the model back to the pretrained encoder" if causal
                  else "Switch the model to the causal decoder", key=key, on_click=_toggle_model)
    elif isinstance(action, OpenPage):
        st.page_link(action.page, label=action.label, icon=":material/open_in_new:")
    elif isinstance(action, Switch):
        st.button(action.turn_off if flag(action.name) else action.turn_on, key=key,
                  on_click=_toggle_flag, args=(action.name,))
    else:
        example = BY_KEY[action.example]
        st.page_link(example.page_file, label=action.label, icon=":material/open_in_new:",
                     query_params=link_params(example))


def _check(lesson: str, number: int, question: Question) -> None:
    st.markdown("**Check**")
    key = f"lessons_answer_{lesson}_{number}"
    stored = progress()["answers"].get((lesson, number))
    if stored is not None:  # the answer given
        st.session_state.setdefault(key, stored)
    choice = st.radio(question.prompt, range(len(question.choices)), index=None,
                      format_func=lambda i: question.choices[i].text, key=key,
                      on_change=_answered, args=(lesson, number, key))
    if choice is not None:
        picked = question.choices[choice]
        if picked.right:
            st.success(f"Right. {picked.why}", icon=":material/check_circle:")
        else:
            st.warning(f"Not quite. {picked.why}", icon=":material/help:")


def show_step(lesson_key: str, number: int) -> None:
    """One step: text, figure, try this, check question, previous/next and progress."""
    lesson = BY_LESSON[lesson_key]
    step = lesson.steps[number - 1]
    prefix = f"lessons_{lesson_key}_{number}"
    st.subheader(f"{number}. {step.title}")
    st.markdown(step.text)
    step.figure(f"{prefix}_figure")
    _try_this(step.action, f"{prefix}_try")
    _check(lesson_key, number, step.question)
    back, forward = st.columns(2)
    back.button("← Previous", key="lessons_previous", disabled=number == 1, width="stretch",
                on_click=_move, args=(lesson_key, number, -1))
    last = number == len(lesson.steps)
    forward.button("Finish the lesson" if last else "Next →", key="lessons_next", type="primary",
                   width="stretch", on_click=_move, args=(lesson_key, number, 0 if last else 1))
    state = progress()
    count = len(lesson.steps)
    done = sum((lesson_key, n) in state["done"] for n in range(1, count + 1))
    right = sum((lesson_key, n) in state["right"] for n in range(1, count + 1))
    st.progress(done / count, text=f"This lesson: {done} of {count} steps done, {right} of "
                                   f"{count} questions answered right.")
