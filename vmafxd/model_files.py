"""Reading a client's ``path=`` model file without letting it escape ``model_dirs``.

A check on the resolved path followed by an ``open`` of the original path is
a race: between the two, a symlink anywhere along the path can be swapped to
point outside (CWE-367).  Here the file is opened *under* the directory's fd,
one component at a time, each with ``O_NOFOLLOW`` (``openat(2)``), so no
symbolic link is ever followed, whatever happens to the path meanwhile; and
the last component must be a regular file (``O_NONBLOCK``: a FIFO cannot
block the daemon).  The configured directories themselves are the
administrator's and are resolved once.

A consequence worth knowing: a symlink *inside* a model directory is refused
even when it points to another file inside it; install model files as files.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Sequence

from vmafx.protocol import ErrorCode, RemoteProtocolError

__all__ = ["read_model_file", "MAX_MODEL_BYTES"]

#: libvmaf's largest shipped model (a bootstrap set) is well under 1 MiB
MAX_MODEL_BYTES = 16 << 20


def _components(path: str, root: str) -> list[str] | None:
    """``path``'s components below ``root`` (lexically), or None when it is not below it."""
    prefix = root.rstrip("/") + "/"
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix):].split("/")
    if not parts or any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def _open_beneath(root: str, parts: list[str]) -> int:
    """openat() each component under ``root`` with O_NOFOLLOW; the fd of the last (a regular file)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        last = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    return last


def read_model_file(path: str, model_dirs: Sequence[str], field: str) -> str:
    """The text of the model file ``path``, opened beneath one of ``model_dirs``; errors name ``field``."""
    from .model import BUILTIN_VERSIONS

    refused = RemoteProtocolError(
        ErrorCode.E_NOTSUP, field,
        f"the daemon reads model files only from its model_dirs "
        f"({', '.join(model_dirs) if model_dirs else 'none are configured'}), without symbolic links; "
        f"use a built-in version= ({', '.join(BUILTIN_VERSIONS)})")
    if not os.path.isabs(path):
        raise refused
    for d in model_dirs:
        for root in dict.fromkeys((os.path.normpath(d), os.path.realpath(d))):
            parts = _components(path, root)
            if parts is None:
                continue
            try:
                fd = _open_beneath(os.path.realpath(d), parts)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EACCES, errno.EPERM):
                    raise refused from None  # a symlink on the way (O_NOFOLLOW), or not ours to read
                raise RemoteProtocolError(ErrorCode.E_INVAL, field, f"cannot read {path}: {e.strerror}") from None
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise refused
                if st.st_size > MAX_MODEL_BYTES:
                    raise RemoteProtocolError(ErrorCode.E_INVAL, field, f"{path} is {st.st_size} bytes, "
                                                                        f"over {MAX_MODEL_BYTES} for a model")
                data = f.read(MAX_MODEL_BYTES + 1)
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError:
                raise RemoteProtocolError(ErrorCode.E_INVAL, field, f"{path} is not UTF-8 text") from None
    raise refused
