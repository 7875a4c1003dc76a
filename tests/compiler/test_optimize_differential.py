"""Optimised and unoptimised models both equal RASP: every library program, and fuzz programs.

(tests/compiler/test_compiler_differential.py checks the default, optimised, compilation at two
sizes; here the unoptimised one, each pass alone, and random programs both ways.) 200 random
inputs per library program, causal too for the programs that read only earlier positions;
numerical outputs within 1e-3.
"""

from __future__ import annotations

import pytest
from support import outputs_match, random_inputs

from compiler import CompilerError, compile_rasp
from compiler.examples import EXAMPLES
from compiler.fuzzing import program_spec, random_programs
from compiler.fuzzing.differential import run_model
from compiler.passes.optimize import PASSES, applied
from rasp import rasp

SIZE, MAX_SEQ_LEN, INPUTS = 6, 8, 200


def _mismatches(model, program, vocab, max_seq_len: int, count: int, causal: bool, seed: int) -> tuple[int, int]:
    inputs = random_inputs(list(vocab), max_seq_len, count, seed=seed)
    compared = wrong = 0
    for tokens, out in zip(inputs, model.apply_batch([["BOS"] + x for x in inputs])):
        try:
            expected = rasp.evaluate(program, tokens, causal=causal)
        except rasp.RaspEvaluationError:
            continue
        compared += 1
        wrong += not outputs_match(out[1:], expected)
    return compared, wrong


@pytest.mark.parametrize("optimize", [False, *([name] for name in PASSES)], ids=str)
@pytest.mark.parametrize("example", EXAMPLES.values(), ids=lambda e: e.name)
def test_library_program_matches_rasp_with_and_without_passes(example, optimize):
    vocab = example.scaled_vocab(SIZE)
    program = example.build(MAX_SEQ_LEN)
    for causal in (False, True) if example.causal else (False,):
        model = compile_rasp(program, vocab, MAX_SEQ_LEN, causal=causal, optimize=optimize)
        plain = compile_rasp(program, vocab, MAX_SEQ_LEN, causal=causal, optimize=False)
        if optimize and model.config == plain.config:
            continue  # the pass changed nothing: the model is the unoptimised one, checked too
        compared, wrong = _mismatches(model, program, vocab, MAX_SEQ_LEN, INPUTS, causal, seed=11)
        assert compared >= INPUTS * 0.9 and wrong == 0, (example.name, causal, compared, wrong)


@pytest.mark.filterwarnings("ignore::compiler.errors.CausalSemanticsWarning")
def test_fuzz_programs_match_rasp_optimised_and_not():
    compiled = changed = 0
    by_pass: dict[str, int] = {}
    for seed in range(200):
        vocab = ["a", "b", "c"] if seed % 2 else [0, 1, 2]
        spec = random_programs.generate(seed, 4 + seed % 14, vocab, 4)
        program = program_spec.build(spec)
        for causal in (False, True):
            try:
                plain = compile_rasp(program, vocab, 4, causal=causal, optimize=False)
            except CompilerError:
                continue  # refused (e.g. a None-able numerical s-op): same for both
            optimised = compile_rasp(program, vocab, 4, causal=causal)
            changed += bool(applied(optimised.graph))
            for name in {line.split(":")[0] for line in applied(optimised.graph)}:
                by_pass[name] = by_pass.get(name, 0) + 1
            assert optimised.config.num_layers <= plain.config.num_layers, seed
            inputs = random_inputs(vocab, 4, 60, seed=seed)
            expected = []
            for tokens in inputs:
                try:
                    expected.append(rasp.evaluate(program, tokens, causal=causal))
                except rasp.RaspEvaluationError:
                    expected.append(None)
            for model in (plain, optimised):
                # The numpy interpreter of the compiled weights: no XLA compilation per program.
                for tokens, got, want in zip(inputs, run_model(model, inputs, "numpy"), expected):
                    if want is not None:
                        assert outputs_match(got, want), (seed, causal, tokens, program_spec.to_source(spec))
            compiled += 1
    assert compiled >= 120
    assert changed >= 30  # programs the passes really changed
    for name in ("merge_common", "fold_maps", "fold_outputs", "fuse_inputs", "prune_tables"):
        assert by_pass.get(name, 0) >= 3, by_pass  # each pass is checked on programs it changed
