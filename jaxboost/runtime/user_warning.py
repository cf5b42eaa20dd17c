"""Warnings attributed to the user's line, not to jaxboost's.

``warnings.warn`` needs a ``stacklevel`` counted by hand, which breaks when
the code between the user's call and the warning changes (decorators, steps
of ``fit``); `warn` finds the first frame outside the jaxboost package
instead (Python 3.12's ``skip_file_prefixes``, for 3.10 and 3.11 too).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

_PACKAGE = str(Path(__file__).resolve().parent.parent)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` at the innermost caller outside jaxboost."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
