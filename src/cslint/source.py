"""Reading and parsing one source file: bytes, encoding (PEP 263 / BOM), `ast`.

Every failure becomes an `InputError` carrying one line for the user; the
caller reports it and goes on with the other files.
"""

from __future__ import annotations

import ast
import io
import os
import re
import stat
import tokenize
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cslint.diagnostics import InputProblem


class InputError(Exception):
    """A file that cannot be read, decoded, parsed or analysed."""

    def __init__(self, display_path: str, problem: str, line: int | None = None,
                 column: int | None = None):
        self.display_path = display_path
        self.problem = problem
        self.line = line
        self.column = column
        super().__init__(self.render())

    def as_problem(self) -> InputProblem:
        return InputProblem(self.display_path, self.problem, self.line, self.column)

    def render(self) -> str:
        return str(self.as_problem())


def unreadable(display_path: str, path: Path, error: OSError) -> InputError:
    """The problem an operating-system error makes of a file to read."""
    if isinstance(error, FileNotFoundError):
        problem = "broken symbolic link" if os.path.islink(path) else "no such file or directory"
    elif isinstance(error, IsADirectoryError):
        problem = "is a directory"
    else:
        problem = f"cannot read: {error.strerror or error}"
    return InputError(display_path, problem)


def stat_mode(path: Path, display_path: str) -> int:
    """The mode of what `path` leads to (symlinks followed); InputError when nothing can
    be reached there."""
    try:
        return os.stat(path).st_mode
    except OSError as error:
        raise unreadable(display_path, path, error) from None
    except ValueError:  # a NUL byte in the path
        raise InputError(display_path, "no such file or directory") from None


_FILE_KINDS = ((stat.S_ISFIFO, " (a FIFO)"), (stat.S_ISCHR, " (a character device)"),
               (stat.S_ISBLK, " (a block device)"), (stat.S_ISSOCK, " (a socket)"))


def _not_regular(display_path: str, mode: int) -> InputError:
    if stat.S_ISDIR(mode):
        return InputError(display_path, "is a directory")
    kind = next((name for is_kind, name in _FILE_KINDS if is_kind(mode)), "")
    return InputError(display_path, f"not a regular file{kind}")


def file_size_text(size: int) -> str:
    """Bytes in decimal units, as `max-file-size` accepts them: 20.0 MB, 512.0 KB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def too_big(display_path: str, size: int, max_size: int) -> InputError:
    return InputError(display_path, f"{file_size_text(size)} is over max-file-size "
                                    f"({file_size_text(max_size)}); skipped")


# Opening never waits (a FIFO that replaced the file since it was looked at opens at
# once); Windows needs binary mode asked for, or its reads turn \r\n into \n.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) \
    | getattr(os, "O_CLOEXEC", 0)


def read_regular_file(path: Path, display_path: str, max_size: int) -> bytes:
    """The bytes of `path` when it leads to a regular file of at most `max_size` bytes;
    else InputError. Nothing else is opened: a FIFO would block the run for ever, a
    device such as /dev/zero never ends, and opening some devices acts on them."""
    mode = stat_mode(path, display_path)
    if not stat.S_ISREG(mode):
        raise _not_regular(display_path, mode)
    try:
        descriptor = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        raise unreadable(display_path, path, error) from None
    try:
        # What was opened, which may no longer be what was looked at.
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(display_path, info.st_mode)
        if info.st_size > max_size:
            raise too_big(display_path, info.st_size, max_size)
        with os.fdopen(descriptor, "rb", closefd=False) as stream:
            raw = stream.read(max_size + 1)  # bounded, should the file grow meanwhile
    except OSError as error:
        raise unreadable(display_path, path, error) from None
    finally:
        os.close(descriptor)
    if len(raw) > max_size:
        raise too_big(display_path, len(raw), max_size)
    return raw


# The problem line for input whose nesting exceeds Python's recursion limit.
TOO_DEEP = "too deeply nested to analyse"


def internal_error(error: Exception, where: str | None = None) -> str:
    """The problem line for a bug of ours: the file is reported, the others still checked."""
    place = f" while analysing {where}" if where else ""
    return f"internal error{place} ({bug_summary(error)}); other files were checked; " \
        "please report this"


def bug_summary(error: BaseException) -> str:
    """`TypeError: message`, on one line (a message may hold line breaks)."""
    message = " ".join(str(error).split())
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


# Characters `str.splitlines` breaks at and Python does not (form feed, NEL, U+2028...):
# they may sit in strings and comments, and splitting there would shift every later line.
_NOT_PYTHON_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
PYTHON_LINE_BREAK = re.compile("\r\n|\r|\n")


def python_lines(text: str) -> list[str]:
    """The lines of a source text as Python numbers them (line ends \\n, \\r\\n, \\r)."""
    # (A substring test per character: several times faster than a character-class regex.)
    if not any(character in text for character in _NOT_PYTHON_LINE_BREAKS):
        return text.splitlines()
    lines = PYTHON_LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()  # a final line end starts no line
    return lines


def parse_python(text: str, filename: str) -> ast.Module:
    """`ast.parse`, quiet: invalid escapes and the like are the compiler's business, not
    ours."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(text, filename=filename)


_UTF8_BOM = b"\xef\xbb\xbf"


