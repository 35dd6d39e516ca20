"""Every lesson, in the order the start page and the Lessons page list them (ui/lesson_steps.py
says what a lesson is made of)."""

from __future__ import annotations

from ui.lesson_steps import Lesson
from ui.lessons_attention import ATTENTION_LESSONS
from ui.lessons_models import MODEL_LESSONS

LESSONS: tuple[Lesson, ...] = ATTENTION_LESSONS + MODEL_LESSONS
