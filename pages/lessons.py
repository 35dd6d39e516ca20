import streamlit as st

from ui import lessons
from ui.routing import through_app

through_app()

st.title("Lessons")
st.markdown(
    "Short guided lessons, one for each theme of the chapters. Every step explains one idea in "
    "a few sentences, shows it on **your own sentence** from the sidebar, gives you something "
    "to try and asks one question. Each step has its own link (Link to this view, in the "
    "sidebar), so a class can open the same step."
)
lesson = st.selectbox("Lesson", [lesson.key for lesson in lessons.LESSONS],
                      format_func=lessons.lesson_label, key="lessons_lesson",
                      on_change=lessons.restart_lesson)
lessons.valid_step(lesson)
steps = range(1, len(lessons.BY_LESSON[lesson].steps) + 1)
step = st.radio("Step", steps, format_func=lessons.step_label(lesson), horizontal=True,
                key="lessons_step")
lessons.show_step(lesson, step)
