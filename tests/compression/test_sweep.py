"""The sweep experiment's quick mode writes its table, curves and plot."""

import csv
import json

import pytest

from compression.experiments import gd_start, sweep


def test_quick_sweep_writes_table_and_plot(tmp_path, capsys):
    assert sweep.main(["--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    assert [r["program"] for r in rows] == ["length"]
    row = rows[0]
    big_d = int(row["D"])
    assert big_d == 11  # length at 3/3: indices 0-2, one, length 0-3, tokens a b c BOS PAD
    packed = int(row["packed_exact"])
    assert int(row["protected"]) < packed <= int(row["packed_claimed"]) < big_d
    assert row["packed_claim_holds"] == "True"
    assert int(row["gd_packed_exact"]) <= packed  # GD from the packed W starts exact there
    # quick: one GD run per start, orthogonal at the packed width, the packed starts one below it
    runs = list(csv.DictReader((tmp_path / "sweep_gd_runs.csv").open()))
    assert [(int(r["d"]), r["init"]) for r in runs] == [
        (packed, "orthogonal"), (packed - 1, "packed"), (packed - 1, "packed_shrink")]
    assert row["gd_tried"] == f"{packed}-{packed}" and row["gd_packed_tried"] == f"{packed - 1}-{packed - 1}"
    assert row["gd_shrink_tried"] == f"{packed - 1}-{packed - 1}" and int(row["gd_shrink_exact"]) <= packed
    for r in runs:
        assert int(r["steps"]) <= sweep.QUICK_STEPS and 0.0 <= float(r["sequence_accuracy"]) <= 1.0
        assert (r["exact"] == "True") == (float(r["sequence_accuracy"]) == 1.0)
    below = runs[1]
    if below["exact"] == "True":  # the scan reports the smallest width reached and its steps
        assert int(row["gd_packed_exact"]) == packed - 1 and float(row["gd_packed_steps"]) == float(below["steps_to_exact"])
    else:  # not reached below: the packed start's own width, exact at step 0
        assert int(row["gd_packed_exact"]) == packed and float(row["gd_packed_steps"]) == 0.0
    curves = list(csv.DictReader((tmp_path / "sweep_curves.csv").open()))
    assert {c["method"] for c in curves} == {"random", "packed", "pca", "gd", "gd_packed", "gd_shrink"}
    assert all(0.0 <= float(c["sequence_accuracy"]) <= 1.0 for c in curves)
    png = (tmp_path / "sweep_accuracy.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    summary = json.loads((tmp_path / "sweep.json").read_text())
    assert summary["rows"][0]["program"] == "length" and summary["gd_recipe"]["steps"] == sweep.QUICK_STEPS
    assert "| length | 3 | 11 |" in capsys.readouterr().out


def test_combine_merges_runs_made_in_parts(tmp_path, capsys):
    """Each cell comes from the first folder that filled it; curves and GD runs are pooled."""
    from compression.experiments.common import write_csv

    base = {"program": "length", "size": 3, "D": 11, "protected": 6, "never_on": 0, "packed_exact": 8}
    parts = {
        "a": ({**base, "gd_exact": 7, "gd_steps": 250.0, "gd_tried": "7-8", "gd_shrink_exact": None},
              [("length 3/3 (D=11)", "gd", 7, 1.0), ("length 3/3 (D=11)", "packed", 8, 1.0)]),
        "b": ({**base, "gd_exact": None, "gd_tried": None, "gd_shrink_exact": 6, "gd_shrink_steps": 500.0},
              [("length 3/3 (D=11)", "gd_shrink", 6, 1.0), ("length 3/3 (D=11)", "packed", 8, 0.5)]),
    }
    for name, (row, curve) in parts.items():
        folder = tmp_path / name
        folder.mkdir()
        write_csv(folder / "sweep.csv", [row])
        write_csv(folder / "sweep_curves.csv",
                  [{"program": p, "method": m, "d": d, "sequence_accuracy": a} for p, m, d, a in curve])
        write_csv(folder / "sweep_gd_runs.csv", [{"program": "length", "size": 3, "d": 7, "init": name,
                                                  "steps_per_s": 100.0}])
    out = tmp_path / "both"
    assert sweep.main(["--combine", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    (row,) = list(csv.DictReader((out / "sweep.csv").open()))
    assert (row["gd_exact"], row["gd_tried"], row["gd_shrink_exact"], row["gd_shrink_steps"]) == ("7", "7-8", "6", "500.0")
    curves = {(c["method"], c["d"]): c["sequence_accuracy"] for c in csv.DictReader((out / "sweep_curves.csv").open())}
    assert curves == {("gd", "7"): "1.0", ("packed", "8"): "1.0", ("gd_shrink", "6"): "1.0"}
    assert [r["init"] for r in csv.DictReader((out / "sweep_gd_runs.csv").open())] == ["a", "b"]
    assert (out / "sweep_accuracy.png").read_bytes().startswith(b"\x89PNG")
    assert "| length | 3 | 11 | 6 | 0 | - | - | - | 8 | 7 | 250 | - | - | 6 | 500 | - |" in capsys.readouterr().out


@pytest.mark.slow
def test_gd_start_quick_writes_its_table_and_picture(tmp_path):
    assert gd_start.main(["--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    assert {p.name for p in tmp_path.iterdir()} >= {"gd_start.csv", "gd_start_runs.csv", "gd_start.png", "gd_start.json"}
    rows = list(csv.DictReader((tmp_path / "gd_start.csv").open()))
    assert {row["init"] for row in rows} == {"orthogonal", "packed"}
    assert all(row["program"] == "shift_by_1" and row["seeds"] == "1" for row in rows)


def test_bad_arguments_are_refused_before_any_compiling(tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown program 'nope'.*parity_loop"):
        sweep.main(["--programs", "length", "nope", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        sweep.main(["--gd-depth", "0", "--out", str(tmp_path)])
    assert "--gd-depth must be >= 1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
