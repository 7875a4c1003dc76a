"""Draw program `i` of a zoo: a random program or a library one, as source text that rebuilds it.

Every draw depends on (seed, index) alone (a SHA-256 of both seeds a private `random.Random`), so
a worker process, a Ray task or a later resumed run draws exactly the same program. Random
programs come from `compiler.fuzzing.random_programs.generate` and print through
`program_spec.to_source`: their functions are entries of a fixed menu of lambdas, kept in the
source as written. Library programs are one call into `rasp.lib` (`compiler.examples`; loop programs
only when `ZooConfig.library` names them).
`rebuild(source)` executes a record's source and returns the s-op (labels reset first, so a
rebuilt program has the labels of the stored one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import string
from collections.abc import Hashable
from typing import Any

from compiler.errors import LabError
from compiler.examples import CATALOGUE
from compiler.fuzzing import program_spec, random_programs
from compiler.lab.zoo.config import ZooConfig
from compiler.passes.discretise import walk
from rasp import rasp

# Redraws allowed when a program's depth falls outside `ZooConfig.depths`.
MAX_DRAWS = 200
HEADER = "from rasp import lib, rasp\n\n"


class SamplingError(LabError):
    """No program satisfying the configuration was found within `MAX_DRAWS` draws."""


@dataclasses.dataclass(frozen=True)
class ProgramDraw:
    """One drawn program: how to rebuild it and what it is compiled for."""

    index: int
    origin: str  # "random" or "library:<name>"
    source: str  # Python text binding the output s-op to `program`
    vocab: tuple[Hashable, ...]
    max_seq_len: int
    size: int  # expressions besides tokens and indices (selectors included)
    depth: int  # longest chain of expressions from tokens / indices


def program_rng(seed: int, index: int, attempt: int = 0) -> random.Random:
    """The private random stream of one draw."""
    digest = hashlib.sha256(f"tracr-compile zoo {seed} {index} {attempt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def rebuild(source: str) -> rasp.SOp:
    """Execute a record's source text and return its `program` s-op.

    The text is run as Python with this process's full rights (`exec`), so rebuild only
    sources you trust; rasp's label counter is reset first, so the rebuilt s-ops get the labels
    of the stored ones.

    Args:
      source: Python text binding the output s-op to `program` (a record's `source` column,
        `ProgramDraw.source`).
    Returns:
      The s-op bound to `program`.
    Raises:
      LabError: the text binds no s-op named `program`. Any exception the text itself raises
        (a SyntaxError, a NameError, ...) propagates unchanged.
    """
    rasp.reset_label_counter()
    namespace: dict[str, Any] = {}
    exec(compile(source, "<zoo program>", "exec"), namespace)
    program = namespace.get("program")
    if not isinstance(program, rasp.SOp):
        raise LabError("the source does not bind an s-op named `program`")
    return program


def shape(program: rasp.SOp) -> tuple[int, int]:
    """(size, depth) of a program's expression graph."""
    depth: dict[int, int] = {}
    size = 0
    for expr in walk(program):
        children = [depth[id(child)] for child in expr.children]
        depth[id(expr)] = 1 + max(children) if children else 0
        if not isinstance(expr, (rasp.TokensType, rasp.IndicesType)):
            size += 1
    return size, depth[id(program)]


def _vocab(rng: random.Random, config: ZooConfig) -> tuple[Hashable, ...]:
    size = rng.randint(*config.vocab_sizes)
    kind = config.vocab_kind if config.vocab_kind != "mixed" else rng.choice(["letters", "ints"])
    if kind == "letters":
        return tuple(string.ascii_lowercase[:size])
    return tuple(range(size))


def _library(rng: random.Random, config: ZooConfig, max_seq_len: int) -> tuple[str, str, tuple]:
    example = CATALOGUE[rng.choice(config.library)]
    vocab = tuple(example.scaled_vocab(rng.randint(*config.vocab_sizes)))
    source = f"{HEADER}max_seq_len = {max_seq_len}\nprogram = {example.call}\n"
    return f"library:{example.name}", source, vocab


def _random(rng: random.Random, config: ZooConfig, max_seq_len: int) -> tuple[str, str, tuple]:
    vocab = _vocab(rng, config)
    weights = {kind: random_programs.KIND_WEIGHTS[kind] for kind in config.operations}
    spec = random_programs.generate(
        rng.getrandbits(63), rng.randint(*config.sizes), vocab, max_seq_len,
        kind_weights=weights, numerical=config.numerical,
    )
    return "random", HEADER + program_spec.to_source(spec), vocab


def draw(config: ZooConfig, index: int) -> ProgramDraw:
    """Program `index` of the zoo `config` describes.

    Each attempt rebuilds the drawn source (`rebuild`), which resets rasp's label counter.

    Args:
      config: the zoo's settings: seed, sizes, depths, vocabularies, lengths, library share.
      index: the program's number; with `config.seed` it alone decides the draw.
    Returns:
      The `ProgramDraw`: origin, source text, vocabulary, `max_seq_len`, size and depth.
    Raises:
      SamplingError: `MAX_DRAWS` draws give no program of a depth in `config.depths`.
    """
    for attempt in range(MAX_DRAWS):
        rng = program_rng(config.seed, index, attempt)
        max_seq_len = rng.randint(*config.max_seq_lens)
        use_library = config.library and rng.random() < config.library_share
        origin, source, vocab = (_library if use_library else _random)(rng, config, max_seq_len)
        size, depth = shape(rebuild(source))
        if config.depths[0] <= depth <= config.depths[1]:
            return ProgramDraw(index, origin, source, vocab, max_seq_len, size, depth)
    raise SamplingError(
        f"program {index}: no program of depth {config.depths[0]}..{config.depths[1]} in {MAX_DRAWS} draws; "
        "widen --depths or raise --sizes"
    )


