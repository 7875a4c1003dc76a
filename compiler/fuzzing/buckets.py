"""Group the compiler's refusal messages into short, stable reason names."""

from __future__ import annotations

import re

# (pattern searched in the message without its leading label, bucket name). First match wins.
REFUSAL_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"in causal mode its selector may select keys after the query", "causal (strict): selector may read later positions"),
    (r"selector's (keys|queries) s-op .* is numerical", "selector over a numerical s-op"),
    (r"negates a comparison .* which can be None", "negated selector over a None-able s-op"),
    (r"no exact single-head construction", "or of selectors over different s-ops"),
    (r"compiles to one head over the packed s-op", "or of selectors over different s-ops, one can be None"),
    (r"that is numerical and can be None", "numerical output (or constant) that can be None"),
    (r"numerical SequenceMap reading a numerical input that can be None", "linear combination / sum of a None-able s-op"),
    (r"numerical Map of the numerical s-op .* returns None", "numerical Map returning None"),
    (r"numerical Aggregate of .* not all numbers", "numerical Aggregate of non-numbers"),
    (r"numerical Aggregate of .* can be None", "numerical Aggregate of a None-able s-op"),
    (r"numerical Aggregate with default=None", "numerical Aggregate with default None"),
    (r"numerical Aggregate with default=", "numerical Aggregate with a huge default"),
    (r"its block stores about .* non-zero weights", "block too large"),
    (r"its MLP needs .* hidden units", "block too large"),
    (r"its selector compares .* query/key value pairs", "block too large"),
    (r"numerical Map of .* can be None", "numerical Map of a None-able s-op"),
    (r"numerical Map whose function returns None", "numerical Map returning None"),
    (r"numerical SequenceMap of an input that can be None", "numerical SequenceMap of a None-able s-op"),
    (r"numerical SequenceMap whose function returns None", "numerical SequenceMap returning None"),
    (r"value set has .* values, more than the limit", "value set too large"),
    (r"input values, more than the limit", "SequenceMap input product too large"),
    (r"means of up to .* take more than", "numerical Aggregate means too many"),
    (r"enumerating the means of up to", "numerical Aggregate means too many"),
    (r"sums of up to .* take more than|enumerating the sums of up to", "SumAggregate sums too many"),
    (r"its (function|predicate) raised", "user function raised on a reachable value"),
    (r"different results for these equal values of different types",
     "function tells equal values of different types apart (1 / 1.0)"),
    (r"is numerical but takes the non-numeric value", "numerical s-op with non-numeric values"),
    (r"a numerical Aggregate needs numeric values", "numerical Aggregate of non-numbers"),
    (r"share the label", "duplicate labels (expression type the relabelling cannot rebuild)"),
    (r"never reads `tokens`", "program ignores tokens"),
    (r"rasp.length is the length of the whole input", "causal: rasp.length"),
    (r"are only .* apart \(one number up to float rounding", "Map of a numerical s-op: values too close (float rounding)"),
    (r"numerical Map of .* is off by up to", "numerical Map: measured error above 1e-4"),
    (r"numerical Map of .* is not affine on .* too many to build and check", "numerical Map: too many values to check"),
)


def refusal_bucket(message: str) -> str:
    """A short reason name for one refusal message (its first problem if several)."""
    text = message.strip()
    if text.startswith("the program cannot be compiled exactly"):
        lines = [line.strip()[2:] for line in text.splitlines()[1:] if line.strip().startswith("- ")]
        text = lines[0] if lines else text
    for pattern, bucket in REFUSAL_PATTERNS:
        if re.search(pattern, text):
            return bucket
    body = text.split(": ", 1)[-1]
    body = re.sub(r"'[^']*'|\"[^\"]*\"|\d+(\.\d+)?", "_", body)
    return "other: " + " ".join(body.split()[:8])
