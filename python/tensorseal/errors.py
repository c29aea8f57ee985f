"""Exceptions raised by tensorseal.

Every error carries the file, the byte offset (or None) and the id of the rule that
was broken, e.g. ``safetensors/header-too-large``; ``str(err)`` is one line with all
of it. All derive from :class:`tensorseal.Error`.
"""
from __future__ import annotations

from typing import Optional


class Error(Exception):
    """Base class of all tensorseal errors."""

    kind = "internal"

    def __init__(self, message: str, rule: str = "", file: str = "", offset: Optional[int] = None,
                 detail: str = "") -> None:
        super().__init__(message)
        self.rule = rule
        self.file = file
        self.offset = offset
        self.detail = detail


class InvalidArgumentError(Error, ValueError):
    """The call asked for something impossible (wrong type, unknown format...)."""
    kind = "invalid-argument"


class IoError(Error, OSError):
    """The operating system refused an operation (open, read, write, rename)."""
    kind = "io"


class CorruptFileError(Error):
    """The file breaks a rule of its format."""
    kind = "corrupt"


class UnsafePickleError(Error):
    """The file asks for something tensorseal refuses to do (code execution)."""
    kind = "unsafe"


class UnsupportedError(Error):
    """Valid, but a feature tensorseal does not handle."""
    kind = "unsupported"


class LimitError(Error):
    """A resource limit was reached (size, depth, count)."""
    kind = "limit"


class InternalError(Error):
    """A bug in tensorseal."""
    kind = "internal"


_BY_KIND = {c.kind: c for c in (InvalidArgumentError, IoError, CorruptFileError, UnsafePickleError,
                                 UnsupportedError, LimitError, InternalError)}


def class_for_kind(kind: str) -> type:
    return _BY_KIND.get(kind, InternalError)
