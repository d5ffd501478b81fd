"""The README's examples, run as they are written: each Python block as a script, in a
directory of its own (with the `dataset/` the first one uploads), against the live
server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_a_readme_example_runs(server, tmp_path: Path, number: int):
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset" / "rows.csv").write_text("x,y\n1,2\n")
    script = tmp_path / "example.py"
    script.write_text(BLOCKS[number])
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "SANDBOXD_URL": server.url, "SANDBOXD_KEY": server.key},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, ran.stderr
    if "dataset" in BLOCKS[number]:
        assert (tmp_path / "dataset-copy" / "rows.csv").read_text() == "x,y\n1,2\n"
