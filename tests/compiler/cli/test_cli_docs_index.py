"""docs/index.md links every page in docs/, and docs/results/index.md every results page."""

from __future__ import annotations

import re

from support import REPO


def test_index_links_every_docs_page() -> None:
    docs = REPO / "docs"
    index = (docs / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", index))
    pages = {path.name for path in docs.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/index.md does not link {sorted(pages - linked)}"


def test_results_index_links_every_results_page() -> None:
    results = REPO / "docs" / "results"
    index = (results / "index.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", index))
    pages = {path.name for path in results.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/results/index.md does not link {sorted(pages - linked)}"
    assert "results/index.md" in (REPO / "docs" / "index.md").read_text(encoding="utf-8")
