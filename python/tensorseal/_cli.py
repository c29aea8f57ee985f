"""The ``tseal`` command of an installed wheel: runs the bundled C++ binary.

A wheel carries the CLI at ``tensorseal/_bin/tseal`` (auditwheel points its RPATH at
``tensorseal.libs`` beside the package, a path that holds only from inside
site-packages). The ``tseal`` console script and ``python -m tensorseal`` exec it with
this process's arguments, so exit status, signals and output are the binary's own.
"""
from __future__ import annotations

import os
import pathlib
import sys
from typing import List, NoReturn, Optional, Sequence


def _candidates() -> List[pathlib.Path]:
    here = pathlib.Path(__file__).parent
    return [
        here / "_bin" / "tseal",  # an installed wheel
        # A development build's staged package, <build>/python/tensorseal (links to the
        # sources), beside <build>/tseal: PYTHONPATH=build/python python -m tensorseal.
        here.parent.parent / "tseal",
    ]


def binary() -> str:
    """Path of the tseal executable this package runs."""
    for path in _candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    looked = ", ".join(str(p) for p in _candidates())
    raise SystemExit(f"tensorseal: the tseal binary is missing (looked for {looked})")


def main(argv: Optional[Sequence[str]] = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    exe = binary()
    os.execv(exe, ["tseal", *args])
