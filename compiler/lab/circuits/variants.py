"""The difficulty dial: one program as models that are harder to read, same function.

* **a, exact**: the compiled one-hot model.
* **b, analytic**: the model run in superposition through the analytic packed projection of
  `compression` (random if packed has no exact width) at its smallest width that is exact
  against RASP on the program's input space.
* **c, gd**: the model run through a projection learned by gradient descent (`compression`'s
  trainer) at the width of (b), stopped at the first exact check or after the budget; its
  accuracy is stated (`Variant.accuracy`). Its categorical outputs are decoded by argmax
  alone, as that check decodes them: GD keeps the argmax, not the logit scale that the compiled
  decoder's empty threshold assumes.
* **d, distractors**: other programs compiled into the same model (`compile_rasp([...])`),
  active on the same inputs, not feeding the scored output: a random program over the same
  vocabulary (`compiler.fuzzing`) and Maps of the main program's own s-ops, which share its
  heads and MLPs (the optimizer merges common subexpressions).
* **e, reparametrised**: function-preserving changes that make weights look trained: a random
  orthogonal rotation of the residual basis, a random invertible map inside every head's W_QK
  (W_Q A, W_K A^-T) and W_OV (W_V B, B^-1 W_O), and a random permutation and positive rescaling
  of every ReLU MLP's neurons (W_in[:, π] s, W_out[π] / s).
* **f, distributed heads**: every head becomes `COPIES` heads with its attention pattern and
  random positive shares of its W_OV (drawn from a Dirichlet, summing to 1): the same function,
  but each computation is spread over parallel components, so ablating one copy moves the
  output by its share only. Shares too small to flip an output alone leave their edges out of
  the single-edge circuit; ablated together they do flip outputs, so the verified circuit is
  the repaired one (redundant paths), and edges that matter only together compete with edges
  that move the logits without changing a decoded output.

* **g, interference**: every head and MLP also writes a random linear function of its own
  output into the directions the unembedding reads for the scored output, each scaled so
  that, on the sampled inputs, it moves no logit by more than `g@λ`'s λ (0.9 by default) times
  the model's decision margin divided by the number of components. At λ < 1 they together never
  change a decoded output of the unablated model on those inputs; above 1 they may
  (`keeps_outputs` says whether they do). Every component, and every edge into it, now moves
  the output logits, as the parts of a trained model outside its circuit do.

* **h, layernorm**: the program compiled with `norm="layernorm"`: a LayerNorm before every
  sub-layer and the unembedding, as in GPT-2 (`compile_rasp(norm=...)`); every port reads the
  normalised stream, so ablating a source also moves the scale every other read is divided by.
  It combines with d, e, f and g (e's residual rotation then keeps the all-ones direction and the
  anchor coordinates in place: the centring commutes with it, and the anchor stays a massive
  activation on its own coordinates, as in trained models); not with b or c, since compression
  refuses normalised models.

Letters combine: "b+e" is the superposed model reparametrised, "d+b+e" all three. The circuit
of every variant is measured on the variant itself (`compiler.lab.circuits.measure`), so the
ground truth is carried through each and verified there; `keeps_outputs` measures that the
variant computes the program (exact for a, b, d, e).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Hashable, Sequence

import jax.numpy as jnp
import numpy as np

from compiler import compile_rasp
from compiler.enums import StrEnum
from compiler.errors import LabError
from compiler.fuzzing.program_spec import build
from compiler.fuzzing.random_programs import generate
from compiler.lab.circuits.components import PORTS, AttentionLayer, MLPLayer, Network, Port, network
from compiler.lab.circuits.measure import decoded
from compiler.lab.circuits.patching import forward
from compiler.model.compiled_model import CompiledModel
from compiler.model.norm import anchor_coordinates
from rasp import rasp

# Relative noise added to the analytic W before GD (c) trains it back to exactness.
NOISE = 0.05



class Dial(StrEnum):
    """The dial's settings, each a letter (the value) with a name that may be written instead
    (`parse("analytic+reparametrised") == ("b", "e")`); a `str`, so members equal their letters."""

    EXACT = "a"
    ANALYTIC = "b"
    GD = "c"
    DISTRACTORS = "d"
    REPARAMETRISED = "e"
    DISTRIBUTED = "f"
    INTERFERENCE = "g"
    LAYERNORM = "h"


# What each setting does, in a phrase (the module docstring has the details).
LETTERS = {Dial.EXACT: "exact", Dial.ANALYTIC: "analytic superposition", Dial.GD: "GD-compressed",
           Dial.DISTRACTORS: "distractors", Dial.REPARAMETRISED: "reparametrised",
           Dial.DISTRIBUTED: "distributed heads", Dial.INTERFERENCE: "interference", Dial.LAYERNORM: "layernorm"}
_ALIASES = {**{m.value: m.value for m in Dial}, **{m.name.lower(): m.value for m in Dial}}
# f: how many parallel copies each head becomes, and the Dirichlet concentration of their shares
# (1: uniform over the simplex, so shares are uneven).
COPIES = 3
CONCENTRATION = 1.0
# g: the default fraction of the decision margin the interference may use up, all components together.
INTERFERENCE = 0.9


@dataclasses.dataclass(frozen=True, eq=False)
class Variant:
    """One setting of the dial: the network, the compiled model its components come from, and
    what was done (`note`: widths, distractor programs, seeds)."""

    name: str
    net: Network
    model: CompiledModel
    note: str
    accuracy: float | None = None  # c, or b squeezed: sequence accuracy against RASP on the exactness inputs
    exact_net: Network | None = None  # f: the exact-basis network with the variant's components (structural circuit)


def _parts(name: str) -> list[tuple[str, str | None]]:
    """`"reparametrised+c@0.6"` -> `[("e", None), ("c", "0.6")]`: each part's letter (a name
    read as its letter; an unknown one kept as written) and what follows its '@' (None without)."""
    parts = []
    for part in name.split("+"):
        setting, at, argument = part.strip().partition("@")
        parts.append((_ALIASES.get(setting.strip().lower(), setting.strip()), argument if at else None))
    return parts


def parse(name: str) -> tuple[str, ...]:
    """`"d+b+e"` (or `"distractors+analytic+reparametrised"`) -> `("d", "b", "e")`, checked; a
    width fraction (`"c@0.6"`) is dropped here (`squeeze` reads it).

    Exported from `compiler.lab.circuits` as `parse_variant`.

    Args:
        name: dial settings joined by '+', each a letter of `LETTERS` or its `Dial` name; b or c
            may carry a width fraction, g an interference level (`"c@0.6"`, `"g@0.5"`).
    Returns:
        The letters in the order given, without their '@' suffixes.
    Raises:
        LabError: an unknown setting, b and c together, or an '@' suffix that is on another
            letter, given twice, not a number or out of range (`squeeze`).
    """
    letters = tuple(letter for letter, _ in _parts(name))
    unknown = [letter for letter in letters if letter not in LETTERS]
    if unknown or not letters:
        names = ", ".join(f"{m.value} ({m.name.lower()})" for m in Dial)
        raise LabError(f"unknown variant {name!r}; use the settings {names} joined by '+' (e.g. 'b+e')")
    if "b" in letters and "c" in letters:
        raise LabError(f"variant {name!r}: b and c are two projections; pick one")
    if "h" in letters and ("b" in letters or "c" in letters):
        raise LabError(f"variant {name!r}: h (layernorm) runs uncompressed, since compression refuses normalised "
                       "models; drop b or c, or h")
    squeeze(name)
    return letters


def squeeze(name: str) -> float:
    """The width fraction of a variant name: `"c@0.6"` -> 0.6 (the projection of b or c is
    `0.6` times its smallest exact width, so in deeper superposition than exact), 1.0 without."""
    fractions = [(letter, argument) for letter, argument in _parts(name) if argument is not None]
    if not fractions:
        return 1.0
    if len(fractions) > 1 or fractions[0][0] not in ("b", "c", "g"):
        raise LabError(f"variant {name!r}: only b or c (a width fraction) or g (an interference level) takes "
                       f"'@', once (e.g. 'c@0.6', 'g@0.9')")
    try:
        fraction = float(fractions[0][1])
    except ValueError:
        raise LabError(f"variant {name!r}: the width fraction after '@' must be a number in (0, 1]") from None
    if fractions[0][0] == "g":
        if not fraction > 0.0:
            raise LabError(f"variant {name!r}: the interference level {fraction} must be positive")
        return 1.0
    if not 0.0 < fraction <= 1.0:
        raise LabError(f"variant {name!r}: the width fraction {fraction} must be in (0, 1]")
    return fraction


def interference_level(name: str) -> float:
    """The interference level of a variant name: `"g@0.5"` -> 0.5, `"g"` -> INTERFERENCE."""
    for letter, level in _parts(name):
        if letter == "g":
            return float(level) if level else INTERFERENCE
    return INTERFERENCE


# -- d: distractors ------------------------------------------------------------------------------


def _categorical_sops(program: rasp.SOp) -> list[rasp.SOp]:
    """The program's categorical s-ops other than its inputs, in a fixed order (output last)."""
    found: dict[int, rasp.SOp] = {}

    def visit(expr: rasp.RASPExpr) -> None:
        for child in expr.children:
            visit(child)
        inputs = (rasp.TokensType, rasp.IndicesType)  # `in` would compare s-ops with ==, a selector
        if isinstance(expr, rasp.SOp) and not isinstance(expr, inputs) and rasp.is_categorical(expr):
            found.setdefault(expr.unique_id, expr)

    visit(program)
    return list(found.values())


