"""Fixtures shared by the test modules (helpers.py holds the plain helper functions)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers import SOURCES_RELEASE, SOURCES_VARIABLE


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@pytest.fixture(scope="session")
def cerebras_pytorch() -> Path:
    """The `cerebras/pytorch` folder of the released cerebras-pytorch sources.

    Unset variable: skip, except under CI=true, where it fails (CI must run these tests,
    not skip them quietly). A variable that points at the wrong thing always fails."""
    value = os.environ.get(SOURCES_VARIABLE)
    if not value:
        message = (f"needs the cerebras-pytorch {SOURCES_RELEASE} sources: set "
                   f"{SOURCES_VARIABLE} to the folder holding cerebras/pytorch of the unpacked "
                   "wheel (.ci/run does)")
        if _in_ci():
            pytest.fail(f"CI=true but {SOURCES_VARIABLE} is unset; {message}", pytrace=False)
        pytest.skip(message)
    package = Path(value) / "cerebras" / "pytorch"
    version_file = package / "_version.py"
    if not (package / "optim").is_dir() or not version_file.is_file():
        pytest.fail(f"{SOURCES_VARIABLE}={value} holds no cerebras/pytorch/optim "
                    "(it must name the folder that holds `cerebras/`)", pytrace=False)
    match = re.search(r"""__version__\s*=\s*['"]([^'"]+)['"]""",
                      version_file.read_text(encoding="utf-8"))
    found = match.group(1) if match else "unknown"
    if found != SOURCES_RELEASE:
        pytest.fail(f"{SOURCES_VARIABLE} holds cerebras-pytorch {found}; the tests expect "
                    f"{SOURCES_RELEASE}", pytrace=False)
    return package.resolve()
