"""Every file an upload may hold is indexed as hidden text, so none of them reads unfiltered."""

from __future__ import annotations

from pathlib import Path

from skills_app.hidden_library import skill_file_texts


def test_the_index_reads_every_file_an_upload_may_hold(settings, tmp_path: Path) -> None:
    settings.UPLOAD_MAX_FILES = 2_100
    folder = tmp_path / "big"
    filler = folder / "filler"
    filler.mkdir(parents=True)
    for i in range(2_050):
        (filler / f"f{i:05d}.txt").write_text(f"filler {i}\n")
    # Walked last, after the 2,050 fillers, as a hostile upload would place it.
    (folder / "zz").mkdir()
    (folder / "zz" / "secret.md").write_text("the instructions the model alone should read\n")
    paths = [path for path, _text in skill_file_texts(folder)]
    assert len(paths) == 2_051
    assert "zz/secret.md" in paths
