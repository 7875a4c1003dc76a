"""Every ```python block in docs/*.md runs.

The blocks of one file run in order in one fresh namespace (later blocks may use names from
earlier ones), one test per file. A block whose opening fence is preceded by the line
``<!-- no-test -->`` (blank lines in between allowed) is skipped. A file containing
``<!-- requires: torch transformer_lens -->`` is skipped when one of those modules is not
installed (CI installs them; see the README's test command). Blocks run with a temporary
directory as the working directory, so examples that write files leave nothing behind.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import linecache
import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
SKIP_MARKER = "<!-- no-test -->"
_REQUIRES = re.compile(r"<!--\s*requires:\s*([\w .,]+?)\s*-->")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclasses.dataclass(frozen=True)
class CodeBlock:
    """One fenced code block: its language, source, first source line and skip flag."""

    language: str
    source: str
    line: int
    skipped: bool


def code_blocks(markdown: str) -> list[CodeBlock]:
    """All fenced code blocks of a markdown text, in order."""
    blocks: list[CodeBlock] = []
    lines = markdown.splitlines()
    previous_text = ""
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            if lines[i].strip():
                previous_text = lines[i].strip()
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        language = (opening["info"].strip().split() or [""])[0].lower()
        body: list[str] = []
        i += 1
        while i < len(lines):
            closing = _FENCE.match(lines[i])
            if closing and closing["fence"].startswith(fence) and not closing["info"].strip():
                break
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        first_line = i - len(body) + 1
        blocks.append(
            CodeBlock(language, "\n".join(body) + "\n", first_line, previous_text == SKIP_MARKER)
        )
        previous_text = ""
        i += 1
    return blocks


def python_blocks(path: pathlib.Path) -> list[CodeBlock]:
    """The python blocks of a docs file that should run."""
    blocks = code_blocks(path.read_text(encoding="utf-8"))
    return [block for block in blocks if block.language in ("python", "py") and not block.skipped]


def required_modules(markdown: str) -> list[str]:
    """Modules named by ``<!-- requires: ... -->`` markers."""
    return [name for match in _REQUIRES.findall(markdown) for name in re.split(r"[\s,]+", match) if name]


def _docs_with_python() -> list[pathlib.Path]:
    return [path for path in sorted(DOCS.glob("*.md")) if python_blocks(path)]


@pytest.mark.parametrize("path", _docs_with_python(), ids=lambda path: path.name)
def test_doc_examples_run(path: pathlib.Path, tmp_path, monkeypatch) -> None:
    missing = [name for name in required_modules(path.read_text(encoding="utf-8")) if not importlib.util.find_spec(name)]
    if missing:
        pytest.skip(f"{path.name} needs {', '.join(missing)} (every extra: pip install -e '.[all]')")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    blocks = python_blocks(path)
    for block in blocks:
        # Padding with blank lines makes tracebacks point at the line in the markdown file. Each
        # block is registered in linecache under a name of its own, as dynamic code should be:
        # a library that reads its caller's source (nnsight's patched `Tensor.backward` parses
        # it) then finds this block's Python rather than the markdown around it.
        source = "\n" * (block.line - 1) + block.source
        name = f"{path}#block-at-line-{block.line}"
        linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
        exec(compile(source, name, "exec"), namespace)
    assert blocks


def test_extractor_reads_languages_lines_and_skip_marker() -> None:
    text = "\n".join(
        [
            "# Title",  # line 1
            "```python",
            "x = 1",  # line 3
            "```",
            "<!-- no-test -->",
            "",
            "```python",
            "raise SystemExit",
            "```",
            "```",
            "plain text",
            "```",
            "  ````py",
            "  y = x + 1",  # line 14
            "  ```",
            "  still inside",
            "  ````",
        ]
    )
    blocks = code_blocks(text)
    assert [(b.language, b.line, b.skipped) for b in blocks] == [
        ("python", 3, False),
        ("python", 8, True),
        ("", 11, False),
        ("py", 14, False),
    ]
    assert blocks[0].source == "x = 1\n"
    assert required_modules("a\n<!-- requires: torch transformer_lens -->\nb") == ["torch", "transformer_lens"]
    assert blocks[3].source == "y = x + 1\n```\nstill inside\n"


# Citations of things a reader of the repository cannot open: a shared folder, a specification
# document and its section numbers, machine paths. Docs bring the facts they need in instead.
_OUTSIDE = re.compile(
    r"shared/|_spec\.md|\bspec(?:ification)?s?\b(?:\s+section)?\s*\d|\bthe spec\b|spec's|/work/|/home/",
    re.IGNORECASE,
)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_MD_NAME = re.compile(r"`([\w./-]+\.md)`")
ROOT = DOCS.parent


def _doc_files() -> list[pathlib.Path]:
    return sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("results/*.md")) + [ROOT / "README.md"]


def outside_citations(text: str, where: pathlib.Path) -> list[str]:
    """`line: text` of every citation in `text` of something outside the repository: a name
    matching `_OUTSIDE`, or a relative link / a backquoted `.md` name that exists nowhere in it."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if _OUTSIDE.search(line):
            found.append(f"{number}: {line.strip()}")
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line)):  # links outside code spans
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (where.parent / target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                found.append(f"{number}: link to {target}")
        for name in _MD_NAME.findall(line):
            if not ((where.parent / name).exists() or (ROOT / name).exists() or (DOCS / name).exists()):
                found.append(f"{number}: `{name}` is not in the repository")
    return found


@pytest.mark.parametrize("path", _doc_files(), ids=lambda path: path.relative_to(ROOT).as_posix())
def test_docs_cite_nothing_outside_the_repository(path: pathlib.Path) -> None:
    found = outside_citations(path.read_text(encoding="utf-8"), path)
    assert not found, f"{path.name} cites what is not in the repository:\n" + "\n".join(found)


def test_the_citation_check_catches_specs_shared_files_and_dead_links() -> None:
    where = DOCS / "example.md"
    bad = "\n".join(
        ["as constructions_spec.md defines", "(spec 1, 3.1)", "see shared/notes.txt", "[x](../../elsewhere.md)",
         "read `missing_notes.md`", "the spec's value"]
    )
    assert [line.split(":")[0] for line in outside_citations(bad, where)] == ["1", "2", "3", "4", "5", "6"]
    good = "[compiling](compiling.md#the-pipeline), `docs/cli.md`, [a paper](https://example.org/paper.md)"
    assert outside_citations(good, where) == []
