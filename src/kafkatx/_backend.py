"""Choose the codec implementation once.

The compiled extension ``kafkatx._codec`` is the default; if it is missing that is an ImportError,
because a silent fallback to pure Python hides a twenty-fold slowdown.  ``KAFKATX_NO_EXTENSIONS=1``
selects the pure-Python twin ``kafkatx._codec_py`` on purpose (PyPy, debugging).
"""

from __future__ import annotations

import os

if os.environ.get("KAFKATX_NO_EXTENSIONS", "") not in ("", "0"):
    from . import _codec_py as codec
else:
    try:
        from . import _codec as codec
    except ImportError as exc:  # pragma: no cover - exercised only on broken installs
        raise ImportError(
            "kafkatx's compiled extension kafkatx._codec is missing or failed to load "
            f"({exc}). Reinstall kafkatx from a wheel, build it with a C compiler, or set "
            "KAFKATX_NO_EXTENSIONS=1 to use the (much slower) pure-Python codec."
        ) from exc

BACKEND: str = codec.BACKEND

__all__ = ["codec", "BACKEND"]
