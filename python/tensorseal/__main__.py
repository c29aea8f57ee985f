"""``python -m tensorseal ARGS`` runs ``tseal ARGS`` (see tensorseal._cli)."""
from ._cli import main

if __name__ == "__main__":
    main()
