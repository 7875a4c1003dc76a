"""SelectorWidth: an attention head measuring 1/(w+1), then an MLP decoding w exactly.

Attention. The head always attends to BOS with the same logit as a selected key
(`always_attend_to_bos`), and its W_OV writes the BOS indicator onto a scratch residual direction
`BasisDirection("<hidden_name>_attn")`. At a query with w selected keys the scratch direction holds
a_w = 1 / (w + 1) (up to e^-coldness leakage onto unselected keys).

MLP. For k = 1..N (N = max_seq_len, the most keys a query can select) the threshold
t_k = (a_{k-1} + a_k) / 2 separates "w >= k" (a <= t_k) from "w < k". With the local gap
g_k = a_{k-1} - a_k = 1 / (k (k + 1)) and slope s_k = 2 / g_k, the clipped ramp

    step_k(a) = relu(s_k (t_k - a) + 1/2) - relu(s_k (t_k - a) - 1/2)

is exactly 1 at every a_w with w >= k and exactly 0 at every a_w with w < k, with a margin of
g_k / 4 in `a` on both sides (pre-activations are at distance >= 1/2 from the ramp's kinks). Since the
slopes are local, pre-activations stay O(k) in size and float32 keeps them exact far beyond
N = 64 (tested up to 200). Outputs:
  * numerical: w = sum_k step_k;
  * categorical: the one-hot of w is step_w - step_{w+1} (step_0 is a constant unit, 1 off BOS).
Every hidden unit with a `one` bias gets -(|bias| + max slope + 1) from BOS, so the MLP writes
exactly 0 at BOS whatever the scratch value there.

Cleanup. One more hidden unit `relu(a)` (no bias; a >= 0) writes -a back onto the scratch
direction, so after the MLP the scratch direction is 0 at every position (BOS included): it is
free for no one else, but leaves no trace for later layers. The MLP's output space is therefore
`output_space` plus the scratch direction.
"""

from __future__ import annotations

import numpy as np

from craft.bases import BasisDirection, VectorSpaceWithBasis, join_vector_spaces
from craft.blocks import MLP, AttentionHead
from craft.chamber.categorical_attn import attention_head
from craft.maps import BilinearMap, FactoredBilinearMap, LinearMap


def scratch_direction(hidden_name: str) -> BasisDirection:
    """The residual direction the selector-width head writes 1/(w+1) to."""
    return BasisDirection(f"{hidden_name}_attn")


def _decoder_mlp(
    scratch: BasisDirection,
    output_space: VectorSpaceWithBasis,
    max_seq_len: int,
    bos_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    categorical_output: bool,
    hidden_name: str,
) -> MLP:
    n = max_seq_len
    k = np.arange(1, n + 1, dtype=np.float64)
    a_prev, a_k = 1.0 / k, 1.0 / (k + 1.0)
    thresholds = (a_prev + a_k) / 2
    slopes = 2.0 * k * (k + 1.0)

    hidden = VectorSpaceWithBasis(
        (BasisDirection(hidden_name, "start"), BasisDirection(hidden_name, "clean"))
        + tuple(BasisDirection(hidden_name, (int(i), side)) for i in k for side in (0, 1))
    )
    scratch_space = VectorSpaceWithBasis((scratch,))
    in_space = join_vector_spaces(scratch_space, one_space, bos_space)
    a_row, one_row, bos_row = (in_space.index(d) for d in (scratch, one_space.basis[0], bos_space.basis[0]))

    first = np.zeros((in_space.num_dims, hidden.num_dims))
    first[one_row, 0] = 1.0
    first[a_row, 1] = 1.0
    ramps = slice(2, None)
    first[a_row, ramps] = np.repeat(-slopes, 2)
    first[one_row, ramps] = (slopes * thresholds)[:, None].repeat(2, axis=1).ravel() + np.tile([0.5, -0.5], n)
    # BOS-zero invariant: at BOS the head reads BOS only, so the scratch holds exactly 1, above
    # every threshold (t_k <= 3/4, slope s_k >= 4): each ramp's input is -s_k (1 - t_k) +- 0.5
    # <= -0.5 and the ramps are already 0 there. Only the constant "start" unit needs the BOS
    # term; the cleanup unit has no bias and must stay on at BOS.
    first[bos_row, 0] = -(np.abs(first[one_row, 0]) + 1.0)

    out_space = join_vector_spaces(output_space, scratch_space)
    second = np.zeros((hidden.num_dims, out_space.num_dims))
    second[1, out_space.index(scratch)] = -1.0
    if categorical_output:
        name = output_space.basis[0].name
        # step_w contributes +1 to w and -1 to w-1 (step_0 = the constant unit).
        for w in range(n + 1):
            direction = BasisDirection(name, w)
            if direction not in out_space:
                continue
            col = out_space.index(direction)
            rows = [0] if w == 0 else [2 * w, 2 * w + 1]
            signs = [1.0] if w == 0 else [1.0, -1.0]
            second[rows, col] += signs
            if w < n:
                second[[2 * (w + 1), 2 * (w + 1) + 1], col] -= [1.0, -1.0]
    else:
        if output_space.num_dims != 1:
            raise ValueError("numerical selector width needs a single output direction")
        col = out_space.index(output_space.basis[0])
        second[2::2, col] = 1.0
        second[3::2, col] = -1.0
    return MLP(LinearMap(in_space, hidden, first), LinearMap(hidden, out_space, second))


def selector_width(
    direct_qk: BilinearMap | FactoredBilinearMap,
    n_terms: int,
    output_space: VectorSpaceWithBasis,
    max_seq_len: int,
    bos_space: VectorSpaceWithBasis,
    one_space: VectorSpaceWithBasis,
    categorical_output: bool,
    causal: bool = False,
    coldness: float = 100.0,
    hidden_name: str | None = None,
) -> tuple[AttentionHead, MLP]:
    """(head, mlp) computing the number of selected keys, exact for every width 0..max_seq_len.

    The head must run in a layer before the MLP (residual connection in between); categorical
    widths are written as one-hot directions (output label, w) present in `output_space`.
    """
    if max_seq_len < 0:
        raise ValueError("max_seq_len must be >= 0")
    if hidden_name is None:
        if output_space.num_dims == 0:
            raise ValueError("output space is empty; pass hidden_name explicitly")
        hidden_name = f"{output_space.basis[0].name}_hidden"
    scratch = scratch_direction(hidden_name)
    value_map = LinearMap(bos_space, VectorSpaceWithBasis((scratch,)), np.ones((1, 1)))
    head = attention_head(
        direct_qk, n_terms, value_map, bos_space, one_space,
        causal=causal, always_attend_to_bos=True, coldness=coldness,
    )
    mlp = _decoder_mlp(
        scratch, output_space, max_seq_len, bos_space, one_space, categorical_output, hidden_name
    )
    return head, mlp
