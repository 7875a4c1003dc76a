"""Counters behind default labels and identities of RASP expressions.

Default labels (``map_3``, ``aggregate_7``) come from one global counter so they are unique
within a session and deterministic: after :func:`reset_label_counter`, building the same
program again yields exactly the same labels. Identities (``unique_id``) use a separate
counter that is never reset, so two live expressions never share one.
"""

import itertools
from collections.abc import Iterator

_label_numbers: Iterator[int] = itertools.count(1)
_unique_ids: Iterator[int] = itertools.count(1)


def next_label_number() -> int:
    """Return the number for the next default label and advance the counter."""
    return next(_label_numbers)


def next_unique_id() -> int:
    """Return a fresh identity number (never repeats within a process)."""
    return next(_unique_ids)


def reset_label_counter(start: int = 1) -> None:
    """Restart default label numbering at ``start``.

    Call this before building a program when its labels must match an earlier build (for
    example to compare compiled weights across runs). Expressions built before the reset keep
    their labels; mixing them with expressions built after it may produce duplicate labels.
    """
    global _label_numbers
    _label_numbers = itertools.count(start)
