"""Measured tables in docs/ are written from the JSON their command saved, and the quick ones reproduce.

`benchmarks.results` renders every `<!-- result: NAME -->` block from `docs/results/data/NAME.json`;
these tests check its rules on a throw-away docs tree, then run its `--check` on the real one:
every block equal to its JSON, every JSON quoted, every quick result re-run and equal cell for
cell outside its timing columns.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from benchmarks import results
from benchmarks.results import Result, Table, differences, render, static_problems, write_docs


def _result(rows: tuple[tuple[str, ...], ...] = (("reverse", "34", "1.2"),)) -> Result:
    table = Table(("program", "edges", "seconds"), rows, timings=("seconds",), caption="A caption.")
    return Result(table=table, argv=("benchmarks/some.py", "--json", "x.json"), env={"OMP_NUM_THREADS": "1"},
                  commit="abc1234", date="2026-12-03", machine="2 CPUs", wall_seconds=3.0, cpu_seconds=4.0)


def _docs_tree(tmp_path: Path, result: Result) -> Path:
    docs = tmp_path / "docs"
    (docs / "results" / "data").mkdir(parents=True)
    (docs / "results" / "data" / "t.json").write_text(result.to_json(), encoding="utf-8")
    (docs / "page.md").write_text(f"# Page\n\n<!-- result: t -->\n{render(result)}<!-- /result -->\n\nAfter.\n", encoding="utf-8")
    return docs


def test_a_result_renders_its_table_command_and_machine_and_survives_json():
    result = _result()
    assert Result.from_json(result.to_json()) == result
    text = render(result)
    assert text.startswith("A caption.\n\n| program | edges | seconds |\n|---|---|---|\n| reverse | 34 | 1.2 |\n")
    assert "`OMP_NUM_THREADS=1 python benchmarks/some.py --json x.json` at commit abc1234 on 2026-12-03" in text
    assert result.quick and result.table.compared() == [("reverse", "34")]


def test_a_table_refuses_ragged_rows_and_unknown_timing_columns():
    with pytest.raises(ValueError, match="a row has 2 cells for 3 columns"):
        Table(("a", "b", "c"), (("1", "2"),))
    with pytest.raises(ValueError, match=r"timing columns \['s'\] are not columns"):
        Table(("a",), (("1",),), timings=("s",))


def test_differences_ignore_timings_and_name_each_changed_cell():
    recorded = _result().table
    assert differences(recorded, _result((("reverse", "34", "9.9"),)).table) == []
    assert differences(recorded, _result((("reverse", "35", "1.2"),)).table) == ["row 1 (reverse), edges: recorded 34, now 35"]
    assert differences(recorded, _result(()).table) == ["1 rows recorded, 0 rows now"]


def test_the_static_check_catches_a_hand_edit_a_missing_json_and_an_unquoted_one(tmp_path):
    docs = _docs_tree(tmp_path, _result())
    assert static_problems(docs) == []
    page = docs / "page.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| 34 |", "| 33 |"), encoding="utf-8")
    [problem] = static_problems(docs)
    assert "page.md: block t differs from its JSON file" in problem
    assert write_docs(docs) == [page] and static_problems(docs) == [] and "| 34 |" in page.read_text(encoding="utf-8")
    (docs / "results" / "data" / "orphan.json").write_text(_result().to_json(), encoding="utf-8")
    page.write_text(page.read_text(encoding="utf-8") + "\n<!-- result: gone -->\n<!-- /result -->\n", encoding="utf-8")
    problems = static_problems(docs)
    assert any("block gone" in p and "no such result" in p for p in problems)
    assert any("orphan.json is quoted by no docs page" in p for p in problems)


def test_a_rerun_compares_what_the_command_saves(tmp_path):
    """`rerun` runs the recorded command with its environment and reads the table it saved; a
    script that saves other cells is caught."""
    script = tmp_path / "emit.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(results.ROOT)!r})\n"
        "from benchmarks.results import Table, publish\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        "publish(Table(('program', 'edges', 'seconds'), (('reverse', os.environ['OMP_NUM_THREADS'] + '4', '0.1'),)), __import__('pathlib').Path(path))\n",
        encoding="utf-8")
    recorded = _result((("reverse", "14", "1.2"),))
    recorded = Result(**{**recorded.__dict__, "argv": (str(script), "--json", "unused.json")})
    fresh = results.rerun(recorded, timeout=120)
    assert fresh.env == {"OMP_NUM_THREADS": "1"} and differences(recorded.table, fresh.table) == []
    assert json.loads(fresh.to_json())["argv"][0] == str(script)
    changed = Result(**{**recorded.__dict__, "env": {"OMP_NUM_THREADS": "2"}})
    assert differences(recorded.table, results.rerun(changed, timeout=120).table) == ["row 1 (reverse), edges: recorded 14, now 24"]


def test_the_check_reruns_results_side_by_side_and_reports_them_in_name_order(monkeypatch):
    """`check(jobs=...)` re-runs several results at once; its problems come in the order of the
    names, whichever re-run finishes first, and a result without a JSON file is left to the static
    part."""
    running, most = [0], [0]
    lock = threading.Lock()

    def fake_reproduction(name: str) -> list[str]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2 if name == "a" else 0.05)
        with lock:
            running[0] -= 1
        if name == "c":
            raise FileNotFoundError(name)
        return [f"{name}: differs"]

    monkeypatch.setattr(results, "static_problems", lambda: ["static"])
    monkeypatch.setattr(results, "quoted_names", lambda: {"b": [], "c": [], "a": []})
    monkeypatch.setattr(results, "reproduction_problems", fake_reproduction)
    assert results.check(jobs=3) == ["static", "a: differs", "b: differs"]
    assert most[0] > 1
    assert results.check(only=("b",), jobs=3) == ["static", "b: differs"]


def test_every_result_block_in_the_docs_equals_its_json_and_every_json_is_quoted():
    problems = static_problems()
    assert problems == [], "\n".join(problems)
    assert len(results.quoted_names()) >= 4


def _quick_quoted_results() -> list[str]:
    """The quoted results `--check` re-runs, one test each so that xdist spreads them over workers."""
    quick = []
    for name in sorted(results.quoted_names()):
        try:
            if results.load(name).quick:
                quick.append(name)
        except FileNotFoundError:
            continue  # the static test reports it
    return quick


@pytest.mark.parametrize("name", _quick_quoted_results())
def test_a_quick_quoted_result_reproduces(name):
    """The docs' own quick results, re-run as `python -m benchmarks.results --check` re-runs them
    (the rare-inputs circuit table, auto-circuit's scores, the claims fuzz tables, ...): every cell
    outside the timing columns as recorded."""
    problems = results.reproduction_problems(name)
    assert problems == [], "\n".join(problems)
