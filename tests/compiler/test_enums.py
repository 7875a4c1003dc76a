"""`compiler.enums.StrEnum` behaves as Python 3.11's `enum.StrEnum` on every supported Python
(the project supports 3.10, which lacks it): members equal, print and serialise as their values."""

from __future__ import annotations

import json

from compiler.enums import StrEnum


class Colour(StrEnum):
    RED = "red"
    DARK_BLUE = "dark blue"


def test_members_are_their_values_as_strings():
    assert Colour.RED == "red" and Colour("dark blue") is Colour.DARK_BLUE
    assert str(Colour.RED) == f"{Colour.RED}" == "red" and f"{Colour.DARK_BLUE:>10}" == " dark blue"
    assert json.dumps({"c": Colour.RED}) == '{"c": "red"}' and isinstance(Colour.RED, str)
