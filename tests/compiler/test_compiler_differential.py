"""Every library program, compiled, equals the RASP evaluator on random inputs.

Two settings per program, one with max_seq_len >= 32; 200 random inputs of random lengths each;
numerical outputs within 1e-3. Every program also compiles with causal=True and equals the causal
evaluator at both settings; a `CausalSemanticsWarning` is raised exactly for the programs whose
causal and plain results differ on some input, and causal_strict=True refuses those.
"""

from __future__ import annotations

import warnings

import pytest
from support import compare_with_evaluator, outputs_match, random_inputs

from compiler import CausalSemanticsWarning, UnsupportedProgramError, compile_rasp
from compiler.examples import EXAMPLES
from rasp import rasp

SETTINGS = ((6, 8), (10, 32))  # (vocabulary size, max_seq_len)
INPUTS = 200
READS_LATER = "may select keys after the query"


def _check(example, size: int, max_seq_len: int, causal: bool) -> None:
    vocab = example.scaled_vocab(size)
    program = example.build(max_seq_len)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = compile_rasp(program, vocab, max_seq_len, causal=causal)
    causal_warnings = [w for w in caught if issubclass(w.category, CausalSemanticsWarning)]
    assert len(causal_warnings) == (1 if causal and not example.causal else 0)
    inputs = random_inputs(vocab, max_seq_len, INPUTS, seed=size * 1000 + max_seq_len)
    # inputs outside the program's domain (e.g. a categorical mean of different values) are skipped
    compared = compare_with_evaluator(model, program, inputs, causal, example.name)
    assert compared >= INPUTS * 0.9, f"{example.name}: only {compared} inputs inside the domain"


@pytest.mark.parametrize("size,max_seq_len", SETTINGS)
@pytest.mark.parametrize("example", EXAMPLES.values(), ids=lambda e: e.name)
def test_library_program_matches_rasp(example, size, max_seq_len):
    _check(example, size, max_seq_len, causal=False)


@pytest.mark.parametrize("size,max_seq_len", SETTINGS)
@pytest.mark.parametrize("example", EXAMPLES.values(), ids=lambda e: e.name)
def test_library_program_causal(example, size, max_seq_len):
    _check(example, size, max_seq_len, causal=True)


@pytest.mark.parametrize("example", EXAMPLES.values(), ids=lambda e: e.name)
def test_causal_warning_fires_exactly_when_causal_results_differ(example):
    size, max_seq_len = SETTINGS[0]
    vocab = example.scaled_vocab(size)
    program = example.build(max_seq_len)
    differs = False
    for tokens in random_inputs(vocab, max_seq_len, INPUTS, seed=7):
        try:
            plain = rasp.evaluate(program, tokens)
            causal = rasp.evaluate(program, tokens, causal=True)
        except rasp.RaspEvaluationError:
            continue
        differs = differs or not outputs_match(causal, plain, tolerance=0.0)
    assert differs == (not example.causal), example.name
    if differs:
        with pytest.raises(UnsupportedProgramError, match=READS_LATER):
            compile_rasp(program, vocab, max_seq_len, causal=True, causal_strict=True)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error", CausalSemanticsWarning)
            compile_rasp(program, vocab, max_seq_len, causal=True, causal_strict=True)
