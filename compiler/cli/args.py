"""Parsing the CLI's values: vocabularies, input tokens and `file.py:name` program references."""

from __future__ import annotations

import importlib.util
import inspect
import json
import pathlib
import re
import sys
from collections.abc import Hashable, Iterable
from typing import Any

from rasp import rasp

_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")
_INT = re.compile(r"^-?\d+$")


class UsageError(Exception):
    """A command-line argument is malformed or points at nothing usable (exit code 2)."""


class ProgramError(Exception):
    """The user's program file raised while being loaded or built (exit code 1)."""


def parse_vocab(text: str) -> tuple[Hashable, ...]:
    """`a,b,c` (all-integer items become ints), a JSON list, or an inclusive range `0..9`."""
    text = text.strip()
    if not text:
        raise UsageError("--vocab is empty; give e.g. a,b,c or 0..9 or '[1, 2, 3]'")
    if text.startswith("["):
        try:
            values = json.loads(text)
        except json.JSONDecodeError as error:
            raise UsageError(f"--vocab is not a valid JSON list: {error}") from None
        if not isinstance(values, list) or not values:
            raise UsageError("--vocab as JSON must be a non-empty list")
        tokens = tuple(tuple(v) if isinstance(v, list) else v for v in values)
        for token in tokens:
            if isinstance(token, dict):
                raise UsageError(f"--vocab token {token!r} is not hashable")
        return tokens
    match = _RANGE.match(text)
    if match:
        low, high = int(match[1]), int(match[2])
        if high < low:
            raise UsageError(f"--vocab range {text!r} is empty (the end is below the start)")
        return tuple(range(low, high + 1))
    items = [item.strip() for item in text.split(",")]
    if any(not item for item in items):
        raise UsageError(f"--vocab {text!r} has an empty item")
    if all(_INT.match(item) for item in items):
        return tuple(int(item) for item in items)
    return tuple(items)


def parse_token(text: str, known: Iterable[Hashable]) -> Hashable:
    """One whitespace-separated input token: itself if known as a string, else its JSON value
    (so `3` becomes the int 3 and `true` the bool when those are tokens), else the text."""
    known = set(known)
    if text in known:
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    if isinstance(value, (list, dict)):
        return text
    return value if value in known else text


def parse_input(text: str, vocab: Iterable[Hashable], bos: Hashable, pad: Hashable) -> list[Hashable]:
    """`"BOS x a c"` to a token list; a leading BOS is added when missing."""
    words = text.split()
    known = set(vocab) | {bos, pad}
    tokens = [parse_token(word, known) for word in words]
    if not tokens or tokens[0] != bos:
        tokens.insert(0, bos)
    return tokens


def load_program(reference: str) -> tuple[rasp.SOp, str | None]:
    """`path/to/file.py:name` -> (the s-op, the file's source text).

    `name` is a module-level s-op or a function taking no arguments that returns one.
    """
    path_text, sep, name = reference.rpartition(":")
    if not sep or not path_text or not name:
        raise UsageError(f"program {reference!r} must look like path/to/file.py:name")
    path = pathlib.Path(path_text)
    if not path.is_file():
        raise UsageError(f"program file {path_text!r} does not exist")
    source = path.read_text(encoding="utf-8")
    module_name = f"tracr_compile_user_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path_text!r} as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise ProgramError(f"running {path_text} failed: {type(error).__name__}: {error}") from error
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        raise UsageError(f"{path_text} has no module-level name {name!r}")
    return _as_sop(getattr(module, name), f"{path_text}:{name}"), source


def _as_sop(obj: Any, where: str) -> rasp.SOp:
    if isinstance(obj, rasp.SOp):
        return obj
    if callable(obj):
        try:
            inspect.signature(obj).bind()
        except TypeError:
            raise UsageError(f"{where} must be an s-op or a function of no arguments") from None
        except ValueError:  # no signature available (some builtins): just try calling it
            pass
        try:
            result = obj()
        except Exception as error:
            raise ProgramError(f"calling {where}() failed: {type(error).__name__}: {error}") from error
        if isinstance(result, rasp.SOp):
            return result
        raise UsageError(f"{where}() returned {type(result).__name__}, not a RASP s-op")
    raise UsageError(f"{where} is of type {type(obj).__name__}, not a RASP s-op or a function returning one")
