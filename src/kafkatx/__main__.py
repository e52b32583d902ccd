"""``python -m kafkatx``: the same as the ``kafkatx`` console script."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
