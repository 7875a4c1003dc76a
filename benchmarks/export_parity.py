"""Largest difference between the compiled model and its TransformerLens export, per program.

Needs the export extra. For every library example (default size, and vocabulary ~10 / length
10; causal too where the program allows it) plus a model with no layers and one with no heads:
the largest absolute difference in logits, residual snapshots and compiled heads' attention
patterns on a padded batch of 17 random sequences (one full length, the others random lengths),
and of `numpy_forward` (float64) in logits.

    python benchmarks/export_parity.py
"""

from __future__ import annotations

import numpy as np
import torch

from compiler.compiling import compile_rasp
from compiler.examples import EXAMPLES
from compiler.io.export import export_weights, numpy_forward, to_transformer_lens
from rasp import rasp


def differences(model, rng: np.random.Generator) -> tuple[float, float, float, float]:
    """`(logits, residuals, patterns, numpy logits)` largest absolute differences."""
    tl_model = to_transformer_lens(model)
    info = tl_model.export_info
    encoder = model.input_encoder
    n = encoder.max_seq_len

    def sequence(length: int) -> list:
        return [encoder.bos, *(encoder.vocab[i] for i in rng.integers(0, len(encoder.vocab), length))]

    ids = encoder.encode_batch([sequence(n)] + [sequence(int(rng.integers(1, n + 1))) for _ in range(16)])
    ours = model.run(ids)
    output = np.asarray(ours.output)
    output = output[..., None] if model.config.numerical_output else output
    with torch.no_grad():
        logits, cache = tl_model.run_with_cache(torch.tensor(ids, dtype=torch.long))
    logit_error = float(np.abs(logits.numpy() - output).max())
    residual_error = max(
        float(np.abs(cache[hook].numpy() - np.asarray(residual)).max())
        for (_, hook), residual in zip(info.stages, ours.residuals)
    )
    pattern_error = 0.0
    patterns = iter(ours.attention)
    for block, (attn, _) in enumerate(info.block_sublayers):
        if attn is None:
            continue
        pattern = np.asarray(next(patterns))
        if pattern.size:
            theirs = cache[f"blocks.{block}.attn.hook_pattern"].numpy()[:, : info.real_heads[block]]
            pattern_error = max(pattern_error, float(np.abs(theirs - pattern).max()))
    exported = export_weights(model, attn_scale=info.attn_scale)
    numpy_error = float(np.abs(numpy_forward(exported.state_dict, exported.config, ids) - output).max())
    return logit_error, residual_error, pattern_error, numpy_error


def main() -> None:
    rng = np.random.default_rng(0)
    models = {}
    for name, example in EXAMPLES.items():
        for causal in (False, True) if example.causal else (False,):
            tag = name + ("-causal" if causal else "")
            models[tag] = compile_rasp(example.build(example.max_seq_len), set(example.vocab), example.max_seq_len, causal=causal)
        models[f"{name}-10"] = compile_rasp(example.build(10), set(example.scaled_vocab(10)), 10)
    models["zero-layer"] = compile_rasp(rasp.tokens, {"a", "b"}, 4)
    models["zero-head"] = compile_rasp(rasp.numerical(rasp.Map(lambda x: x + 1, rasp.tokens)), {1, 2}, 4)
    print(f"{'model':22s} {'logits':>9s} {'residual':>9s} {'pattern':>9s} {'numpy':>9s}")
    for tag, model in models.items():
        errors = differences(model, rng)
        print(f"{tag:22s} " + " ".join(f"{e:9.1e}" for e in errors), flush=True)


if __name__ == "__main__":
    main()
