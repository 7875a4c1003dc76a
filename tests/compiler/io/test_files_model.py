"""Model files: bit-exact round trip, dense tensors any safetensors reader sees, permissions
that follow the umask, old files, atomic writes, and a refusal for each kind of damage."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import pathlib
import stat
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from support import example_model

from compiler import ModelFileError, compile_rasp
from compiler.examples import EXAMPLES
from compiler.io.files import FORMAT_VERSION, NORM_FORMAT_VERSION, REUSE_FORMAT_VERSION, load_model, model_bytes, read_model_file, save_model
from compiler.io.serialize import canonical_json, decode_value, encode_value
from compiler.model.config import MODULE_NAME
from compiler.model.encoders import InputEncoder
from compiler.model.weights import head_weights, mlp_weights, position_embedding, token_embedding, unembedding
from rasp import lib, rasp


@pytest.fixture(scope="module")
def frac_prevs(frac_prevs_literal):
    return frac_prevs_literal  # two layers, so one can be cut off


@pytest.fixture(scope="module")
def models(frac_prevs, sort_unique_model):
    tuples = lib.make_nary_sequencemap(lambda a, b: a + b, rasp.tokens, rasp.indices)
    return {
        "frac_prevs": frac_prevs,  # numerical output, a head-less attention layer, an empty MLP
        "sort_unique": sort_unique_model,  # integer tokens, categorical output
        "nary": compile_rasp(tuples, {1, 2}, 3),  # tuple-valued residual directions
    }


def _all_inputs(model) -> np.ndarray:
    encoder = model.input_encoder
    n = encoder.max_seq_len
    rows = [[encoder.bos_id, *ids] for ids in itertools.product(range(len(encoder.vocab)), repeat=n)]
    return np.asarray(rows[:256], dtype=np.int32)


@pytest.mark.parametrize("storage", ["dense", "sparse"])
@pytest.mark.parametrize("name", ["frac_prevs", "sort_unique", "nary"])
def test_round_trip_is_bit_exact(models, name, storage, tmp_path) -> None:
    model = models[name]
    path = save_model(model, tmp_path / "model.safetensors", source="# the program\n", storage=storage)
    loaded = load_model(path)
    assert loaded.config == model.config
    assert loaded.input_encoder == model.input_encoder
    assert loaded.output_encoder == model.output_encoder
    assert loaded.residual_space == model.residual_space
    assert loaded.graph is None and loaded.craft_model is None and loaded.program is None
    for module, values in model.params.items():
        for key, value in values.items():
            assert np.asarray(loaded.params[module][key]).tobytes() == np.asarray(value).tobytes()
    ids = _all_inputs(model)
    ours, theirs = model.run(ids), loaded.run(ids)
    for a, b in zip(
        [ours.output, *ours.residuals, *ours.attention], [theirs.output, *theirs.residuals, *theirs.attention]
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.asarray(ours.output).tobytes() == np.asarray(theirs.output).tobytes()
    # Saving the loaded model again gives the same bytes: the format is deterministic.
    record = read_model_file(path)
    assert record.storage == storage
    assert model_bytes(loaded, record.source, record.program_label, record.storage) == path.read_bytes()


def test_file_keeps_source_label_and_hash(frac_prevs, tmp_path) -> None:
    path = save_model(frac_prevs, tmp_path / "m.safetensors", source="make_frac_prevs(...)")
    record = read_model_file(path)
    assert record.source == "make_frac_prevs(...)"
    assert record.program_label == "frac_prevs"
    assert record.format_version == FORMAT_VERSION
    assert len(record.content_sha256) == 64
    assert read_model_file(save_model(frac_prevs, tmp_path / "n.safetensors")).source is None


@pytest.mark.parametrize(
    "value", ["a", "", 0, -7, 10**30, 0.1, -0.0, float("inf"), True, False, None, (1, ("x", 2.5)), frozenset({1, "b"})]
)
def test_tagged_values_round_trip_with_their_types(value) -> None:
    decoded = decode_value(json.loads(canonical_json(encode_value(value))))
    assert decoded == value and type(decoded) is type(value)
    if isinstance(value, float):
        assert decoded.hex() == value.hex()


def test_unstorable_token_is_refused_at_save(frac_prevs, tmp_path) -> None:
    encoder = dataclasses.replace(frac_prevs.input_encoder, vocab=(object(),))
    model = dataclasses.replace(frac_prevs, input_encoder=encoder)
    with pytest.raises(ModelFileError, match="cannot store the value"):
        save_model(model, tmp_path / "m.safetensors")
    assert list(tmp_path.iterdir()) == []
    assert isinstance(frac_prevs.input_encoder, InputEncoder)


def test_write_is_atomic(frac_prevs, tmp_path, monkeypatch) -> None:
    path = save_model(frac_prevs, tmp_path / "m.safetensors")
    before = path.read_bytes()

    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        save_model(example_model("length"), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]


# -- refusals -----------------------------------------------------------------------------------


def _split(data: bytes) -> tuple[dict, bytes]:
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + size]), data[8 + size :]


def _join(header: dict, body: bytes) -> bytes:
    text = json.dumps(header).encode("utf-8")
    return struct.pack("<Q", len(text)) + text + body


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture()
def saved(frac_prevs, tmp_path) -> bytes:
    return model_bytes(frac_prevs, "source")


def _refusal(data: bytes, tmp_path) -> str:
    path = tmp_path / "damaged.safetensors"
    path.write_bytes(data)
    with pytest.raises(ModelFileError) as info:
        load_model(path)
    return str(info.value)


@pytest.mark.parametrize("keep", [0, 5, 60, -1, -40])
def test_truncated_file_is_refused(saved, keep, tmp_path) -> None:
    cut = saved[:keep] if keep >= 0 else saved[:keep]
    assert "truncated" in _refusal(cut, tmp_path)


def test_corrupted_weights_are_refused(saved, tmp_path) -> None:
    damaged = bytearray(saved)
    damaged[-3] ^= 0x40
    assert "corrupted: the weight data does not match its hash" in _refusal(bytes(damaged), tmp_path)


def test_corrupted_header_and_trailing_bytes_are_refused(saved, tmp_path) -> None:
    damaged = bytearray(saved)
    damaged[9] = ord("#")  # inside the JSON header
    assert "corrupted: the header is not valid JSON" in _refusal(bytes(damaged), tmp_path)
    assert "corrupted" in _refusal(saved + b"\0\0\0\0", tmp_path)


def test_other_format_version_is_refused(saved, tmp_path) -> None:
    header, body = _split(saved)
    header["__metadata__"]["format_version"] = str(NORM_FORMAT_VERSION + 1)
    message = _refusal(_join(header, body), tmp_path)
    assert "format version mismatch" in message
    assert f"versions 1, {FORMAT_VERSION}, {REUSE_FORMAT_VERSION} and {NORM_FORMAT_VERSION}" in message


def test_a_norm_models_version_must_say_it_has_a_norm(tmp_path) -> None:
    """A model with a norm is written as version 4; read as an older version (which would run it
    without its norms) it is refused, as is a version 4 file without a norm."""
    model = compile_rasp(lib.make_length(), {1, 2}, 3, norm="layernorm")
    data = model_bytes(model)
    header, body = _split(data)
    assert header["__metadata__"]["format_version"] == str(NORM_FORMAT_VERSION)
    header["__metadata__"]["format_version"] = str(FORMAT_VERSION)
    assert "has a norm" in _refusal(_join(header, body), tmp_path)
    plain_header, plain_body = _split(model_bytes(compile_rasp(lib.make_length(), {1, 2}, 3)))
    plain_header["__metadata__"]["format_version"] = str(NORM_FORMAT_VERSION)
    assert "lacks a norm" in _refusal(_join(plain_header, plain_body), tmp_path)


def test_hand_edited_description_is_refused(saved, tmp_path) -> None:
    header, body = _split(saved)
    meta = header["__metadata__"]
    meta["model"] = meta["model"].replace('"frac_prevs"', '"frac_next"')
    assert "edited: the model description (JSON) does not match its hash" in _refusal(_join(header, body), tmp_path)
    # An editor who also fixes the description's own hash is still caught by the content hash.
    meta["model_sha256"] = _sha(meta["model"])
    assert "edited: the content hash" in _refusal(_join(header, body), tmp_path)


def test_consistent_but_wrong_description_is_refused(saved, tmp_path) -> None:
    header, body = _split(saved)
    meta = header["__metadata__"]
    description = json.loads(meta["model"])
    description["config"]["layers"] = description["config"]["layers"][:2]
    meta["model"] = canonical_json(description)
    meta["model_sha256"] = _sha(meta["model"])
    digest = hashlib.sha256(meta["model"].encode() + b"\0" + meta["weights_sha256"].encode())
    meta["content_sha256"] = digest.hexdigest()
    assert "inconsistent: weights missing" in _refusal(_join(header, body), tmp_path)


def test_foreign_and_missing_files_are_refused(tmp_path) -> None:
    import safetensors.numpy

    plain = safetensors.numpy.save({"w": np.zeros(3, np.float32)})
    assert "not a tracr-compile model file" in _refusal(plain, tmp_path)
    assert "not a tracr-compile model file" in _refusal(b"x" * 100, tmp_path)
    with pytest.raises(ModelFileError, match="cannot read"):
        load_model(tmp_path / "absent.safetensors")


# -- what other tools see -----------------------------------------------------------------------

# Runs in a fresh interpreter without `site` (so no editable-install hooks) whose path holds only
# the folders of numpy and safetensors: the project cannot be imported there.
_PLAIN_READER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import safetensors.numpy
    from safetensors import safe_open

    for name in ("compiler", "rasp", "craft"):
        try:
            __import__(name)
        except ImportError:
            pass
        else:
            raise SystemExit(f"the project is importable ({name}); the check would be meaningless")
    path, out = sys.argv[1], sys.argv[2]
    tensors = safetensors.numpy.load_file(path)
    with safe_open(path, framework="numpy") as handle:
        metadata = handle.metadata()
    np.savez(out, **{name.replace("/", "|"): value for name, value in tensors.items()})
    print(json.dumps({"metadata": metadata, "shapes": {n: list(v.shape) for n, v in tensors.items()}}))
    """
)


