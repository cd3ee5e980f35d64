"""Every Python block of every `docs/*.md` page runs, pasted in order into a fresh interpreter.

One subprocess per page, as a reader would paste the page's blocks into one session: none
of this suite's configuration (float64, simulated devices) applies. A block that opens with
`# name.py — ...` is a script the page asks you to save and start (e.g. once per process of
a cluster): it is saved under that name and run on its own, with no arguments. Blocks are
taken as written; pages whose examples would take long use small problems themselves.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").glob("*.md"))


def python_blocks(markdown: str) -> list[str]:
    """The fenced ```python blocks of a page, at any indentation (e.g. inside admonitions),
    dedented as a reader would paste them."""
    blocks = []
    for match in re.finditer(r"^( *)```python\n(.*?)^\1```", markdown, re.DOTALL | re.MULTILINE):
        indent = len(match.group(1))
        lines = match.group(2).splitlines()
        blocks.append("\n".join(line[indent:] for line in lines) + "\n")
    return blocks


SCRIPT = re.compile(r"# (\w+\.py) — ")


def test_the_block_finder_reads_indented_blocks():
    page = "text\n\n```python\nx = 1\n```\n\n!!! note\n\n    ```python\n    y = x + 1\n    ```\n"
    assert python_blocks(page) == ["x = 1\n", "y = x + 1\n"]


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_every_python_block_of_the_page_runs(page, tmp_path):
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip(f"{page.name} has no Python blocks")
    session = [block for block in blocks if not SCRIPT.match(block)]
    scripts = {SCRIPT.match(block).group(1): block for block in blocks if SCRIPT.match(block)}
    # Markers between blocks, so that a failure names the block that raised.
    pasted = "".join(
        f"print('--- block {i + 1} of {len(session)}', flush=True)\n{block}"
        for i, block in enumerate(session)
    )
    for name, source in {"page.py": pasted, **scripts}.items():
        if name == "page.py" and not session:
            continue
        (tmp_path / name).write_text(source, encoding="utf-8")
        completed = subprocess.run(
            [sys.executable, name],
            cwd=tmp_path,  # files a page writes land here
            env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        last = [line for line in completed.stdout.splitlines() if line.startswith("--- block")]
        where = last[-1] if last else "before the first block" if name == "page.py" else name
        assert completed.returncode == 0, (
            f"{page.name}: {where} failed:\n" + completed.stderr[-3000:]
        )