def distractor_programs(program: rasp.SOp, vocab: tuple[Hashable, ...], max_seq_len: int, seed: int = 0) -> list[rasp.SOp]:
    """A random program over the same vocabulary and Maps of the main program's own s-ops."""
    distractors = [build(generate(seed, 4, vocab, max_seq_len)).named("distractor_random")]
    for index, sop in enumerate(_categorical_sops(program)[-2:]):
        distractors.append(rasp.categorical(rasp.Map(_bucket, sop)).named(f"distractor_shared_{index}"))
    return distractors


def _bucket(value: Hashable) -> int:
    """A fixed, process-independent map of any value to {0, 1, 2} (`hash` of a str is salted)."""
    return zlib.crc32(repr(value).encode()) % 3


# -- b, c: projections -----------------------------------------------------------------------------


def analytic_projection(model: CompiledModel, program: rasp.SOp, unique_tokens: bool = False,
                        fraction: float = 1.0) -> tuple[np.ndarray, str, float]:
    """The packed (else random) analytic projection at its smallest width exact against RASP,
    or at `fraction` of that width (at least the construction's minimum); returns it, a note
    and its sequence accuracy against RASP (1.0 at the exact width).

    "Exact" is checked as every claim is (`compression.claims`): on every input when there are
    at most 10^5, else on 2,000 distinct random inputs plus up to 2,000 where the interference
    bound's margin is tightest; the note says which, and whether the bound also proves it."""
    from compression import task_of
    from compression.analytic import interference_bound, make_projection, min_width, residual_structure
    from compression.analytic.packing import Method
    from compression.claims import claim_check, claim_exactness
    from compression.width_search import analytic_exact_width

    task = task_of(model, program, unique_tokens=unique_tokens)
    check, _, _ = claim_check(task)
    structure = residual_structure(model)
    methods: tuple[Method, ...] = ("packed", "random")
    for method in methods:
        d = analytic_exact_width(check, structure, method)
        if d is None:
            continue
        w = make_projection(structure, method, d)
        claim = claim_exactness(task, w, structure, bound=interference_bound(structure, w))
        if not claim.check.passed:  # the wider check (the bound's tightest inputs added) found a wrong input
            continue
        proof = "the interference bound proves it" if claim.bound_claims else "the interference bound does not prove it"
        note = (f"{method} projection at its smallest exact width d={d} of D={model.config.residual_width}: "
                f"{claim.check.describe()}; {proof}")
        if fraction == 1.0:
            return w, note, 1.0
        squeezed = max(1, round(fraction * d))
        # Below the packed construction's minimum (one dimension per s-op) the random one still
        # fits; below both, the random one's minimum.
        method = method if squeezed >= min_width(structure, method) else "random"
        squeezed = max(squeezed, min_width(structure, method))
        w = make_projection(structure, method, squeezed)
        accuracy = float(check.sequence_accuracy(w))
        return w, (f"{method} projection at d={squeezed}, {fraction:g} of the smallest exact width {d} "
                   f"(D={model.config.residual_width}), sequence accuracy {accuracy:.4f} on {check.size} inputs"), accuracy
    raise LabError(f"no analytic projection of {program.label!r} is exact below D={model.config.residual_width}")


