"""One model of each kind for the hook tests, built once per session (tests/hooks/cases.py)."""

from __future__ import annotations

import pytest

from tests.hooks.cases import KINDS, build_case


@pytest.fixture(scope="session")
def cases(request, tmp_path_factory):
    """kind -> Case, built on first use."""
    built = {}

    def get(kind):
        if kind not in built:
            built[kind] = build_case(kind, request, tmp_path_factory.mktemp(kind))
        return built[kind]
    return get


@pytest.fixture(params=KINDS)
def case(request, cases):
    return cases(request.param)
