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
        pytest.skip(f"{path.name} needs {', '.join(missing)} (the export extra)")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    blocks = python_blocks(path)
    for block in blocks:
        # Padding with blank lines makes tracebacks point at the line in the markdown file.
        code = compile("\n" * (block.line - 1) + block.source, str(path), "exec")
        exec(code, namespace)  # noqa: S102 - running the documentation is the point
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