def gd_projection(model: CompiledModel, program: rasp.SOp, start: np.ndarray, steps: int = 1_000, seed: int = 0,
                  unique_tokens: bool = False) -> tuple[np.ndarray, str, float]:
    """A projection learned by gradient descent at the width of `start` (an exact analytic W),
    started from `start` rotated randomly and perturbed (noise of NOISE times its mean column
    norm), stopped at the first exact check or after `steps`; returns it, a note and its
    sequence accuracy against RASP."""
    from compression import task_of
    from compression.exactness import exactness_check
    from compression.learned.config import GDRecipe
    from compression.width_search import gd_run

    rng = np.random.default_rng(seed)
    start = np.asarray(start, np.float64) @ _orthogonal(rng, start.shape[1])
    noise = NOISE * np.linalg.norm(start, axis=0).mean() / np.sqrt(start.shape[0])
    initial = (start + rng.normal(scale=noise, size=start.shape)).astype(np.float32)
    check = exactness_check(task_of(model, program, unique_tokens=unique_tokens))
    recipe = GDRecipe(steps=steps, check_every=max(1, min(100, steps)), seeds=1)
    d = start.shape[1]
    run, w = gd_run(check, d, recipe, seed=seed, projection=initial, init="perturbed analytic")
    note = (f"GD at d={d} from the analytic W rotated and perturbed, {run.steps} steps, "
            f"sequence accuracy {run.sequence_accuracy:.4f} on {check.size} inputs")
    return w, note, float(run.sequence_accuracy)


