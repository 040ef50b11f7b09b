"""A model of what a power cut keeps of a directory tree: only what an fsync or syncfs covered.

The files are real and written as usual; the model stands in for fsync and syncfs, and at each
call records what the call makes durable: for a regular file its bytes, for a directory its
entries (name -> inode and kind), for syncfs the whole tree. After a power cut, the durable view
is rebuilt from the root's records alone: a rename no directory fsync covered is lost, a
directory nobody synced is empty, and a file whose bytes no sync covered is empty (its pages
were still in the page cache) — torn, as a real disk can leave it.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from dataclasses import dataclass, field


@dataclass
class PageCache:
    root: str
    # (inode -> bytes) of regular files; (inode -> {name: (inode, is_directory)}) of directories.
    contents: dict[int, bytes] = field(default_factory=dict)
    entries: dict[int, dict[str, tuple[int, bool]]] = field(default_factory=dict)
    # The next this many sync calls fail with EIO (after doing nothing), as a failing disk's would.
    failures: int = 0
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fsync(self, fd: int) -> None:
        with self.lock:
            self._fail_if_asked()
            self._record(fd)

    def syncfs(self, fd: int) -> None:
        with self.lock:
            self._fail_if_asked()
            # Puts go on meanwhile: a file or directory removed since it was listed is skipped.
            for directory, _, files in os.walk(self.root):
                for path in [directory, *(os.path.join(directory, name) for name in files)]:
                    try:
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                    except FileNotFoundError:
                        continue
                    try:
                        self._record(fd)
                    finally:
                        os.close(fd)

    def durable_view(self) -> dict[str, bytes]:
        """Relative path -> bytes of every regular file a power cut right now would leave.

        Call with `lock` held to freeze the durable state while reading other state."""
        view: dict[str, bytes] = {}

        def walk(inode: int, prefix: str) -> None:
            for name, (child, is_directory) in self.entries.get(inode, {}).items():
                if is_directory:
                    walk(child, f"{prefix}{name}/")
                else:
                    view[prefix + name] = self.contents.get(child, b"")

        walk(os.stat(self.root).st_ino, "")
        return view

    def _fail_if_asked(self) -> None:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    def _record(self, fd: int) -> None:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            with os.scandir(fd) as found:
                self.entries[st.st_ino] = {
                    entry.name: (entry.inode(), entry.is_dir(follow_symlinks=False)) for entry in found
                }
        elif stat.S_ISREG(st.st_mode):
            self.contents[st.st_ino] = os.pread(fd, st.st_size, 0)
