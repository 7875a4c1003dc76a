"""Model zoos: records rebuild their programs and weights, runs are deterministic and resumable,
failures are recorded, Hugging Face `datasets` reads the shards, the loader batches them."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from support import ZOO_PROGRAM_34 as PROGRAM_34

pq = pytest.importorskip("pyarrow.parquet", reason="the zoo extra (pyarrow) is not installed")

from compiler.lab.zoo import engines
from compiler.lab.zoo import weights as zoo_weights
from compiler.lab.zoo.audit import audit_folder, audit_record
from compiler.lab.zoo.config import ZooConfig
from compiler.lab.zoo.generate import generate_zoo
from compiler.lab.zoo.loader import BatchShape, iterate_batches
from compiler.lab.zoo.records import MEMORY, OK, TIMEOUT, program_records, run_weights
from compiler.lab.zoo.sampling import draw, rebuild
from compiler.lab.zoo.shards import ZooFolderError, shard_path
from compiler.lab.zoo.variants import compile_variants
from compiler.model.agree import same_value
from compiler.model.dense import dense_tensors
from rasp import rasp

REPO = pathlib.Path(__file__).resolve().parents[3]
# Library programs included, numbers and letters, several shards.
# Lengths up to 4 keep each compressed record's exhaustive check (every input) small.
TINY = ZooConfig(programs=8, seed=3, shard_size=3, library_share=0.3, sizes=(2, 8), inputs=6, max_seq_lens=(3, 4))


def files(folder: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def records(folder: pathlib.Path) -> list[dict]:
    return [row for path in sorted((folder / "data").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


@pytest.fixture(scope="session")
def tiny_zoo(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("zoo") / "tiny"
    summary = generate_zoo(out, TINY, jobs=1, progress=False)
    assert summary.shards_written == TINY.shards == 3 and summary.programs == TINY.programs
    return out


def test_records_cover_every_program_and_variant(tiny_zoo):
    rows = records(tiny_zoo)
    assert [(r["index"], r["variant"]) for r in rows] == [(i, v) for i in range(TINY.programs) for v in TINY.variants]
    ok = [r for r in rows if r["status"] == OK]
    assert len(ok) >= 12  # most random programs compile
    assert {r["origin"].split(":")[0] for r in rows} == {"random", "library"}
    for row in ok:
        assert row["residual_labels"] and row["layers"] >= 1 and len(row["weights_sha256"]) == 64
        labels = {sop["label"] for sop in row["sops"]}
        assert row["program_label"] in labels and {"tokens"} <= labels | {"indices"}
        assert any(edge["dst"] == "unembed.in" for edge in row["circuit"])  # the output's circuit
        graph = json.loads(row["graph"])
        assert graph["sink"] in {node["label"] for node in graph["nodes"]}
    for row in rows:
        assert (row["status"] == OK) == (row["weights"] is not None)
        assert row["status"] == OK or row["error"]


def test_round_trip_rebuilds_outputs_and_weights(tiny_zoo):
    """Rebuilt programs evaluate to the stored outputs; recompiling gives the stored bytes; the
    stored weights themselves compute the stored outputs."""
    rows = [r for r in records(tiny_zoo) if r["status"] == OK]
    by_program: dict[int, list[dict]] = {}
    for row in rows:
        by_program.setdefault(row["index"], []).append(row)
    for index, group in by_program.items():
        first = group[0]
        program = rebuild(first["source"])
        inputs, outputs = json.loads(first["inputs"]), json.loads(first["outputs"])
        assert inputs
        for xs, want in zip(inputs, outputs):
            got = rasp.evaluate(program, xs, causal=first["causal"])
            assert all(same_value(g, w) for g, w in zip(got, want)), (index, xs)
        vocab = tuple(json.loads(first["vocab"]))
        built = compile_variants(program, vocab, first["max_seq_len"], tuple(r["variant"] for r in group))
        for row in group:
            variant = built[row["variant"]]
            again = zoo_weights.to_bytes(variant.tensors, zoo_weights.forward_metadata(variant.model))
            assert again == row["weights"], (index, row["variant"])
            if row["variant"] != "compressed":
                got = run_weights(variant, row["weights"], inputs)
                assert all(same_value(g, w) for a, b in zip(got, outputs) for g, w in zip(a, b))


def test_compressed_weights_are_the_projected_model(tiny_zoo):
    """The folded d-dimensional weights compute what the compiled model computes with W."""
    row = next(r for r in records(tiny_zoo) if r["variant"] == "compressed" and r["status"] == OK)
    tensors, metadata = zoo_weights.from_bytes(row["weights"])
    w = tensors[zoo_weights.PROJECTION]
    assert w.shape == (row["residual_dim"], row["d_model"])
    info = json.loads(row["compression"])
    assert info["d"] == row["d_model"] and isinstance(info["exact_on_inputs"], bool)
    model = compile_variants(rebuild(row["source"]), tuple(json.loads(row["vocab"])), row["max_seq_len"],
                             ("optimised",))["optimised"].model
    encoder = model.input_encoder
    ids = encoder.encode_batch([[encoder.bos, *xs] for xs in json.loads(row["inputs"])])
    expected = np.asarray(model.forward(model.params, ids, projection=w).output)
    np.testing.assert_allclose(zoo_weights.forward(tensors, metadata, ids), expected, atol=1e-3)


def test_the_audit_command_passes_the_tiny_zoo(tiny_zoo, capsys):
    from compiler.cli import main

    assert main(["zoo", "audit", str(tiny_zoo), "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] and report["failures"] == [] and report["checked"] >= 12
    assert sum(report["records"].values()) == TINY.programs * len(TINY.variants)


def test_same_seed_same_bytes(tiny_zoo, tmp_path):
    summary = generate_zoo(tmp_path / "again", TINY, jobs=1, progress=False)
    assert summary.shards_written == TINY.shards
    assert files(tmp_path / "again") == files(tiny_zoo)
    other = generate_zoo(tmp_path / "other", ZooConfig(**{**TINY.__dict__, "seed": 4, "programs": 3}), jobs=1,
                         progress=False)
    assert other.shards_written == 1
    assert files(tmp_path / "other")["data/train-00000-of-00001.parquet"] != files(tiny_zoo)["data/train-00000-of-00003.parquet"]


def test_killed_run_resumes_to_the_same_dataset(tmp_path):
    """`tracr-compile zoo` killed once its first shard is out, then resumed: the files equal those
    of one uninterrupted run. (One process: worker pools cost seconds to start; they are compared
    with this run in the slow Ray test.)"""
    config = ZooConfig(programs=18, seed=5, shard_size=3, variants=("optimised",), library_share=0.0, inputs=4)
    whole = tmp_path / "whole"
    generate_zoo(whole, config, jobs=1, progress=False)
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "compiler.cli", "zoo", "generate", str(out), "-n", "18", "--seed", "5", "--shard-size", "3",
               "--variants", "optimised", "--library-share", "0", "--inputs", "4", "--jobs", "1", "--quiet"]
    process = subprocess.Popen(command, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    first = shard_path(out, config, 0)
    deadline = time.monotonic() + 120
    try:
        while not first.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the run (and any process it started)
        process.wait()
    written = sorted(p.name for p in (out / "data").glob("train-*.parquet"))
    assert 1 <= len(written) < config.shards, "the run should be killed part way"
    for name in written:  # every visible shard is whole
        assert pq.read_table(out / "data" / name).num_rows == 3
    summary = generate_zoo(out, config, jobs=1, progress=False)
    assert summary.shards_kept == len(written) and summary.shards_written == config.shards - len(written)
    assert files(out) == files(whole)  # a shard half-written when killed left no trace


def test_a_different_config_cannot_resume_a_folder(tiny_zoo):
    with pytest.raises(ZooFolderError, match="other settings"):
        generate_zoo(tiny_zoo, ZooConfig(**{**TINY.__dict__, "seed": 9}), jobs=1, progress=False)


def test_timeouts_and_memory_are_recorded_not_raised(monkeypatch):
    config = ZooConfig(programs=1, timeout_s=1e-4, variants=("optimised", "compressed"))
    rows = engines.program_task(config, 0)
    assert [(r["variant"], r["status"]) for r in rows] == [("optimised", TIMEOUT), ("compressed", TIMEOUT)]
    assert rows[0]["source"] == draw(config, 0).source

    def greedy(config, index):
        return [np.ones(2**40, np.uint8)]  # a terabyte: beyond any address-space limit

    monkeypatch.setattr(engines, "program_records", greedy)
    rows = engines.program_task(ZooConfig(programs=1, memory_mb=512), 0)
    assert {r["status"] for r in rows} == {MEMORY}


def test_a_timeout_inside_a_variant_is_a_timeout(monkeypatch):
    """The alarm can fire inside the per-variant error handling (found by the 10,000-program run:
    such timeouts were recorded as `error`); the program's rows still say `timeout`."""
    from compiler.lab.zoo import records as zoo_records

    def slow(*args, **kwargs):
        raise engines.ProgramTimeout("the program took longer than 1 s")

    monkeypatch.setattr(zoo_records, "circuit", slow)
    rows = engines.program_task(ZooConfig(programs=1, variants=("optimised",), library_share=0.0), 0)
    assert [r["status"] for r in rows] == [TIMEOUT]


