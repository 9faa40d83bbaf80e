"""Dogfood: the linter finds nothing in the runtime library, whose optimizers and
schedulers are the compliant code users copy, and it does check them (only the base
classes are machinery): a mistake planted in one is found."""

from __future__ import annotations

from pathlib import Path

import cslint.cstorch as cstorch
from cslint.config import Config
from cslint.engine import lint

LIBRARY = Path(cstorch.__file__).parent
EVERY_RULE = Config(select=("ALL",))


def library_files() -> list[str]:
    return sorted(str(path) for path in LIBRARY.rglob("*.py"))


def test_the_linter_finds_nothing_in_the_runtime_library():
    result = lint(library_files(), EVERY_RULE, project_root=LIBRARY.parent.parent)
    assert not result.errors
    assert [f"{f.path}:{f.location.line}: {f.code} {f.message}" for f in result.findings] == []
    assert result.files_checked == len(library_files())


def test_a_mistake_planted_in_a_library_optimizer_is_found():
    sgd = LIBRARY / "optim" / "sgd.py"
    text = sgd.read_text()
    anchor = '            momentum = group["momentum"]\n'
    assert anchor in text
    planted = text.replace(anchor, anchor + '            if group["lr"] > 0.5:\n'
                                            '                momentum = 0.0\n')
    files = library_files()
    shown = str(sgd)
    result = lint(files, EVERY_RULE, project_root=LIBRARY.parent.parent,
                  replaced={shown: planted.encode()})
    assert [(f.path, f.code) for f in result.findings] == [(shown, "CS201")]