def _read_without_project(path, tmp_path) -> tuple[dict, dict[str, np.ndarray]]:
    out = tmp_path / "plain.npz"
    import safetensors

    folders = {str(pathlib.Path(module.__file__).resolve().parents[1]) for module in (np, safetensors)}
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(sorted(folders))
    done = subprocess.run(
        [sys.executable, "-S", "-c", _PLAIN_READER, str(path), str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    if "the project is importable" in done.stderr + done.stdout:
        pytest.skip("the project is installed into this interpreter; cannot hide it")
    assert done.returncode == 0, done.stderr
    with np.load(out) as arrays:
        tensors = {name.replace("|", "/"): arrays[name] for name in arrays.files}
    return json.loads(done.stdout), tensors


@pytest.mark.parametrize("name", ["frac_prevs", "sort_unique"])
def test_plain_safetensors_sees_dense_weight_matrices(models, name, tmp_path) -> None:
    model = models[name]
    path = save_model(model, tmp_path / "m.safetensors")
    seen, tensors = _read_without_project(path, tmp_path)
    assert seen["metadata"]["format_version"] == str(FORMAT_VERSION)
    assert json.loads(seen["metadata"]["model"])["config"]["residual_labels"] == list(model.residual_labels)
    prefix = f"{MODULE_NAME}/"
    expected = {
        f"{prefix}embed/token": token_embedding(model),
        f"{prefix}embed/position": position_embedding(model),
        f"{prefix}unembed/w_u": unembedding(model),
    }
    for index, layer in enumerate(model.config.layers):
        if hasattr(layer, "heads"):
            for h in range(len(layer.heads)):
                weights = head_weights(model, index, h)
                for part in ("q", "k", "v", "o"):
                    expected[f"{prefix}layer_{index}/head_{h}_{part}"] = getattr(weights, f"w_{part}")
        else:
            weights = mlp_weights(model, index)
            expected[f"{prefix}layer_{index}/w_in"] = weights.w_in
            expected[f"{prefix}layer_{index}/w_out"] = weights.w_out
    assert sorted(tensors) == sorted(expected)
    # Every file tensor is the model's parameter: the dense matrix over the coordinates it
    # connects, and restricted to the parameter's own rows/columns it is the parameter itself.
    for tensor_name, matrix in tensors.items():
        np.testing.assert_array_equal(matrix, expected[tensor_name])
        module, key = tensor_name.rsplit("/", 1)
        spec_param = np.asarray(model.params[module][key])
        assert np.count_nonzero(matrix) == np.count_nonzero(spec_param)
    width = model.config.residual_width
    assert tensors[f"{prefix}unembed/w_u"].shape[0] == width


def test_sparse_storage_is_the_explicit_option(models, tmp_path) -> None:
    model = models["sort_unique"]
    dense = save_model(model, tmp_path / "dense.safetensors")
    sparse = save_model(model, tmp_path / "sparse.safetensors", storage="sparse")
    _, tensors = _read_without_project(sparse, tmp_path)
    for tensor_name, value in tensors.items():
        module, key = tensor_name.rsplit("/", 1)
        np.testing.assert_array_equal(value, np.asarray(model.params[module][key]))
    assert sparse.stat().st_size < dense.stat().st_size
    with pytest.raises(ValueError, match="storage must be one of"):
        save_model(model, tmp_path / "x.safetensors", storage="compressed")


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_file_mode_follows_the_umask(frac_prevs, umask, tmp_path) -> None:
    previous = os.umask(umask)
    try:
        path = save_model(frac_prevs, tmp_path / f"m{umask:o}.safetensors")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_format_1_files_still_load(frac_prevs) -> None:
    """`data/frac_prevs_format1.safetensors` was written by the version-1 writer (parameters as
    stored, names without the module prefix)."""
    path = pathlib.Path(__file__).parent / "data" / "frac_prevs_format1.safetensors"
    record = read_model_file(path)
    assert record.format_version == 1 and record.storage == "sparse"
    assert record.source == "lib.make_frac_prevs(...)"
    ids = _all_inputs(frac_prevs)
    np.testing.assert_array_equal(np.asarray(record.model.run(ids).output), np.asarray(frac_prevs.run(ids).output))


def test_dense_matrix_edited_outside_its_coordinates_is_refused(saved, tmp_path) -> None:
    header, body = _split(saved)
    name = f"{MODULE_NAME}/unembed/w_u"
    start, end = header[name]["data_offsets"]
    matrix = np.frombuffer(body[start:end], dtype="<f4").reshape(header[name]["shape"]).copy()
    zero = tuple(np.argwhere(matrix == 0)[0])
    matrix[zero] = 1.0
    body = body[:start] + matrix.tobytes() + body[end:]
    tensors = {}
    for key, entry in header.items():
        if key != "__metadata__":
            a, b = entry["data_offsets"]
            tensors[key] = np.frombuffer(body[a:b], dtype="<f4").reshape(entry["shape"])
    meta = header["__metadata__"]
    from compiler.io.files import _content_hash, _weights_hash

    meta["weights_sha256"] = _weights_hash(tensors)
    meta["content_sha256"] = _content_hash(meta["model"], meta["weights_sha256"])
    assert "has non-zero entries outside the coordinates" in _refusal(_join(header, body), tmp_path)


def test_numerical_error_bound_travels_with_the_file(tmp_path) -> None:
    is_x = rasp.numerical(rasp.Map(lambda t: t == "x", rasp.tokens))
    curve = rasp.numerical(rasp.Map(lambda f: 3 * f * f - 1.5, lib.make_frac_prevs(is_x))).named("curve")
    model = compile_rasp(curve, {"x", "a"}, 8)
    assert model.numerical_map_errors["curve"][1] == model.numerical_error_bound
    assert 0 < model.numerical_error_bound <= 1e-4
    path = tmp_path / "curve.safetensors"
    save_model(model, path)
    loaded = load_model(path)
    assert loaded.numerical_error_bound == model.numerical_error_bound
    assert loaded.numerical_map_errors == model.numerical_map_errors


@pytest.fixture(scope="module")
def reused_reverse():
    example = EXAMPLES["reverse"]
    vocab = example.scaled_vocab(6)
    return compile_rasp(example.build(6), vocab, 6, reuse_residual=True)


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_a_model_with_residual_reuse_round_trips_with_its_slot_owners(reused_reverse, storage, tmp_path) -> None:
    model = reused_reverse
    record = model.residual_reuse
    assert any(len(owners) > 1 for owners in record.owners)  # slots really are shared
    path = save_model(model, tmp_path / "reused.safetensors", storage=storage)
    assert read_model_file(path).format_version == REUSE_FORMAT_VERSION
    loaded = load_model(path)
    assert loaded.residual_reuse == record
    assert loaded.config == model.config and loaded.residual_space == model.residual_space
    assert loaded.residual_labels == model.residual_labels
    ids = model.input_encoder.encode_batch([["BOS", *xs] for xs in (["t0", "t1", "t2"], ["t5", "t0", "t0", "t1", "t2", "t3"])])
    ours, theirs = model.run(ids), loaded.run(ids)
    for a, b in zip([ours.output, *ours.residuals], [theirs.output, *theirs.residuals]):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert loaded.apply_batch([["BOS", "t0", "t1", "t2"]]) == [["BOS", "t2", "t1", "t0"]]
    for slot in range(len(record.owners)):
        assert loaded.residual_reuse.owner_at(slot, 0) == record.owner_at(slot, 0)
    # Deterministic, like every other file: the loaded model saves to the same bytes.
    assert model_bytes(loaded, None, read_model_file(path).program_label, storage) == path.read_bytes()


def test_models_without_reuse_are_still_written_as_version_2(frac_prevs, tmp_path) -> None:
    assert read_model_file(save_model(frac_prevs, tmp_path / "plain.safetensors")).format_version == FORMAT_VERSION == 2


def _rehashed(header: dict, body: bytes, description: dict) -> bytes:
    meta = header["__metadata__"]
    meta["model"] = canonical_json(description)
    meta["model_sha256"] = _sha(meta["model"])
    meta["content_sha256"] = hashlib.sha256(meta["model"].encode() + b"\0" + meta["weights_sha256"].encode()).hexdigest()
    return _join(header, body)


def test_slot_owners_that_do_not_fit_the_labels_are_refused(reused_reverse, tmp_path) -> None:
    header, body = _split(model_bytes(reused_reverse))
    description = json.loads(header["__metadata__"]["model"])
    shared = next(i for i, owners in enumerate(description["residual_reuse"]["owners"]) if len(owners) > 1)
    description["residual_reuse"]["owners"][shared] = description["residual_reuse"]["owners"][shared][:1]
    assert "inconsistent: the residual basis does not match the residual labels" in _refusal(
        _rehashed(header, body, description), tmp_path
    )
    # A version 3 file must say who owns the slots; a version 2 file cannot.
    del description["residual_reuse"]
    assert "lacks residual_reuse" in _refusal(_rehashed(header, body, description), tmp_path)
