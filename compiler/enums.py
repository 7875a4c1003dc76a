"""`StrEnum`: an enum whose members are strings (equal to, formatted and printed as their values).

Python 3.11 has `enum.StrEnum`; the project supports 3.10, where this module defines the same
behaviour (`str(member)` is the value, not `Class.MEMBER`). Records that store an enum member in
JSON or Parquet therefore store its value on every supported Python.
"""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    StrEnum = enum.StrEnum
else:

    class StrEnum(str, enum.Enum):
        """`enum.StrEnum` of Python 3.11 and later."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


__all__ = ["StrEnum"]
