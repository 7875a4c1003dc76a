"""The exception raised when a RASP program cannot be evaluated on an input."""


class RaspEvaluationError(Exception):
    """A RASP expression failed on a concrete input.

    The message always names the expression's label and the offending value, so a failure
    deep inside a large program points at the node to fix. When a user function raised, the
    original exception is chained as ``__cause__``.
    """