def test_config_errors_name_the_setting():
    with pytest.raises(ValueError, match="unknown operation"):
        ZooConfig(operations=("map", "loop"))
    with pytest.raises(ValueError, match="sizes"):
        ZooConfig(sizes=(5, 2))
    with pytest.raises(ValueError, match="variants"):
        ZooConfig(variants=("optimised", "optimised"))
    with pytest.raises(ValueError, match="gd_steps"):
        ZooConfig(variants=("gd",), gd_steps=0)
    with pytest.raises(ValueError, match="engine"):
        generate_zoo("unused", TINY, engine="spark")
    with pytest.raises(ValueError, match="unknown library program.*parity_loop"):
        ZooConfig(library=("parity_lop",))


def test_knobs_shape_the_programs():
    numeric = ZooConfig(programs=12, numerical=1.0, vocab_kind="ints", library_share=0.0, operations=("map", "aggregate"))
    letters = ZooConfig(programs=12, numerical=0.0, vocab_kind="letters", library_share=0.0, max_seq_lens=(4, 4))
    drawn = [draw(numeric, i) for i in range(12)]
    assert all(isinstance(t, int) for d in drawn for t in d.vocab)
    assert all("numerical" in d.source for d in drawn)
    # Only Maps and Aggregates are drawn (joins of unused s-ops may add SequenceMaps).
    assert not any("SelectorWidth" in d.source or "lib." in d.source or "Full(" in d.source for d in drawn)
    plain = [draw(letters, i) for i in range(12)]
    assert all(d.max_seq_len == 4 and isinstance(d.vocab[0], str) for d in plain)
    deep = ZooConfig(depths=(6, 64), sizes=(8, 12), library_share=0.0)
    assert all(draw(deep, i).depth >= 6 for i in range(5))


