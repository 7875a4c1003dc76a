"""Model files: bit-exact round trip, atomic writes, and a refusal for each kind of damage."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import struct

import numpy as np
import pytest
from cli_helpers import example_model

from compiler import ModelFileError, compile_rasp
from compiler.encoders import InputEncoder
from compiler.files import FORMAT_VERSION, load_model, model_bytes, read_model_file, save_model
from compiler.serialize import canonical_json, decode_value, encode_value
from rasp import lib, rasp


@pytest.fixture(scope="module")
def frac_prevs():
    return example_model("frac_prevs", optimize=False)  # two layers, so one can be cut off


@pytest.fixture(scope="module")
def models(frac_prevs):
    tuples = lib.make_nary_sequencemap(lambda a, b: a + b, rasp.tokens, rasp.indices)
    return {
        "frac_prevs": frac_prevs,  # numerical output, a head-less attention layer, an empty MLP
        "sort_unique": example_model("sort_unique"),  # integer tokens, categorical output
        "nary": compile_rasp(tuples, {1, 2}, 3),  # tuple-valued residual directions
    }


def _all_inputs(model) -> np.ndarray:
    encoder = model.input_encoder
    n = encoder.max_seq_len
    rows = [[encoder.bos_id, *ids] for ids in itertools.product(range(len(encoder.vocab)), repeat=n)]
    return np.asarray(rows[:256], dtype=np.int32)


@pytest.mark.parametrize("name", ["frac_prevs", "sort_unique", "nary"])
def test_round_trip_is_bit_exact(models, name, tmp_path) -> None:
    model = models[name]
    path = save_model(model, tmp_path / "model.safetensors", source="# the program\n")
    loaded = load_model(path)
    assert loaded.config == model.config
    assert loaded.input_encoder == model.input_encoder
    assert loaded.output_encoder == model.output_encoder
    assert loaded.residual_space == model.residual_space
    assert loaded.graph is None and loaded.craft_model is None and loaded.program is None
    ids = _all_inputs(model)
    ours, theirs = model.run(ids), loaded.run(ids)
    for a, b in zip(
        [ours.output, *ours.residuals, *ours.attention], [theirs.output, *theirs.residuals, *theirs.attention]
    ):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert np.asarray(ours.output).tobytes() == np.asarray(theirs.output).tobytes()
    # Saving the loaded model again gives the same bytes: the format is deterministic.
    record = read_model_file(path)
    assert model_bytes(loaded, record.source, record.program_label) == path.read_bytes()


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
    header["__metadata__"]["format_version"] = str(FORMAT_VERSION + 1)
    message = _refusal(_join(header, body), tmp_path)
    assert "format version mismatch" in message and f"version {FORMAT_VERSION}" in message


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
