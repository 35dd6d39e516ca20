"""A link's values: text in a link read as Python values, totally (a value that cannot be used
is refused with a reason, never an exception), and written back as text."""

from __future__ import annotations

import math
import numbers
import re

from models.limits import LINK_CONTROL_CHARS, LINK_NUMBER_DIGITS


TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


LIST_SEPARATOR = ","  # a multiselect's choices in a link: heads=3-5,7-1


class Refused(ValueError):
    """A link's value that cannot be read as what the control needs."""


def as_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise Refused("is not true or false")


def as_number(text: str) -> int | float:
    """A number read from a link; refused before it is converted when it has more digits than any
    control can use (Python reads no int of more than 4,300 digits, a float overflows above
    about 1.8e308), and when it is not finite."""
    text = text.strip()
    if not NUMBER.fullmatch(text):
        raise Refused("is not a number")
    mantissa = re.split(r"[eE]", text)[0]
    if sum(character.isdigit() for character in mantissa) > LINK_NUMBER_DIGITS:
        raise Refused(f"has more than {LINK_NUMBER_DIGITS} digits")
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise Refused("is not a number")
    return value


def _as_whole(text: str) -> int:
    number = as_number(text)
    if isinstance(number, int):  # exact: a float of a 300-digit int would not equal it
        return number
    if not number.is_integer():
        raise Refused("is not a whole number")
    return int(number)


def _guess(text: str) -> int | float | str:
    """A choice's value when nothing says its type: a number if it reads as one."""
    try:
        return as_number(text)
    except Refused:
        return text


def _like(current: object, text: str) -> object:
    """`text` read as the type the session already holds for this control."""
    if isinstance(current, bool):
        return as_bool(text)
    if isinstance(current, numbers.Integral):
        return _as_whole(text)
    if isinstance(current, numbers.Real):
        return float(as_number(text))
    return text


def read_value(kind: str, text: str, current: object = None) -> object:
    """The value a control of `kind` gets from `text`; raises Refused when it cannot."""
    if len(text) > LINK_CONTROL_CHARS:
        raise Refused("is too long")
    if kind == "bool":
        return as_bool(text)
    if kind == "text":
        return text
    if kind in ("index", "int"):
        return _as_whole(text)
    if kind == "float":
        return float(as_number(text))
    if kind == "list":
        return [_guess(part) for part in text.split(LIST_SEPARATOR) if part]
    if isinstance(current, (bool, numbers.Real, str)):
        return _like(current, text)
    if kind == "number":
        return as_number(text)
    return _guess(text)


def link_text(value: object) -> str | None:
    """How a scalar value is written in a link; None for anything that is not one."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value)) if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= LINK_CONTROL_CHARS else None
    return None


def control_text(kind: str | None, value: object) -> str | None:
    """How a control's value is written in a link: a multiselect's choices joined by commas
    (left out when empty, or when a choice is not a scalar or holds a comma), else link_text."""
    if kind != "list":
        return link_text(value)
    if not isinstance(value, (list, tuple)) or not value:
        return None
    texts = [link_text(item) for item in value]
    if any(text is None or LIST_SEPARATOR in text for text in texts):
        return None
    joined = LIST_SEPARATOR.join(texts)
    return joined if len(joined) <= LINK_CONTROL_CHARS else None


def quoted(text: str) -> str:
    """A link's text in a note: quoted, and cut short when long."""
    return f"'{text[:40]}…'" if len(text) > 40 else f"'{text}'"
