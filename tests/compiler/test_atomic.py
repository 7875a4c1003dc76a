"""`compiler.atomic`: whole files or nothing, with the permissions of any new file."""

from __future__ import annotations

import os
import stat

import pytest

from compiler.atomic import atomic_write, atomic_write_bytes, atomic_write_text


def test_writes_the_content_and_replaces_an_old_file(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("old")
    assert atomic_write_text(path, "a,b\n1,2\n") == path
    assert path.read_text() == "a,b\n1,2\n"
    atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_missing_folders_are_created_and_the_writer_sees_the_suffix(tmp_path):
    seen = []

    def write(temporary):
        seen.append(temporary)
        temporary.write_text("png bytes")

    path = atomic_write(tmp_path / "deep" / "er" / "picture.png", write)
    assert path.read_text() == "png bytes"
    assert seen[0].parent == path.parent and seen[0].suffix == ".png" and seen[0] != path


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_files_follow_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        path = atomic_write_text(tmp_path / f"f{umask:o}.txt", "x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_a_failing_writer_leaves_no_temporary_and_the_old_file(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"old model")

    def write(temporary):
        temporary.write_bytes(b"half a mod")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, write)
    assert path.read_bytes() == b"old model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]