# -- e: reparametrisation --------------------------------------------------------------------------


def _orthogonal(rng: np.random.Generator, n: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(n, n)))
    return q * np.sign(np.diag(r))


def _rotation(rng: np.random.Generator, n: int, fixed: np.ndarray | None = None) -> np.ndarray:
    """A random orthogonal `[n, n]`; with `fixed` (`[n, k]`, independent columns), one that maps
    every vector of their span to itself and rotates the orthogonal complement."""
    if fixed is None or fixed.shape[1] == 0:
        return _orthogonal(rng, n)
    k = fixed.shape[1]
    if n - k < 1:
        return np.eye(n)
    basis = np.linalg.qr(np.hstack([fixed, rng.normal(size=(n, n - k))]))[0]  # its first k columns span `fixed`
    inner = np.eye(n)
    inner[k:, k:] = _orthogonal(rng, n - k)
    return basis @ inner @ basis.T


def norm_fixed_directions(net: Network, labels: Sequence[str]) -> np.ndarray | None:
    """`[d, k]`: what a reparametrisation of a normalised network (residual `labels`) keeps in
    place: the all-ones vector for LayerNorm (so the centring commutes with the rotation) and the
    anchor coordinates (a rotation would spread the anchor's magnitude over every coordinate, and
    every read would then cancel it in float32: outputs changed on 5 of 17 library programs at
    5/5); None without a norm."""
    if net.norm is None:
        return None
    columns = [np.eye(net.width)[:, i] for i in anchor_coordinates(labels)]
    if net.norm.kind == "layernorm":
        columns.insert(0, np.ones(net.width))
    return np.stack(columns, axis=1)


