"""Writing a file a user will share (the HTML report's pages, a Chrome
trace) with the care the database gets (issue 43): it is created with no
group or world write whatever the umask, an existing one loses those bits,
and the path is never followed through a symbolic link -- a link planted at
the output name (in a shared /tmp, say) makes the write fail and leaves the
link's target untouched.  Only regular files are written.
"""
from __future__ import annotations

import errno
import os
import stat

_NO_SHARED_WRITE = ~(stat.S_IWGRP | stat.S_IWOTH)


def write_text(path: str, text: str) -> None:
    """Write text (UTF-8) to path as the module says.  OSError with a reason
    a user can act on."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, f"{path} is a symbolic link, which is not followed",
                          path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file", path)
        wanted = stat.S_IMODE(st.st_mode) & 0o644 & _NO_SHARED_WRITE | stat.S_IRUSR | stat.S_IWUSR
        if stat.S_IMODE(st.st_mode) != wanted:
            os.fchmod(fd, wanted)
        os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fd = -1                      # the file object closes it
            fh.write(text)
    finally:
        if fd >= 0:
            os.close(fd)
