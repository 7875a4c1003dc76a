"""Helpers shared by the tests (importable as `support`: tests/conftest.py puts tests/ on the path).

Compiler tests: random inputs and output comparison. CLI, file, picture and export tests: small
compiled library models and CLI runs. Craft chamber tests: residual streams built by direction
label and one-hot decoding.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import random
import subprocess
import sys
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from craft.bases import ONE, BasisDirection, VectorInBasis, VectorSpaceWithBasis, bos_direction, join_vector_spaces

if TYPE_CHECKING:  # the craft tests import this module without the compiler's JAX side
    from compiler import CompiledModel

REPO = pathlib.Path(__file__).resolve().parents[1]


# -- compiler tests ----------------------------------------------------------------------------


def random_inputs(vocab: Sequence[Hashable], max_seq_len: int, count: int, seed: int) -> list[list]:
    """`count` random token lists of random lengths 1..max_seq_len."""
    rng = random.Random(seed)
    return [
        [rng.choice(vocab) for _ in range(rng.randint(1, max_seq_len))] for _ in range(count)
    ]


def outputs_match(got: Sequence[Any], expected: Sequence[Any], tolerance: float = 1e-3) -> bool:
    """Decoded model output equals RASP's: exact for categorical, within `tolerance` for numbers."""
    if len(got) != len(expected):
        return False
    for g, e in zip(got, expected):
        if g is None or e is None:
            if g is not e:
                return False
        elif isinstance(g, float) and not isinstance(e, str):
            if abs(g - float(e)) > tolerance:
                return False
        elif g != e:
            return False
    return True



def compare_with_evaluator(model: CompiledModel, program: Any, inputs: Sequence[Sequence[Hashable]],
                           causal: bool, name: str) -> int:
    """Run `inputs` through `model` and assert each decoded output equals `rasp.evaluate`'s, for
    every input inside the program's domain (inputs the evaluator rejects are skipped); returns
    how many were compared."""
    from rasp import rasp  # kept local: the craft tests import this module without rasp's users

    decoded = model.apply_batch([["BOS", *xs] for xs in inputs])
    compared = 0
    for xs, out in zip(inputs, decoded):
        try:
            expected = rasp.evaluate(program, list(xs), causal=causal)
        except rasp.RaspEvaluationError:
            continue
        compared += 1
        assert out[0] == "BOS"
        assert outputs_match(out[1:], expected), (name, xs, out[1:], expected)
    return compared

# -- CLI, files, pictures, export -------------------------------------------------------------

# A user program file for the CLI tests: an s-op, a builder function, programs that fail.
PROGRAM_FILE = '''
from rasp import lib, rasp

doubled = rasp.Map(lambda x: 2 * x, rasp.tokens).named("doubled")


def make_reverse():
    return lib.make_reverse(rasp.tokens)


def unsupported():
    # values float32 cannot tell apart that must give different outputs: refused, never guessed
    close = rasp.numerical(rasp.Map(lambda t: {1: 1.0, 2: 1.000001}.get(t, 2.0), rasp.tokens))
    same = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ)
    mean = rasp.numerical(rasp.Aggregate(same, close, default=0))
    return rasp.categorical(rasp.Map(lambda x: x > 1.0000005, mean))


def broken():
    raise RuntimeError("the builder is broken")


not_a_program = 3
'''


def example_model(name: str, causal: bool = False, optimize: bool = True) -> CompiledModel:
    """A library example compiled with its default vocabulary and length."""
    from compiler import compile_rasp
    from compiler.examples import EXAMPLES

    example = EXAMPLES[name]
    program = example.build(example.max_seq_len)
    return compile_rasp(program, example.vocab, example.max_seq_len, causal=causal, optimize=optimize)


def example_tokens(name: str) -> list:
    from compiler.examples import EXAMPLES

    return ["BOS", *EXAMPLES[name].example_input]