def _invertible(rng: np.random.Generator, n: int, spread: float = 0.5) -> np.ndarray:
    """A random well-conditioned invertible matrix: rotation, positive scales, rotation."""
    return _orthogonal(rng, n) @ np.diag(np.exp(rng.uniform(-spread, spread, n))) @ _orthogonal(rng, n)


def reparametrise(net: Network, seed: int = 0, fixed: np.ndarray | None = None) -> Network:
    """The same function with weights that look trained (see the module docstring).

    Computed in float64 and stored in float32; the result's outputs differ from `net`'s by
    float rounding only (`keeps_outputs` measures the decoded outputs). `fixed` (`[d, k]`) spans
    directions the residual rotation keeps in place (`norm_fixed_directions` for a normalised
    network).
    """
    rng = np.random.default_rng(seed)
    rot = _rotation(rng, net.width, fixed)
    f64 = lambda a: np.asarray(a, np.float64)
    layers: list[AttentionLayer | MLPLayer] = []
    for layer in net.layers:
        if isinstance(layer, AttentionLayer):
            w_q, w_k, w_v, w_o = [], [], [], []
            for h in range(len(layer.w_q)):
                a = _invertible(rng, layer.w_q.shape[2])
                b = _invertible(rng, layer.w_v.shape[2])
                w_q.append(rot.T @ f64(layer.w_q[h]) @ a)
                w_k.append(rot.T @ f64(layer.w_k[h]) @ np.linalg.inv(a).T)
                w_v.append(rot.T @ f64(layer.w_v[h]) @ b)
                w_o.append(np.linalg.inv(b) @ f64(layer.w_o[h]) @ rot)
            layers.append(AttentionLayer(*(np.stack(w).astype(np.float32) for w in (w_q, w_k, w_v, w_o))))
        else:
            hidden = layer.w_in.shape[1]
            perm = rng.permutation(hidden)
            elementwise = layer.activation in ("relu", "identity", "square")
            if not elementwise:
                perm = np.arange(hidden)
            scale = np.exp(rng.uniform(-1.0, 1.0, hidden)) if layer.activation == "relu" else np.ones(hidden)
            w_in = (rot.T @ f64(layer.w_in))[:, perm] * scale
            w_out = (f64(layer.w_out)[perm] / scale[:, None]) @ rot
            layers.append(MLPLayer(w_in.astype(np.float32), w_out.astype(np.float32), layer.activation))
    return net.replace_weights(
        tok_embed=(f64(net.tok_embed) @ rot).astype(np.float32),
        pos_embed=(f64(net.pos_embed) @ rot).astype(np.float32),
        layers=tuple(layers),
        unembed=(rot.T @ f64(net.unembed)).astype(np.float32),
    )


# -- f: distributed heads ------------------------------------------------------------------------


