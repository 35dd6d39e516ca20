"""What a lesson is made of, as plain data: a lesson is a list of steps; a step has a title, two
or three sentences, one live figure (ui/lesson_figures.py), a "try this" action and a check
question."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Choice:
    text: str
    right: bool
    why: str  # one or two sentences: why this answer is right or wrong


@dataclass(frozen=True)
class Question:
    prompt: str
    choices: tuple[Choice, ...]

    def __post_init__(self) -> None:
        if sum(choice.right for choice in self.choices) != 1:
            raise ValueError(f"'{self.prompt}' needs exactly one right answer")

    @property
    def right_index(self) -> int:
        return next(i for i, choice in enumerate(self.choices) if choice.right)


@dataclass(frozen=True)
class SetSidebar:
    """Try this: a button that changes the sidebar's sentence or model."""

    label: str
    text: str | None = None
    kind: str | None = None  # a registered kind (models/loading/kinds/)


@dataclass(frozen=True)
class ToggleModel:
    """Try this: a button that switches the sidebar between the encoder and the decoder."""


@dataclass(frozen=True)
class Switch:
    """Try this: a button that turns one of the lesson's own switches on or off."""

    name: str
    turn_on: str
    turn_off: str


@dataclass(frozen=True)
class OpenExample:
    """Try this: a link that opens one of the chapters' examples (ui/examples.py)."""

    example: str
    label: str


@dataclass(frozen=True)
class OpenPage:
    """Try this: a link to one of the app's pages."""

    page: str  # its file, "pages/masked_lm.py"
    label: str


Action = SetSidebar | ToggleModel | Switch | OpenExample | OpenPage


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    figure: Callable[[str], None]  # draws the step's figure; its argument is the chart's key
    action: Action
    question: Question


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    chapters: str
    steps: tuple[Step, ...] = field(default_factory=tuple)


def question(prompt: str, *choices: tuple[str, bool, str]) -> Question:
    return Question(prompt, tuple(Choice(*choice) for choice in choices))