@dataclasses.dataclass(frozen=True)
class CliRun:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def run_cli(args: Sequence[str], cwd: pathlib.Path) -> CliRun:
    """`python -m compiler.cli ARGS` in a fresh interpreter, working directory `cwd`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("JAX_PLATFORMS", "cpu")
    done = subprocess.run(
        [sys.executable, "-m", "compiler.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return CliRun(tuple(args), done.returncode, done.stdout, done.stderr)


# -- craft chamber tests ----------------------------------------------------------------------

BOS = bos_direction("BOS")
ONE_SPACE = VectorSpaceWithBasis((ONE,))
BOS_SPACE = VectorSpaceWithBasis((BOS,))


def stream(space: VectorSpaceWithBasis, rows: Sequence[Mapping[BasisDirection, float]], bos: bool = True) -> VectorInBasis:
    """Sequence vector over `space` (+ one, BOS): optional BOS row first, then one row per mapping.

    Every non-BOS row gets `one` = 1; the BOS row holds only `one` and BOS.
    """
    full = join_vector_spaces(space, ONE_SPACE, BOS_SPACE)
    mags = np.zeros((len(rows) + bos, full.num_dims))
    if bos:
        mags[0, full.index(ONE)] = 1.0
        mags[0, full.index(BOS)] = 1.0
    for i, row in enumerate(rows):
        mags[i + bos, full.index(ONE)] = 1.0
        for direction, value in row.items():
            mags[i + bos, full.index(direction)] += value
    return VectorInBasis(full.basis, mags)


def decode_categorical(vector: VectorInBasis, name: str, tol: float = 1e-6) -> list:
    """Per position: the value whose direction is ~1 (others ~0), None when all ~0; raises otherwise."""
    dirs = [(i, d) for i, d in enumerate(vector.basis_directions) if d.name == name and d.value is not None]
    out = []
    for row in vector.magnitudes.reshape(-1, vector.shape[-1]):
        vals = np.array([row[i] for i, _ in dirs])
        on = np.nonzero(np.abs(vals - 1) < tol)[0]
        off = np.abs(vals) < tol
        if len(on) == 0 and off.all():
            out.append(None)
        elif len(on) == 1 and off.sum() == len(dirs) - 1:
            out.append(dirs[on[0]][1].value)
        else:
            raise AssertionError(f"not a one-hot: {dict((str(d), v) for (_, d), v in zip(dirs, vals) if abs(v) > tol)}")
    return out


# -- compression regressions -------------------------------------------------------------------

# Model-zoo program 34 of seed 0 as the random program generator drew it before it grew
# its lookup chains; stored, so later changes to the generator leave the test's program as it was.
ZOO_PROGRAM_34 = """from rasp import lib, rasp

v2 = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ).named("v2")
v3 = rasp.Aggregate(v2, rasp.indices, default=None).named("v3")
v4 = rasp.Select(rasp.tokens, rasp.indices, rasp.Comparison.EQ).named("v4")
v5 = rasp.Select(v3, v3, lambda k, q: k == q - 1).named("v5")
v6 = rasp.SelectorAnd(v4, v5).named("v6")
v7 = rasp.numerical(rasp.Aggregate(v6, rasp.indices, default=0)).named("v7")
v8 = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ).named("v8")
v9 = rasp.Aggregate(v8, v7, default=None).named("v9")
v10 = rasp.Select(v9, v9, rasp.Comparison.NEQ).named("v10")
v11 = rasp.Select(v9, v9, lambda k, q: abs(k - q) <= 1).named("v11")
v12 = rasp.SelectorOr(v10, v11).named("v12")
v13 = rasp.numerical(rasp.Aggregate(v12, v3, default=0)).named("v13")
program = v13
"""


# -- SAELens tests ---------------------------------------------------------------------------------


def saelens_training(ids: np.ndarray, d_in: int, d_sae: int, hook_name: str, *, override_model: Any = None,
                     **model: str) -> Any:
    """An SAELens training runner on pre-tokenized `ids` (`[N, T]`, each row starting with BOS):
    16 steps of 40 tokens of a standard SAE, on the CPU, logging nowhere. `model` names what
    SAELens loads (`model_name`, `model_class_name`) unless `override_model` hands it one."""
    import warnings

    import datasets
    import sae_lens

    cfg = sae_lens.LanguageModelSAERunnerConfig(
        sae=sae_lens.StandardTrainingSAEConfig(d_in=d_in, d_sae=d_sae, l1_coefficient=1e-3),
        hook_name=hook_name, is_dataset_tokenized=True, streaming=False, context_size=ids.shape[1],
        prepend_bos=False,  # the ids start with BOS already
        training_tokens=640, train_batch_size_tokens=40, store_batch_size_prompts=16, n_batches_in_buffer=16,
        n_batches_for_norm_estimate=2, device="cpu", output_path=None, checkpoint_path=None,
        logger=sae_lens.LoggingConfig(log_to_wandb=False), verbose=False, **model,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SAELens: fewer prompts than its buffer wants
        return sae_lens.LanguageModelSAETrainingRunner(
            cfg, override_dataset=datasets.Dataset.from_dict({"input_ids": ids.tolist()}), override_model=override_model)


def saelens_error_before_and_after(runner: Any, activations: Any) -> tuple[float, float]:
    """The runner's SAE's mean squared reconstruction error on `activations` (`[n, d]`) before
    and after `runner.run()` trains it."""
    import torch

    with torch.no_grad():
        before = float(((runner.sae(activations) - activations) ** 2).mean())
    sae = runner.run()
    with torch.no_grad():
        after = float(((sae(activations) - activations) ** 2).mean())
    return before, after
