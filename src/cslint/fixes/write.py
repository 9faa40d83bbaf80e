"""Writing a fixed file back: atomically, only over the content it was fixed from, with
its mode and owner; and removing the temporary files of a run that was killed.

The new bytes keep the file's encoding, BOM and line endings (`cslint.fixes.apply`).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Iterable

from cslint.source import SourceFile

# The temporary file a fixed file is written to before it is renamed over the file:
# `.NAME.PID.XXXXXXXX.cslint-fix` beside it (hidden, named after the file and the
# process writing it; the X are mkstemp's).
_SUFFIX = ".cslint-fix"
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)\.[a-z0-9_]{8}" + re.escape(_SUFFIX))
# A temporary file this old is left over whoever made it: a write takes far less.
STALE_AFTER_SECONDS = 60


class WriteError(Exception):
    """A fixed file that was not written; the message is the line for the user."""


def write_fixed(source: SourceFile, new_raw: bytes) -> None:
    """Replace the file `source` was read from with `new_raw`, atomically: a temporary
    file in the same folder, with the file's mode (and owner, where allowed), renamed over
    it. A symbolic link stays a link: its target is replaced. Nothing is written when
    the file no longer holds what was read (edited or removed while fixing). Raises
    WriteError."""
    path = Path(os.path.realpath(source.path))
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise WriteError("changed while fixing (removed); not written") from None
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.",
                                             suffix=_SUFFIX, dir=path.parent)
    except OSError as error:
        raise WriteError(f"cannot write: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new_raw)
            stream.flush()
            os.fsync(stream.fileno())
        _copy_owner_and_mode(temporary, status)
        # As late as can be: an edit made while fixing is kept, not overwritten.
        if _content(path) != source.raw:
            raise WriteError("changed while fixing; not written")
        os.replace(temporary, path)
    except BaseException as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise WriteError(f"cannot write: {error.strerror or error}") from None
        raise
    _sync_folder(path.parent)


def _content(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _copy_owner_and_mode(temporary: str, status: os.stat_result) -> None:
    if hasattr(os, "chown"):
        # Only root may give a file away; a member of the file's group may keep that.
        for owner in ((status.st_uid, status.st_gid), (-1, status.st_gid)):
            try:
                os.chown(temporary, *owner)
                break
            except OSError:
                continue
    # After chown, which clears the set-id bits.
    os.chmod(temporary, stat.S_IMODE(status.st_mode))


def _sync_folder(folder: Path) -> None:
    """Make the rename durable (where folders can be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def remove_stale_temporaries(paths: Iterable[Path]) -> None:
    """Remove the temporary files a killed --fix left beside these files (their link
    targets, as written): named as `write_fixed` names them for one of these files, owned
    by this user, and stale: the process that made it is gone, or it is older than
    STALE_AFTER_SECONDS. A temporary file is in use only for the moment of one write, so
    either says no run is still writing it; the age also covers a reused process id. (A
    run on another machine sharing the folder may look gone: removing its temporary file
    makes its rename fail, which it reports; no file is lost.)"""
    names_by_folder: dict[Path, set[str]] = {}
    for path in paths:
        real = Path(os.path.realpath(path))
        names_by_folder.setdefault(real.parent, set()).add(real.name)
    now = time.time()
    user = os.geteuid() if hasattr(os, "geteuid") else None
    for folder, names in names_by_folder.items():
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _TEMPORARY.fullmatch(entry.name)
            if match is None or match["name"] not in names:
                continue
            try:
                status = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(status.st_mode) or (user is not None and status.st_uid != user):
                continue
            if _running(int(match["pid"])) and now - status.st_mtime < STALE_AFTER_SECONDS:
                continue
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def _running(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # (Windows' os.kill would stop it)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # another user's process, or no way to tell: assume so
    return True