def test_hugging_face_datasets_reads_the_shards(tiny_zoo, tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("parquet", data_dir=str(tiny_zoo / "data"), split="train", cache_dir=str(tmp_path))
    rows = records(tiny_zoo)
    assert ds.num_rows == len(rows)
    assert ds["weights_sha256"] == [r["weights_sha256"] for r in rows]
    first = next(i for i, r in enumerate(rows) if r["status"] == OK)
    assert ds[first]["sops"] == rows[first]["sops"]
    assert ds[first]["weights"] == rows[first]["weights"]


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_loader_batches(tiny_zoo, framework):
    if framework == "torch":
        pytest.importorskip("torch")
    shape = BatchShape(chunk=32, max_chunks=2048, max_source=1024)
    batches = list(iterate_batches(tiny_zoo, 4, variants=("optimised", "compressed"), shape=shape, framework=framework))
    ok = [r for r in records(tiny_zoo) if r["status"] == OK and r["variant"] in ("optimised", "compressed")]
    assert sum(len(b["index"]) for b in batches) == len(ok)
    first = {name: np.asarray(value) for name, value in batches[0].items()}
    assert first["weights"].shape == (4, 2048, 32) and first["source"].shape == (4, 1024)
    row = ok[0]
    tensors, _ = zoo_weights.from_bytes(row["weights"])
    flat = np.concatenate([tensors[n].ravel() for n in sorted(tensors) if n != zoo_weights.PROJECTION])
    assert not first["truncated"][0]
    np.testing.assert_array_equal(first["weights"][0].ravel()[: flat.size], flat)
    assert first["weights_mask"][0].sum() == -(-flat.size // 32)
    text = bytes(first["source"][0][first["source_mask"][0]].astype(np.uint8)).decode()
    assert text == row["source"]


def test_audit_passes_the_files_and_catches_tampering(tiny_zoo):
    """The audit re-checks every published record from its columns alone, and a record whose
    outputs, weights or hash were changed fails it."""
    report = audit_folder(tiny_zoo, progress=False)
    rows = records(tiny_zoo)
    assert report.passed and report.checked == sum(r["status"] == OK for r in rows)
    row = next(r for r in rows if r["status"] == OK and r["variant"] == "optimised")
    outputs = json.loads(row["outputs"])
    outputs[0][0] = "not an output"
    assert "RASP gives" in audit_record(dict(row, outputs=json.dumps(outputs)))
    tensors, metadata = zoo_weights.from_bytes(row["weights"])
    name = "compiled_transformer/unembed/w_u"
    tensors[name] = -tensors[name] if tensors[name].size else tensors[name]
    bad = zoo_weights.to_bytes(tensors, metadata)
    assert "SHA-256" in audit_record(dict(row, weights=bad))
    if tensors[name].size and not metadata["numerical_output"]:
        assert "the weights give" in audit_record(dict(row, weights=bad, weights_sha256=zoo_weights.sha256(bad)))
    compressed = next(r for r in rows if r["status"] == OK and r["variant"] == "compressed")
    assert audit_record(compressed) is None
    assert "without its compression column" in audit_record(dict(compressed, compression=None))




def test_a_compressed_claim_comes_with_its_check_and_is_audited(monkeypatch):
    """Program 34 of seed 0 (a categorical copy read by attention queries) was stored with
    `claims_exact` true and wrong outputs. Its record now carries the claim with its check: the
    check runs every input (39), finds none wrong, and the bound does not prove exactness (float
    rounding through a score of size 100 into a numerical mean could exceed the output tolerance
    in the worst case), so `claims_exact` is false and the record is `ok`. A record that claims
    exactness with wrong weights fails the audit, and so does one claiming it without a check."""
    from compiler.lab.zoo import records as zoo_records
    from compiler.lab.zoo.sampling import ProgramDraw

    stored = ProgramDraw(34, "random", PROGRAM_34, ("a", "b", "c"), 3, 12, 9)
    monkeypatch.setattr(zoo_records, "draw", lambda config, index: stored)
    (row,) = program_records(ZooConfig(variants=("compressed",)), 34)
    assert row["source"] == PROGRAM_34
    info = json.loads(row["compression"])
    assert row["status"] == OK and info["exact_on_inputs"] and info["status"] == "not claimed"
    assert not info["claims_exact"] and not info["bound_claims_exact"]
    assert info["check"]["kind"] == "exhaustive" and info["check"]["inputs"] == 39 and info["check"]["wrong"] == 0
    assert info["d"] < info["residual_dim"] and audit_record(row) is None
    claimed = {**info, "claims_exact": True, "bound_claims_exact": True, "status": "exact"}
    tensors, metadata = zoo_weights.from_bytes(row["weights"])
    name = "compiled_transformer/unembed/w_u"
    tensors[name] = 2 * tensors[name]  # every output value doubled
    bad = zoo_weights.to_bytes(tensors, metadata)
    wrong = dict(row, weights=bad, weights_sha256=zoo_weights.sha256(bad),
                 compression=json.dumps({**claimed, "exact_on_inputs": False}))
    assert "compression.claims_exact (the interference bound and its check) is true" in audit_record(wrong)
    unchecked = dict(row, compression=json.dumps({**claimed, "check": {**info["check"], "wrong": 3}}))
    assert "without the bound's proof and a check" in audit_record(unchecked)


def test_a_claim_the_check_refutes_is_never_ok(monkeypatch):
    """A compressed record whose bound claims exactness while its check finds a wrong input gets
    the status `wrong_claim`, no weights, and the check in its `compression` column."""
    from compiler.lab.zoo import records as zoo_records
    from compiler.lab.zoo import variants as zoo_variants
    from compiler.lab.zoo.sampling import ProgramDraw
    from compression.claims import Check, Claim

    stored = ProgramDraw(34, "random", PROGRAM_34, ("a", "b", "c"), 3, 12, 9)
    monkeypatch.setattr(zoo_records, "draw", lambda config, index: stored)
    refuted = Claim(20, 10, True, 0.5, Check("exhaustive", 39, 39, 2))
    monkeypatch.setattr("compression.claims.claim_exactness", lambda *args, **kwargs: refuted)
    (row,) = program_records(ZooConfig(variants=("compressed",)), 34)
    info = json.loads(row["compression"])
    assert row["status"] == zoo_records.WRONG_CLAIM and row["weights"] is None
    assert info["status"] == "wrong claim" and not info["claims_exact"] and info["check"]["wrong"] == 2
    assert "wrong on 2 of all 39 inputs" in row["error"] and audit_record(row) is None
    assert zoo_variants  # the variant module reads claim_exactness at call time


def test_loop_programs_are_stored_untied_with_their_tying():
    """A `rasp.Loop` program (drawn only when named) is stored one layer copy per iteration;
    the metadata says which stored layers are copies, and they hold the same weights."""
    assert "parity_loop" not in ZooConfig().library
    config = ZooConfig(programs=2, library_share=1.0, library=("parity_loop",), variants=("unoptimised", "optimised"),
                       max_seq_lens=(3, 4), inputs=4)
    rows = [row for i in range(2) for row in engines.program_task(config, i)]
    assert [r["status"] for r in rows] == [OK] * 4
    for row in rows:
        tensors, metadata = zoo_weights.from_bytes(row["weights"])
        loop = metadata["loop"]
        assert loop["repeats"] == row["max_seq_len"] - 1 == len(loop["stored_layers"])
        first, stop = loop["stored_layers"][0]
        assert row["layers"] == first + loop["repeats"] * (stop - first) + (row["layers"] - loop["stored_layers"][-1][1])
        for copy_first, _ in loop["stored_layers"][1:]:
            for name, value in tensors.items():
                if f"/layer_{2 * first}/" in name or f"/layer_{2 * first + 1}/" in name:
                    twin = name.replace(f"/layer_{2 * first}/", f"/layer_{2 * copy_first}/").replace(
                        f"/layer_{2 * first + 1}/", f"/layer_{2 * copy_first + 1}/")
                    np.testing.assert_array_equal(tensors[twin], value)
        assert audit_record(row) is None


def test_an_output_that_is_always_none_has_dense_weights(tmp_path):
    """Its unembedding has no columns (found by a zoo run: dense matrices of empty index lists
    failed), yet it saves, loads and decodes to None everywhere."""
    from compiler import compile_rasp, load_model, save_model

    first = rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.EQ)
    never = rasp.Aggregate(first & rasp.Select(rasp.indices, rasp.indices, rasp.Comparison.LT), rasp.indices)
    program = rasp.SequenceMap(lambda x, y: x - y, never, rasp.tokens)
    model = compile_rasp(program, {0, 1, 2}, 3)
    tensors = dense_tensors(model)
    assert tensors["compiled_transformer/unembed/w_u"].shape == (model.config.residual_width, 0)
    loaded = load_model(save_model(model, tmp_path / "none.safetensors"))
    assert loaded.apply(["BOS", 1, 2]).decoded == ["BOS", None, None]


@pytest.mark.slow
def test_ray_engine_and_local_workers_give_the_same_shards(tiny_zoo, tmp_path):
    """A local Ray instance (real Ray, two CPUs) and two local worker processes write the bytes
    the in-process run wrote (slow: Ray starts in ~15 s, workers import JAX)."""
    ray = pytest.importorskip("ray")
    try:
        summary = generate_zoo(tmp_path / "ray", TINY, engine="ray", jobs=2, progress=False)
    finally:
        ray.shutdown()
    assert summary.shards_written == TINY.shards
    assert files(tmp_path / "ray") == files(tiny_zoo)
    generate_zoo(tmp_path / "workers", TINY, engine="local", jobs=2, progress=False)
    assert files(tmp_path / "workers") == files(tiny_zoo)


def dies_on_program_two(config: ZooConfig, index: int) -> list[dict]:
    """A task whose worker process dies on program 2 (as under the system's OOM killer)."""
    if index == 2:
        os._exit(9)
    return engines.program_task(config, index)


@pytest.mark.slow
def test_a_dead_worker_is_recorded_and_the_run_goes_on():
    """Slow: three worker pools start (the pool, then one per program it held)."""
    config = ZooConfig(programs=4, variants=("optimised",), library_share=0.0)
    results = list(engines.local_results(config, range(4), jobs=2, task=dies_on_program_two))
    assert [index for index, _ in results] == [0, 1, 2, 3]
    rows = dict(results)
    assert rows[2][0]["status"] == MEMORY and "died" in rows[2][0]["error"]
    for index in (0, 1, 3):
        assert rows[index] == engines.program_task(config, index)


def test_preparing_a_folder_removes_the_shards_a_killed_run_left_half_written(tmp_path):
    """A shard in progress is an atomic writer's temporary file; a resumed run removes those of
    dead writers on this host (`compiler.atomic.remove_stale_partials`) and keeps a live one's."""
    from compiler.atomic import _host
    from compiler.lab.zoo.shards import DATA, prepare

    config = ZooConfig(programs=2, shard_size=2)
    (tmp_path / DATA).mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / DATA / f".train-00000.parquet.{_host()}-{int(dead.stdout)}-{'0' * 16}.partial.parquet"
    live = tmp_path / DATA / f".train-00000.parquet.{_host()}-{os.getpid()}-{'1' * 16}.partial.parquet"
    stale.write_bytes(b"half")
    live.write_bytes(b"half")
    assert prepare(tmp_path, config) == [0]
    assert not stale.exists() and live.exists()
