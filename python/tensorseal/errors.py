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

__all__ = ["Error", "CorruptFileError", "UnsafePickleError", "UnsupportedError", "InvalidArgumentError", "IoError",
           "LimitError", "InternalError", "error", "class_for_kind"]


class Error(Exception):
    """Base class of all tensorseal errors.

    ``str(err)`` is the CLI's one-line message: ``FILE: byte N: [rule] detail``.
    Errors are made by the library (or by :func:`error`), rarely by hand; they pickle
    with all their fields, so they cross process boundaries intact.

    Args:
        message: the one-line message ``str(err)`` returns.
        rule: the id of the rule broken, e.g. ``safetensors/header-too-large``.
        file: the file the error is about ("" when none).
        offset: the byte offset in it, or None when unknown.
        detail: the message without the file, offset and rule.

    Attributes:
        kind: the error kind of the class ("corrupt", "unsafe", "io", ...; the C++
            ``tensorseal::kind_name``), a class attribute.
        rule: as given.
        file: as given.
        offset: as given.
        detail: as given.

    Example:
        >>> try:
        ...     tensorseal.load("bad.safetensors")
        ... except tensorseal.Error as e:
        ...     print(e.rule, e.file, e.offset)   # safetensors/header-too-large bad.safetensors 0
    """

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
    """The exception class for an error kind (``tensorseal::kind_name``).

    Args:
        kind: an error kind as the JSON output and :attr:`Error.kind` name it
            ("invalid-argument", "io", "corrupt", "unsafe", "unsupported", "limit",
            "internal").

    Returns:
        The :class:`Error` subclass of that kind; :class:`InternalError` for a kind it
        does not know.

    Raises:
        Nothing.

    Example:
        >>> tensorseal.errors.class_for_kind("corrupt")
        <class 'tensorseal.errors.CorruptFileError'>
    """
    return _BY_KIND.get(kind, InternalError)


def error(rule: str, detail: str, file: str = "", offset: Optional[int] = None) -> Error:
    """The exception for breaking ``rule`` (an id the C++ side defines, e.g.
    ``api/invalid-argument``), of the class of the rule's kind, with ``str(err)``
    rendered by the C++ core exactly like the errors it raises. Returned, not raised.

    Args:
        rule: a rule id the core declares for Python code (``api/invalid-argument``).
        detail: what is wrong, in one line.
        file: the file concerned, or "".
        offset: the byte offset in it, or None.

    Returns:
        The :class:`Error` subclass instance, to raise.

    Raises:
        InternalError: the rule is not one the core declares for Python code.

    Example:
        >>> err = tensorseal.errors.error("api/invalid-argument", "bad thing", "f.pt", 12)
        >>> str(err), type(err).__name__
        ('f.pt: byte 12: [api/invalid-argument] bad thing', 'InvalidArgumentError')
    """
    from . import _tensorseal as _core
    kind, message = _core.error_parts(rule, detail, file, offset)
    return class_for_kind(kind)(message, rule, file, offset, detail)


def invalid_argument(detail: str, file: str = "") -> Error:
    """``error("api/invalid-argument", detail, file)``: the call asked for something impossible."""
    return error("api/invalid-argument", detail, file)
