"""Fixtures for the cslint.cstorch runtime tests."""

from __future__ import annotations

import os
import sys

import pytest

# The tests import their shared helpers as a top-level module; make that work
# under any pytest import mode (importlib mode does not extend sys.path).
sys.path.insert(0, os.path.dirname(__file__))

import cslint.cstorch as cstorch  # noqa: E402


@pytest.fixture(autouse=True)
def strict_mode_is_restored():
    """Every test starts in strict mode and must leave it that way."""
    assert cstorch.is_strict()
    yield
    left_on = cstorch.is_strict()
    cstorch.strict(True)
    assert left_on, "the test left strict mode off"


@pytest.fixture(autouse=True)
def no_backend_is_left_behind():
    """A process has one cstorch backend: each test starts without one."""
    yield
    cstorch.local_backend.discard_backend()


@pytest.fixture
def cpu_backend():
    """A fresh CPU backend for the test."""
    cstorch.local_backend.discard_backend()
    return cstorch.backend("CPU")
