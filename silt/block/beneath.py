"""Opening a file below a directory without following a symbolic link at any step below it.

Checking each component with lstat and then opening the path leaves a window: a directory
swapped for a link in between sends the open elsewhere. Here the path is resolved by the kernel
relative to the directory's descriptor, refusing links as it goes, so what is opened is what
lies below the directory at the moment of the open:

* Linux 5.6 and later: one ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
  RESOLVE_NO_MAGICLINKS`` (a link anywhere gives ELOOP, a step outside EXDEV);
* elsewhere (an older kernel, or a sandbox that filters the call): one ``openat`` per component
  from the directory's descriptor, each with ``O_NOFOLLOW`` (directories also ``O_DIRECTORY``).

Callers pass components already checked to hold no empty, ``.`` or ``..`` part. A refused link
raises LinkRefused (an OSError with errno ELOOP), so callers tell it from a missing file by type.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
import threading
from collections.abc import Sequence

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
# openat2's number is the same on every Linux architecture (the unified syscall table).
_SYS_OPENAT2 = 437
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkRefused(OSError):
    """A component below the directory is a symbolic link (or leads outside it)."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """The openat2 system call through libc's syscall(), or None once it proved unavailable."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usable: bool | None = None if sys.platform == "linux" else False
        self._syscall: object = None

    def __call__(self, dir_fd: int, path: str, flags: int) -> int | None:
        """The descriptor, or None when openat2 is not available here (the caller walks instead)."""
        if self._usable is False:
            return None
        syscall = self._load()
        if syscall is None:
            return None
        how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
        fd = syscall(  # type: ignore[operator]
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0:
            self._usable = True
            return int(fd)
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EPERM) and self._usable is None:
            # No such call (kernel before 5.6), or a seccomp filter refusing it.
            self._usable = False
            return None
        if code in (errno.ELOOP, errno.EXDEV):
            raise LinkRefused(errno.ELOOP, "a symbolic link (or a step outside the directory) on the way", path)
        raise OSError(code, os.strerror(code), path)

    def _load(self) -> object:
        with self._lock:
            if self._syscall is None and self._usable is not False:
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    syscall = libc.syscall
                    syscall.restype = ctypes.c_long
                    self._syscall = syscall
                except (OSError, AttributeError):
                    self._usable = False
            return self._syscall


_openat2 = _Openat2()


def _refused_if_link(dir_fd: int, name: str, exc: OSError) -> OSError:
    """ELOOP or ENOTDIR of an O_NOFOLLOW open: LinkRefused when `name` is a link, else `exc`."""
    if exc.errno == errno.ELOOP:
        return LinkRefused(errno.ELOOP, "a symbolic link on the way", name)
    if exc.errno == errno.ENOTDIR:
        try:
            if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                return LinkRefused(errno.ELOOP, "a symbolic link on the way", name)
        except OSError:
            pass
    return exc


def open_child(dir_fd: int, name: str, flags: int) -> int:
    """One name of an open directory, never through a link (LinkRefused if it is one)."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise _refused_if_link(dir_fd, name, exc) from None


def open_beneath(dir_fd: int, parts: Sequence[str], flags: int) -> int:
    """The file `parts` (checked components) names below the open directory `dir_fd`, opened with
    `flags` without following a link at any component; LinkRefused if one is a link, the open's
    OSError otherwise (ENOENT, ENOTDIR, ...)."""
    if not parts:
        raise ValueError("open_beneath needs at least one component")
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    found = _openat2(dir_fd, "/".join(parts), flags)
    if found is not None:
        return found
    current = dir_fd
    try:
        for part in parts[:-1]:
            step = open_child(current, part, DIRECTORY_FLAGS)
            if current != dir_fd:
                os.close(current)
            current = step
        return open_child(current, parts[-1], flags)
    finally:
        if current != dir_fd:
            os.close(current)


def openat2_available() -> bool:
    """Whether opens here go through openat2 (once one was tried)."""
    return _openat2._usable is True