def distribute_heads(net: Network, copies: int = COPIES, seed: int = 0, shares: np.ndarray | None = None) -> Network:
    """Every head of `net` as `copies` parallel heads with its W_QK and W_V and a positive share
    of its W_O (the shares of one head sum to 1), so the layer computes the same sum.

    Copy j of head h of block b is `layer b attn head h copy j`, head `h * copies + j` of its
    block in the hook and auto-circuit names (this network's own numbering, not the export's).
    `shares` (`[heads in total, copies]`) overrides the seeded Dirichlet draw.
    """
    rng = np.random.default_rng(seed)
    heads = [c for c in net.sources if c.kind == "head"]
    if shares is None:
        shares = rng.dirichlet(np.full(copies, CONCENTRATION), size=len(heads))
    shares = np.asarray(shares, np.float64)
    if shares.shape != (len(heads), copies) or np.any(shares <= 0) or not np.allclose(shares.sum(axis=1), 1):
        raise LabError(f"shares must be [{len(heads)}, {copies}], positive, each row summing to 1; got {shares.shape}")
    sources = [c for c in net.sources if c.kind == "embed"]
    ports: list[Port] = []
    layers: list[AttentionLayer | MLPLayer] = []
    by_name = {c.name: c for c in net.sources}
    old_ports = iter(net.ports)
    head = 0
    for layer in net.layers:
        if isinstance(layer, MLPLayer):
            port = next(old_ports)
            ports.append(port)
            sources.append(by_name[port.component])
            layers.append(layer)
            continue
        names = [next(old_ports).component for _ in range(3 * len(layer.w_q))][::3]
        w_o = []
        for h, name in enumerate(names):
            original = by_name[name]
            for j in range(copies):
                index = h * copies + j
                copy = f"{name} copy {j}"
                for part in PORTS:
                    ports.append(Port(copy, part, f"blocks.{original.block}.attn.hook_{part}", index,
                                      f"A{original.block}.{index}.{part.upper()}",
                                      f"blocks.{original.block}.attn.W_{part.upper()}"))
                sources.append(dataclasses.replace(original, name=copy, head=index, hook_head=index,
                                                   auto_circuit=f"A{original.block}.{index}"))
                w_o.append(np.asarray(layer.w_o[h], np.float64) * shares[head, j])
            head += 1
        repeat = lambda w: np.repeat(w, copies, axis=0)
        layers.append(AttentionLayer(repeat(layer.w_q), repeat(layer.w_k), repeat(layer.w_v),
                                     np.stack(w_o).astype(np.float32)))
    ports.append(next(old_ports))  # the unembedding
    return dataclasses.replace(net, sources=tuple(sources), ports=tuple(ports), layers=tuple(layers))


# -- g: interference ---------------------------------------------------------------------------------


def decision_margin(net: Network, outputs: np.ndarray, scored: np.ndarray) -> float:
    """How far every scored output logit may move, each on its own, without changing a decoded
    output: half the smallest gap between the two largest logits (and, with an empty
    threshold, between the largest logit and the threshold); numerical: the tolerance minus
    the largest distance from a value of the set, at most."""
    out = np.asarray(outputs, np.float64)[scored]
    if net.numerical:
        return float(net.numerical_tolerance) / 2
    top = np.sort(out, axis=-1)
    gaps = top[:, -1] - top[:, -2] if out.shape[-1] > 1 else np.full(len(out), np.inf)
    if net.empty_threshold is not None:
        gaps = np.minimum(gaps, 2 * np.abs(top[:, -1] - net.empty_threshold))
    return float(gaps.min() / 2)