# Texts held compressed (`SourceFile.from_packed`) given back lately, kept decompressed:
# the analyses read one file's functions one after another, a checking worker one file.
_UNPACKED_KEPT = 8
_unpacked: dict[int, tuple["SourceFile", str]] = {}


@dataclass(eq=False)
class SourceFile:
    """A decoded source file, kept as read so fixes can write it back faithfully."""

    path: Path
    display_path: str
    # The bytes as read, where decoding might not give them back (None: UTF-8, whose
    # strict decoding does, so a project's files are not held twice).
    _raw: bytes | None = field(repr=False)
    # The text; None where it is held compressed (`_packed`).
    _text: str | None = field(repr=False)
    encoding: str
    has_bom: bool = False
    # The lines, split when first asked (`forget_lines` lets them go: a large project's
    # files hold them only while checked).
    _lines: list[str] | None = field(default=None, repr=False, compare=False)
    # The text's UTF-8 bytes, zlib-compressed: how a large project's files are held
    # between the reading and the checks (a fourth of the text's memory).
    _packed: bytes | None = field(default=None, repr=False, compare=False)
    text_length: int = field(default=-1, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._text is not None:
            self.text_length = len(self._text)

    @property
    def text(self) -> str:
        text = self._text
        if text is not None:
            return text
        kept = _unpacked.pop(id(self), None)
        if kept is None:
            assert self._packed is not None
            kept = (self, zlib.decompress(self._packed).decode("utf-8"))
            if len(_unpacked) >= _UNPACKED_KEPT:
                del _unpacked[next(iter(_unpacked))]
        _unpacked[id(self)] = kept  # (the source in the entry keeps its id from reuse)
        return kept[1]

    @classmethod
    def from_packed(cls, path: Path, display_path: str, packed: bytes, has_bom: bool,
                    text_length: int) -> "SourceFile":
        """A UTF-8 file whose text `pack_text` compressed (in a worker process)."""
        return cls(path, display_path, None, None, "utf-8", has_bom, _packed=packed,
                   text_length=text_length)

    def pack_text(self) -> bytes | None:
        """The text compressed, for `from_packed`; None where the file is not UTF-8 (its
        bytes are not the text's)."""
        if self._raw is not None:
            return None
        if self._packed is None:
            self._packed = zlib.compress(self.text.encode("utf-8"), 1)
        return self._packed

    @property
    def raw(self) -> bytes:
        """The file's bytes, as read."""
        if self._raw is not None:
            return self._raw
        encoded = zlib.decompress(self._packed) if self._text is None and \
            self._packed is not None else self.text.encode("utf-8")
        return _UTF8_BOM + encoded if self.has_bom else encoded

    @property
    def lines(self) -> list[str]:
        lines = self._lines
        if lines is None:
            lines = self._lines = python_lines(self.text)
        return lines

    def forget_lines(self) -> None:
        self._lines = None

    @classmethod
    def from_bytes(cls, path: Path, display_path: str, raw: bytes) -> "SourceFile":
        encoding = _detect_encoding(raw, display_path)
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as err:
            raise InputError(display_path, _not_decodable(encoding, raw, err)) from None
        except LookupError:
            raise InputError(display_path, f"unknown encoding {encoding!r}") from None
        has_bom = text.startswith("\ufeff")
        if has_bom:
            text = text[1:]
        return cls(path, display_path, None if encoding == "utf-8" else raw, text, encoding,
                   has_bom)

    @classmethod
    def read(cls, path: Path, display_path: str, max_size: int) -> "SourceFile":
        return cls.from_bytes(path, display_path,
                              read_regular_file(path, display_path, max_size))

    def parse(self) -> ast.Module:
        try:
            return parse_python(self.text, self.display_path)
        except SyntaxError as err:
            message = err.msg or "invalid syntax"
            if "too many nested" in message or "too complex" in message:
                raise InputError(self.display_path, "too deeply nested to parse") from None
            column = self.character_column(err.lineno or 1, (err.offset or 1) - 1, from_bytes=False)
            raise InputError(self.display_path, f"syntax error: {message}",
                             err.lineno, column) from None
        except (RecursionError, MemoryError):
            raise InputError(self.display_path, "too deeply nested to parse") from None
        except ValueError as err:  # e.g. source with NUL bytes
            raise InputError(self.display_path, f"cannot parse: {err}") from None

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def character_column(self, line: int, offset: int, from_bytes: bool = True) -> int:
        """1-based character column; `ast` gives UTF-8 byte offsets within the line."""
        if not from_bytes:
            return offset + 1
        text = self.line_text(line)
        if text.isascii():
            return offset + 1
        return len(text.encode("utf-8")[:offset].decode("utf-8", errors="replace")) + 1


def _not_decodable(encoding: str, raw: bytes, err: UnicodeDecodeError) -> str:
    line = raw.count(b"\n", 0, err.start) + 1
    return (f"not valid {encoding} (byte 0x{raw[err.start]:02x} on line {line}); re-encode "
            "the file or declare its encoding with a coding comment")


def _detect_encoding(raw: bytes, display_path: str) -> str:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as err:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            raise InputError(display_path, _not_decodable("utf-8", raw, bad)) from None
        raise InputError(display_path, f"bad encoding declaration: {err.msg}") from None
    return "utf-8" if encoding == "utf-8-sig" else encoding
