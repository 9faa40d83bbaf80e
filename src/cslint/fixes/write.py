"""Writing a fixed file back: atomically, with its encoding, BOM and line endings (kept
by `cslint.fixes.apply` in the new bytes) and its mode."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cslint.fixes.apply import FileFix


def write_fixed(file: FileFix) -> None:
    """Replace the file atomically (a temporary file in the same folder, then rename),
    keeping its mode."""
    path = Path(file.source.path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cslint-fix",
                                         dir=str(path.parent))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(file.new_raw)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