def interfere(net: Network, ids: np.ndarray, level: float = INTERFERENCE, seed: int = 0) -> Network:
    """`net` with interference at `level` (see the module docstring) measured on `ids`.

    Every head and MLP's write `o` becomes `o (I + R_c U+)`, with `U` the unembedding's scored
    columns, `U+` its pseudo-inverse (a write into the directions `U` reads) and `R_c` a random
    `[d, n]` map scaled so that `|o R_c|` stays below `level * margin / components` on `ids`.
    """
    from compiler.lab.circuits.patching import forward, source_outputs

    rng = np.random.default_rng(seed)
    batch = jnp.asarray(ids, jnp.int32)
    outputs = np.asarray(source_outputs(net, batch), np.float64)  # [S, B, T, d]
    scored = np.asarray((batch != net.pad_id).at[:, 0].set(False))
    keep = jnp.ones((len(net.ports), len(net.sources), batch.shape[-1]), jnp.float32)
    clean = np.asarray(forward(net, keep, batch, jnp.zeros(outputs.shape, jnp.float32)))
    components = [i for i, c in enumerate(net.sources) if c.kind in ("head", "mlp")]
    budget = level * decision_margin(net, clean, scored) / max(len(components), 1)
    read = np.asarray(net.unembed, np.float64)[:, net.columns]  # [d, n]
    inverse = np.linalg.pinv(read)  # [n, d]
    maps = {}
    for source in components:
        r = rng.normal(size=(net.width, read.shape[1]))
        largest = np.abs(outputs[source][scored] @ r).max()
        maps[source] = r * (budget / largest if largest > 0 else 0.0) @ inverse  # [d, d]
    layers: list[AttentionLayer | MLPLayer] = []
    source = 2
    for layer in net.layers:
        if isinstance(layer, AttentionLayer):
            w_o = []
            for h in range(len(layer.w_o)):
                w = np.asarray(layer.w_o[h], np.float64)
                w_o.append(w + w @ maps[source])
                source += 1
            layers.append(dataclasses.replace(layer, w_o=np.stack(w_o).astype(np.float32)))
        else:
            w = np.asarray(layer.w_out, np.float64)
            layers.append(dataclasses.replace(layer, w_out=(w + w @ maps[source]).astype(np.float32)))
            source += 1
    return net.replace_weights(layers=tuple(layers))


# -- the dial ----------------------------------------------------------------------------------------


def make_variant(name: str, program: rasp.SOp, vocab: tuple[Hashable, ...], max_seq_len: int, *,
                 seed: int = 0, unique_tokens: bool = False, gd_steps: int = 1_000,
                 model: CompiledModel | None = None) -> Variant:
    """Build variant `name` ("a", "b", ..., or letters joined by '+') of `program`.

    Args:
        name: the variant's letters (see the module docstring).
        program: the RASP program.
        vocab, max_seq_len: what it is compiled for.
        seed: seeds the distractors, the GD run and the reparametrisation.
        unique_tokens: the program's valid inputs have no repeated token (sort_unique); used
            for the exactness checks of b and c.
        gd_steps: the GD budget of c.
        model: the exact compiled model when already at hand (reused for a, b, c, e).
    Returns:
        The `Variant`.
    Raises:
        LabError: an unknown letter, b and c together, h with b or c, or d with a program
            holding a rasp.Loop; also d with b or c, a bad '@' suffix (`parse`), and b or c when
            no analytic projection of the program is exact below the full width D.
    """
    letters = parse(name)
    notes = []
    norm = "layernorm" if "h" in letters else None
    if model is not None and (model.config.norm is None) != (norm is None):
        model = None  # compiled with the other norm setting: compile the one asked for
    if norm:
        notes.append("layernorm: a LayerNorm before every sub-layer and the unembedding")
    if "d" in letters and _has_loop(program):
        raise LabError(f"variant {name!r}: distractors are compiled into one model with the program, and a "
                         f"rasp.Loop ({program.label!r}) compiles only alone; use a, b, c, e or f")
    if "d" in letters:
        distractors = distractor_programs(program, vocab, max_seq_len, seed)
        model = compile_rasp([program, *distractors], set(vocab), max_seq_len, norm=norm)
        notes.append("distractors " + ", ".join(str(d.label) for d in distractors))
    elif model is None:
        model = compile_rasp(program, set(vocab), max_seq_len, norm=norm)
    projection, accuracy = None, None
    if "b" in letters or "c" in letters:
        if "d" in letters:
            _multi_analytic()
        fraction = squeeze(name)
        projection, note, accuracy = analytic_projection(model, program, unique_tokens, fraction)
        accuracy = None if fraction == 1.0 else accuracy
        notes.append(note)
        if "c" in letters:
            projection, note, accuracy = gd_projection(model, program, projection, gd_steps, seed, unique_tokens)
            notes[-1] = note + "; categorical outputs decoded by argmax, as the GD exactness check decodes"
    net = network(model, projection, output=str(program.label))
    if "c" in letters:
        # GD keeps the argmax, not the logit scale the empty threshold is set for (reverse at
        # length 4: 11 % of outputs above it, 100 % right by argmax).
        net = net.replace_weights(empty_threshold=None)
    exact_net = None
    if "f" in letters:
        net = distribute_heads(net, seed=seed)
        exact_net = distribute_heads(network(model, output=str(program.label)), seed=seed)
        notes.append(f"distributed heads (seed {seed}): every head as {COPIES} copies with Dirichlet({CONCENTRATION:g}) shares of W_OV")
    if "g" in letters:
        from compiler.lab.circuits.ablation import InputDistribution

        level = interference_level(name)
        sample = InputDistribution(64, seed=seed + 7919, unique_tokens=unique_tokens).ids(model)
        net = interfere(net, sample, level, seed)
        notes.append(f"interference (seed {seed}): every head and MLP writes into the scored read-out, "
                     f"{level:g} of the decision margin in all on 64 sampled inputs")
    if "e" in letters:
        net = reparametrise(net, seed, norm_fixed_directions(net, model.residual_labels))
        notes.append(f"reparametrised (seed {seed}): residual rotation, per-head W_QK / W_OV maps, MLP neuron permutation and rescaling")
    return Variant(name, net, model, "; ".join(notes) or "exact compiled model", accuracy, exact_net)


