"""Hostile inputs: each is one line naming the file (or ordinary findings, where the file
is valid Python), the other files are still checked, and nothing hangs or crashes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A file with one finding on its line 10 (CS101: state created lazily in step()).
LAZY_LINES = [
    "import torch",
    "import cerebras.pytorch as cstorch",
    "class Lazy(cstorch.optim.Optimizer):",
    "    def preinitialize(self):",
    "        pass",
    "    def step(self, closure=None):",
    "        for group in self.param_groups:",
    "            for p in group['params']:",
    "                if not self.state[p]:",
    "                    self.state[p]['m'] = torch.zeros_like(p)",
]


def lazy(newline: str = "\n", encoding: str = "utf-8", prefix: str = "") -> bytes:
    return (prefix + newline.join(LAZY_LINES) + newline).encode(encoding)


VALID = {
    "bom_crlf.py": b"\xef\xbb\xbf" + lazy("\r\n"),
    "cr_only.py": lazy("\r"),
    "latin1.py": lazy(encoding="latin-1", prefix="# -*- coding: latin-1 -*-\n# caf\xe9\n"
                      ).replace(b"import torch\n", b"import torch\n", 1),
    "form_feed.py": lazy().replace(b"import torch\n", b"import torch\n\x0c\n", 1),
    "tabs.py": lazy().replace(b"    ", b"\t"),
    "caf\u00e9 \u00fcber.py": lazy(),
    "with space.py": lazy(),
}
# The line of the finding in each valid file.
FINDING_LINE = {"latin1.py": 12, "form_feed.py": 11}

BROKEN = {
    "binary.py": (bytes(range(256)) * 8, "not valid utf-8"),
    "nul.py": (b"x = 1\n\x00\ny = 2\n", "null bytes"),
    "invalid_utf8.py": (b"x = '\xff\xfe'\n", "not valid utf-8"),
    "utf16.py": (b"\xff\xfe" + "x = 1\n".encode("utf-16-le"), "not valid utf-8"),
    "deep.py": (b"x = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n", "too deeply nested"),
}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "good.py").write_bytes(lazy())
    return tmp_path


def run(project, *paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cslint", "check", "--no-config",
                           "--no-cache", *paths], cwd=project, capture_output=True,
                          timeout=60)


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_python_in_any_encoding_and_layout_is_checked(project, name):
    (project / name).write_bytes(VALID[name])
    result = run(project, name, "good.py")
    out = result.stdout.decode()
    assert result.returncode == 1, result.stderr
    line = FINDING_LINE.get(name, 10)
    assert f"{name}:{line}:" in out and "CS101" in out, out
    assert "good.py:10:" in out and b"Traceback" not in result.stderr


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_input_is_one_line_and_the_others_are_checked(project, name):
    content, problem = BROKEN[name]
    (project / name).write_bytes(content)
    result = run(project, name, "good.py")
    errors = result.stderr.decode().splitlines()
    assert result.returncode == 2
    assert len(errors) == 1 and errors[0].startswith(f"cslint: error: {name}")
    assert problem in errors[0], errors
    assert "good.py:10:" in result.stdout.decode()


def test_a_folder_of_hostile_files_is_checked_in_one_run(project):
    for name, content in VALID.items():
        (project / name).write_bytes(content)
    for name, (content, _) in BROKEN.items():
        (project / name).write_bytes(content)
    os.mkfifo(project / "fifo.py")
    (project / "dangling.py").symlink_to(project / "missing.py")
    result = run(project, ".")
    errors = result.stderr.decode().splitlines()
    assert result.returncode == 2
    assert b"Traceback" not in result.stderr
    assert len(errors) == len(BROKEN) + 2, errors
    assert result.stdout.decode().count("CS101") == len(VALID) + 1


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_file_read_gives_back_its_exact_bytes(tmp_path, name):
    """A UTF-8 file's bytes are not held beside its text, but given back from it: BOM,
    line endings and all; a file in another encoding keeps them."""
    from cslint.source import SourceFile

    path = tmp_path / name
    path.write_bytes(VALID[name])
    source = SourceFile.read(path, name, 10_000_000)
    assert source.raw == VALID[name]
    assert (source._raw is None) == (source.encoding == "utf-8")


@pytest.mark.parametrize("name", sorted(VALID))
def test_each_definition_parsed_alone_is_where_the_whole_parse_has_it(tmp_path, name):
    import ast

    from cslint.semantic.module_index import build_module_index
    from cslint.source import SourceFile

    path = tmp_path / name
    path.write_bytes(VALID[name])
    source = SourceFile.read(path, name, 10_000_000)
    module = build_module_index(source.parse(), path, name, source_text=source.text)
    entries = [*module.functions.values(), *module.classes.values(),
               *(m for c in module.classes.values() for m in c.methods.values())]
    assert entries
    whole = [ast.dump(e.node, include_attributes=True) for e in entries]
    module.release_tree()
    assert [ast.dump(e.node, include_attributes=True) for e in entries] == whole
    assert module.held_tree is None


def test_a_text_held_compressed_gives_back_the_text_and_the_bytes(tmp_path):
    """A large project's UTF-8 texts cross from the reading workers compressed and stay so
    until read: each gives back its exact text, lines and bytes (BOM and line endings
    kept), however many are read in turn (a few are kept decompressed)."""
    from cslint.source import _UNPACKED_KEPT, SourceFile

    read = []
    for name in sorted(VALID):
        path = tmp_path / name
        path.write_bytes(VALID[name])
        read.append(SourceFile.read(path, name, 10_000_000))
    utf8 = [source for source in read if source.pack_text() is not None]
    assert utf8 and len(utf8) < len(read), "UTF-8 files and others among VALID"
    copies = [SourceFile.from_packed(s.path, s.display_path, s.pack_text(), s.has_bom,
                                     s.text_length) for s in utf8]
    # More than are kept decompressed, read back and forth.
    copies = copies * (_UNPACKED_KEPT // len(copies) + 2)
    originals = utf8 * (_UNPACKED_KEPT // len(utf8) + 2)
    for order in (range(len(copies)), reversed(range(len(copies)))):
        for index in order:
            copy, original = copies[index], originals[index]
            assert copy.text == original.text
            assert copy.text_length == len(original.text)
            assert copy.raw == VALID[original.display_path]
            assert copy.lines == original.lines
