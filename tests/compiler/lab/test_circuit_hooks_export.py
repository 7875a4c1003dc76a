"""The circuit records' TransformerLens names are real: on the default export every hook they
name fires, and the named weights carry each per-head hook to and from the residual stream as
docs/circuits.md says (a head writes ``hook_z[..., h, :] @ W_O[h]``, its query reads
``resid @ W_Q[h]``; an MLP's port ``hook_mlp_in`` holds its input alone)."""

import operator

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the export extra (torch) is not installed")
pytest.importorskip("transformer_lens", reason="the export extra (transformer-lens) is not installed")

from compiler import compile_rasp, to_transformer_lens
from compiler.examples import EXAMPLES
from compiler.lab.circuits import InputDistribution, network

ATOL = 1e-5  # float32 products of a few dozen terms of size <= 1


@pytest.fixture(scope="module")
def exported():
    example = EXAMPLES["sort"]
    model = compile_rasp(example.build(4), set(example.vocab), 4)
    tl = to_transformer_lens(model)
    ids = torch.tensor(InputDistribution(16).ids(model))
    return model, network(model), tl, ids


def _cache(tl, ids, names):
    """Every hook in `names` captured by the name asked for (the bridge calls some by aliases)."""
    seen = {}
    keep = lambda name: lambda x, hook: seen.__setitem__(name, x.detach())
    with torch.no_grad(), tl.hooks(fwd_hooks=[(name, keep(name)) for name in names]):
        tl(ids)
    return seen


def test_every_hook_the_records_name_fires_on_the_default_export(exported):
    model, net, tl, ids = exported
    names = {e.src_hook for e in net.edges} | {e.dst_hook for e in net.edges}
    kinds = {name.split(".")[-1] for name in names}
    assert {"hook_embed", "hook_pos_embed", "hook_z", "hook_q", "hook_k", "hook_v", "hook_mlp_in", "hook_mlp_out",
            "hook_resid_post"} == kinds
    assert set(_cache(tl, ids, names)) == names
    for edge in net.edges:
        for weight, head in ((edge.src_hook_weight, edge.src_hook_head), (edge.dst_hook_weight, edge.dst_hook_head)):
            if weight:
                assert operator.attrgetter(weight)(tl)[head].shape[-1] in (tl.cfg.d_head, tl.cfg.d_model)


@torch.no_grad()
def test_the_named_weights_connect_the_per_head_hooks_to_the_residual_stream(exported):
    model, net, tl, ids = exported
    blocks = sorted({c.block for c in net.sources if c.kind == "head"})
    names = [f"blocks.{b}.{hook}" for b in blocks for hook in
             ("attn.hook_z", "attn.hook_q", "attn.hook_k", "attn.hook_v", "hook_attn_out", "hook_resid_pre",
              "hook_resid_mid", "hook_mlp_in")]
    cache = _cache(tl, ids, names)
    for b in blocks:
        attn = tl.blocks[b].attn
        heads = [c for c in net.sources if c.kind == "head" and c.block == b]
        writes = sum(cache[c.hook][..., c.hook_head, :] @ operator.attrgetter(c.hook_weight)(tl)[c.hook_head]
                     for c in heads)
        assert np.allclose(writes + attn.b_O, cache[f"blocks.{b}.hook_attn_out"], atol=ATOL)
        for port in (p for p in net.ports if p.component in {c.name for c in heads}):
            w = operator.attrgetter(port.hook_weight)(tl)[port.hook_head]
            bias = getattr(attn, f"b_{port.port.upper()}")[port.hook_head]
            read = cache[f"blocks.{b}.hook_resid_pre"] @ w + bias
            assert np.allclose(read, cache[port.hook][..., port.hook_head, :], atol=ATOL), port.name
        assert torch.equal(cache[f"blocks.{b}.hook_mlp_in"], cache[f"blocks.{b}.hook_resid_mid"])
