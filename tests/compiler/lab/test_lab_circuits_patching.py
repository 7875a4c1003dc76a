"""The padded, bucketed patching program against a direct forward pass written out here.

`patching` runs every network in a shape bucket (sub-layers packed into (attention, MLP)
blocks, every dimension padded with zeros, the blocks in a `lax.scan`). These tests check that
the padding changes nothing: on random keep masks (zeros, ones and values between), random
reference values, causal and not, a compiled model and hand-made networks with adjacent
attention layers, adjacent MLPs and every MLP activation give the outputs of a plain float64
forward pass over the unpadded weights; networks with a LayerNorm or RMSNorm (each port reads
the normalised sum, over the real coordinates only) too.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from compiler import compile_rasp
from compiler.examples import EXAMPLES
from compiler.lab.circuits.components import AttentionLayer, Component, MLPLayer, Network, Port, network
from compiler.lab.circuits.measure import setup
from compiler.lab.circuits.methods import edge_patching_scores
from compiler.lab.circuits.patching import bucket, edge_keeps, forward, forward_many, layout, source_outputs
from compiler.lab.circuits.readout import decoded
from compiler.model.config import MASKED_LOGIT, NormSpec
from craft.blocks import activate


def direct_forward(net: Network, keep: np.ndarray, ids: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """The patched forward pass of the `patching` docstring, one port and one head at a time."""
    keep, reference = np.asarray(keep, np.float64), np.asarray(reference, np.float64)
    batch, length = ids.shape
    outs = [np.asarray(net.tok_embed, np.float64)[ids],
            np.broadcast_to(np.asarray(net.pos_embed, np.float64)[:length], (batch, length, net.width))]
    valid = ids != net.pad_id  # [B, T] keys
    allowed = valid[:, None, :] & (np.tril(np.ones((length, length), bool)) if net.causal else True)

    def read(port: int) -> np.ndarray:
        count = net.upstream_counts[port]
        x = sum(keep[port, s][None, :, None] * outs[s] + (1 - keep[port, s])[None, :, None] * reference[s]
                for s in range(count))
        if net.norm is None:
            return x
        if net.norm.kind == "layernorm":
            x = x - x.mean(axis=-1, keepdims=True)
        return net.norm.scale * x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + net.norm.eps)

    port = 0
    for layer in net.layers:
        if isinstance(layer, AttentionLayer):
            written = []
            for h in range(len(layer.w_q)):
                q, k, v = (read(port + 3 * h + j) @ np.asarray(w[h], np.float64)
                           for j, w in enumerate((layer.w_q, layer.w_k, layer.w_v)))
                logits = np.where(allowed, np.einsum("bte,bse->bts", q, k), MASKED_LOGIT)
                pattern = np.exp(logits - logits.max(axis=-1, keepdims=True))
                pattern /= pattern.sum(axis=-1, keepdims=True)
                written.append(np.einsum("bts,bse->bte", pattern, v) @ np.asarray(layer.w_o[h], np.float64))
            outs += written
            port += 3 * len(layer.w_q)
        else:
            hidden = activate(layer.activation, read(port) @ np.asarray(layer.w_in, np.float64))
            outs.append(hidden @ np.asarray(layer.w_out, np.float64))
            port += 1
    return read(port) @ np.asarray(net.unembed, np.float64)[:, net.columns]


def _hand_made(causal: bool, seed: int = 0) -> Network:
    """Attention (2 heads), attention (1 head), MLP (square), MLP (bilinear), MLP (relu),
    attention (1 head): adjacent layers of one kind land in blocks of their own."""
    rng = np.random.default_rng(seed)
    d, vocab, positions = 7, 5, 6
    w = lambda *shape: rng.normal(size=shape).astype(np.float32) * 0.6
    attention = lambda heads, k, v: AttentionLayer(w(heads, d, k), w(heads, d, k), w(heads, d, v), w(heads, v, d))
    layers = (attention(2, 3, 2), attention(1, 4, 3), MLPLayer(w(d, 5), w(5, d), "square"),
              MLPLayer(w(d, 6), w(3, d), "bilinear"), MLPLayer(w(d, 4), w(4, d), "relu"), attention(1, 2, 2))
    sources = [Component("embed tokens", "embed"), Component("embed positions", "embed")]
    ports = []
    for index, layer in enumerate(layers):
        if isinstance(layer, AttentionLayer):
            for h in range(len(layer.w_q)):
                ports += [Port(f"l{index} h{h}", p, "", None, "") for p in "qkv"]
                sources.append(Component(f"l{index} h{h}", "head"))
        else:
            ports.append(Port(f"l{index} mlp", "in", "", None, ""))
            sources.append(Component(f"l{index} mlp", "mlp"))
    ports.append(Port("unembed", "in", "", None, ""))
    return Network(tuple(sources), tuple(ports), w(vocab, d), w(positions, d), layers, w(d, 4), slice(1, 4),
                   False, 0.5, 3, 4, causal)


def _random_keeps(net: Network, length: int, rng: np.random.Generator, count: int) -> np.ndarray:
    keeps = rng.choice([0.0, 1.0, 0.3], size=(count, len(net.ports), len(net.sources), length), p=[0.3, 0.6, 0.1])
    keeps[0] = 1.0
    return keeps.astype(np.float32)


def _ids(net: Network, rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
    ids = rng.integers(0, net.pad_id, size=(batch, length)).astype(np.int32)
    ids[:, 0] = net.bos_id
    for row, stop in zip(ids, rng.integers(2, length + 1, size=batch)):
        row[stop:] = net.pad_id
    return ids


def test_bucket_is_the_next_power_of_two_or_one_and_a_half_times_one():
    assert [bucket(n) for n in (0, 1, 2, 3, 4, 5, 6, 7, 9, 13, 17, 25, 33, 100, 250)] == [
        1, 1, 2, 3, 4, 6, 6, 8, 12, 16, 24, 32, 48, 128, 256]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("norm", [None, "layernorm", "rmsnorm"])
def test_padded_forward_equals_the_direct_forward_on_hand_made_networks(causal, norm):
    net = _hand_made(causal)
    if norm is not None:  # 7 real coordinates padded to 32: the norm must see the 7 alone
        net = net.replace_weights(norm=NormSpec(norm, scale=1.5, eps=1e-5, anchor=1.0, spread=0.0))
    rng = np.random.default_rng(1)
    ids = _ids(net, rng, batch=5, length=5)
    reference = rng.normal(size=(len(net.sources), 5, 5, net.width)).astype(np.float32)
    keeps = _random_keeps(net, 5, rng, count=3)
    assert layout(net).shape.blocks == 8  # A A M M M A packs into 5 blocks (A), (A M), (M), (M), (A): 8 padded
    got = forward_many(net, keeps, jnp.asarray(ids), jnp.asarray(reference))
    for keep, out in zip(keeps, got):
        want = direct_forward(net, keep, ids, reference)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    single = np.asarray(forward(net, jnp.asarray(keeps[1]), jnp.asarray(ids), jnp.asarray(reference)))
    np.testing.assert_allclose(single, got[1], rtol=1e-5, atol=1e-5 * np.abs(got[1]).max())


@pytest.mark.parametrize("norm", [None, "layernorm", "rmsnorm"])
def test_padded_forward_equals_the_direct_forward_on_a_compiled_model(norm):
    example = EXAMPLES["reverse"]
    model = compile_rasp(example.build(5), set(example.vocab), 5, norm=norm)
    net = network(model)
    rng = np.random.default_rng(2)
    ids = _ids(net, rng, batch=6, length=6)
    outs = np.asarray(source_outputs(net, jnp.asarray(ids)))
    reference = outs[:, rng.permutation(6)]  # another input's values, as resample ablation takes
    keeps = _random_keeps(net, 6, rng, count=4)
    # Masks that vary by position, and whole-edge masks (the same at every position, which the
    # programs read with one matrix product per port group).
    whole = edge_keeps(net, rng.random((4, len(net.edges))) < 0.3, 6)
    for masks in (keeps, whole):
        got = forward_many(net, masks, jnp.asarray(ids), jnp.asarray(reference))
        for keep, out in zip(masks, got):
            want = direct_forward(net, keep, ids, reference)  # ablating the anchor can scale a read up
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(want).max()))
    # Nothing ablated is the compiled model itself.
    plain = np.asarray(forward(net, np.ones(keeps.shape[1:], np.float32), jnp.asarray(ids), jnp.asarray(reference)))
    np.testing.assert_allclose(plain, np.asarray(model.run(ids).output).reshape(plain.shape), atol=1e-5)


def test_networks_of_one_bucket_share_a_shape_and_the_single_edge_sweep_is_reused():
    nets = []
    for name in ("hist", "count_a"):
        example = EXAMPLES[name]
        nets.append(network(compile_rasp(example.build(5), set(example.vocab), 5)))
    assert nets[0].width != nets[1].width or nets[0].layers[0].w_q.shape != nets[1].layers[0].w_q.shape
    assert layout(nets[0]).shape == layout(nets[1]).shape
    rng = np.random.default_rng(3)
    s = setup(nets[0], _ids(nets[0], rng, batch=8, length=6), "zero")
    assert edge_patching_scores(s) is not edge_patching_scores(s, sharpness=20.0)
    assert list(s.cache) == [("single", False)]  # both read from one sweep


@pytest.mark.parametrize("as_jax", [False, True])
def test_an_output_with_no_values_decodes_to_none_everywhere(as_jax):
    """A categorical program that is None at every position compiles to an unembedding with no
    columns (random program 17 of the circuit benchmark): every position decodes to None (-1),
    with or without the empty threshold, instead of failing in argmax."""
    output = np.zeros((2, 4, 0), np.float32)
    output = jnp.asarray(output) if as_jax else output
    for threshold in (None, 0.5):
        got = np.asarray(decoded(output, False, threshold))
        assert got.shape == (2, 4) and (got == -1).all()
