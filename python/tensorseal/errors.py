"""Exceptions raised by tensorseal.

Every error carries the file, the byte offset (or None) and the id of the rule that
was broken, e.g. ``safetensors/header-too-large``; ``str(err)`` is one line with all
of it, the CLI's message: ``FILE: byte N: [rule] detail`` (``FILE: `` and ``byte N: ``
only when known). All derive from :class:`tensorseal.Error`. Errors raised by the
package's Python code are made by :func:`error`, so they read the same way.
"""
from __future__ import annotations

import pickle
from typing import Any, Optional, Tuple


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

    def __reduce__(self) -> Tuple[Any, ...]:
        # Exceptions pickle their args only; keep where/what across processes.
        return (type(self), (str(self), self.rule, self.file, self.offset, self.detail))


class InvalidArgumentError(Error, ValueError):
    """The call asked for something impossible (wrong type, unknown format...)."""
    kind = "invalid-argument"


class IoError(Error, OSError):
    """The operating system refused an operation (open, read, write, rename)."""
    kind = "io"


class CorruptFileError(Error):
    """The file breaks a rule of its format."""
    kind = "corrupt"


class UnsafePickleError(Error, pickle.UnpicklingError):
    """The file asks for something tensorseal refuses to do (code execution). Also a
    ``pickle.UnpicklingError``, what ``torch.load(weights_only=True)`` raises."""
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
    """The exception class for an error kind (``tensorseal::kind_name``)."""
    return _BY_KIND.get(kind, InternalError)


def error(rule: str, detail: str, file: str = "", offset: Optional[int] = None) -> Error:
    """The exception for breaking ``rule`` (an id the C++ side defines, e.g.
    ``api/invalid-argument``), of the class of the rule's kind, with ``str(err)``
    rendered by the C++ core exactly like the errors it raises."""
    from . import _tensorseal as _core
    kind, message = _core.error_parts(rule, detail, file, offset)
    return class_for_kind(kind)(message, rule, file, offset, detail)


def invalid_argument(detail: str, file: str = "") -> Error:
    """``error("api/invalid-argument", detail, file)``: the call asked for something impossible."""
    return error("api/invalid-argument", detail, file)
