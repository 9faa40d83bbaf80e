"""The same output, byte for byte, for any order of the paths, any number of jobs, with
and without the cache."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from helpers import REPO


def check(root, *arguments: str) -> bytes:
    result = subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                             "--select", "ALL", "--format", "json", *arguments], cwd=root,
                            capture_output=True)
    assert result.returncode == 1, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def fixtures_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(REPO / "fixtures", root / "fixtures")
    (root / "pyproject.toml").write_text("")
    return root


def test_jobs_order_and_cache_do_not_change_the_output(fixtures_project):
    root = fixtures_project
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*.py"))
    assert len(files) >= 32, "enough files for two workers"
    expected = check(root, "--no-cache", "--jobs", "1", *files)
    assert check(root, "--no-cache", "--jobs", "2", *files) == expected
    assert check(root, "--no-cache", "--jobs", "1", *reversed(files)) == expected
    assert check(root, "--no-cache", "--jobs", "2", *reversed(files)) == expected
    assert check(root, "--jobs", "2", *files) == expected  # cold cache
    assert check(root, "--jobs", "1", *reversed(files)) == expected  # warm cache


def test_a_bad_jobs_value_is_a_usage_error(fixtures_project):
    result = subprocess.run([sys.executable, "-m", "cslint", "check", "--jobs", "0", "."],
                            cwd=fixtures_project, capture_output=True, text=True)
    assert result.returncode == 2
    assert "--jobs" in result.stderr and "Traceback" not in result.stderr