def _has_loop(expr: rasp.RASPExpr) -> bool:
    return isinstance(expr, rasp.Loop) or any(_has_loop(child) for child in expr.children)


def _multi_analytic() -> None:
    raise LabError("variant d with b or c: the analytic projection of a several-program model is not "
                     "supported by compression (it checks one program against RASP); use d+e")


def keeps_outputs(variant: Variant, program: rasp.SOp, tokens: list[list[Hashable]], causal: bool = False) -> float:
    """Fraction of scored positions of `tokens` at which the variant's decoded output equals
    RASP's (`rasp.evaluate`); numerical outputs within half the smallest gap of their values.

    Args:
        variant: the variant to run: its network, with its compiled model's encoders.
        program: the RASP program the variant computes; its label names the scored output.
        tokens: the inputs, token lists without BOS, each at most `max_seq_len` long.
        causal: evaluate RASP causally (`rasp.evaluate(..., causal=True)`), as for a causal
            compilation.
    Returns:
        The fraction in [0, 1] over every real position of every input (0.0 for no positions).
    """
    model, net = variant.model, variant.net
    encoder = model.input_encoder
    width = model.config.max_seq_len + 1
    ids = np.full((len(tokens), width), encoder.pad_id, np.int32)
    for i, row in enumerate(tokens):
        ids[i, : len(row) + 1] = encoder.encode([encoder.bos, *row])
    keep = jnp.ones((len(net.ports), len(net.sources), width), jnp.float32)
    out = np.asarray(forward(net, keep, jnp.asarray(ids), jnp.zeros((len(net.sources),) + ids.shape + (net.width,))))
    got = decoded(net, out)
    values = _output_values(model, str(program.label))
    right = total = 0
    for i, row in enumerate(tokens):
        expected = rasp.evaluate(program, row, causal=causal)
        for t, want in enumerate(expected, start=1):
            total += 1
            if net.numerical:
                right += want is not None and abs(float(got[i, t]) - float(want)) <= net.numerical_tolerance
            else:
                right += (None if got[i, t] < 0 else values[int(got[i, t])]) == want
    return right / max(total, 1)


def _output_values(model: CompiledModel, label: str) -> tuple:
    return next(part.encoder.values or () for part in model.output_parts if part.label == label)
