"""The sweep experiment's quick mode writes its table, curves and plot."""

import csv
import json

from compression.experiments import sweep


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
