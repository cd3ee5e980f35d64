"""Every Python block of every `docs/*.md` page runs, pasted in order into a fresh interpreter.

One subprocess per page, as a reader would paste the page's blocks into one session: none
of this suite's configuration (float64, simulated devices) applies. A block that opens with
`# name.py — ...` is a script the page asks you to save and start (e.g. once per process of
a cluster): it is saved under that name and run on its own, with no arguments. Blocks are
taken as written; pages whose examples would take long use small problems themselves.
"""

import json
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


# Pages whose blocks take minutes (a 20-start fit of a published model): `make slow` runs
# them; what they show is also checked by the tests of their modules in `make test`.
SLOW_PAGES = {"petab"}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=pytest.mark.slow) if page.stem in SLOW_PAGES else page
        for page in PAGES
    ],
    ids=[page.stem for page in PAGES],
)
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
            timeout=1800 if page.stem in SLOW_PAGES else 900,
            check=False,
        )
        last = [line for line in completed.stdout.splitlines() if line.startswith("--- block")]
        where = last[-1] if last else "before the first block" if name == "page.py" else name
        assert completed.returncode == 0, (
            f"{page.name}: {where} failed:\n" + completed.stderr[-3000:]
        )


# The notebooks under docs/notebooks: `make docs` runs them (mkdocs-jupyter, execute: true),
# and their `assert` cells check results against known values, so a wrong result fails the
# build as an exception does. Here their structure is checked quickly, and `make slow` runs
# them once more with nbclient, each in a fresh kernel.
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))


def _cells(notebook: pathlib.Path) -> list[dict]:
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_the_notebooks_run_in_the_docs_build_and_fail_it_when_they_raise():
    yaml = pytest.importorskip("yaml")  # installed with mkdocs
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    plugins = {
        name: options or {}
        for entry in config["plugins"]
        for name, options in (entry.items() if isinstance(entry, dict) else [(entry, None)])
    }
    jupyter = plugins["mkdocs-jupyter"]
    assert jupyter["execute"] is True and jupyter["allow_errors"] is False
    assert jupyter["cache"] is False  # a cached page would not rerun after a change to simlab
    nav = next(item["Notebooks"] for item in config["nav"] if "Notebooks" in item)
    listed = sorted(path for entry in nav for path in entry.values())
    assert listed == [f"notebooks/{notebook.name}" for notebook in NOTEBOOKS]
    assert {"getting-started", "fitting", "sweeps", "pde", "sde"} <= {n.stem for n in NOTEBOOKS}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[notebook.stem for notebook in NOTEBOOKS])
def test_the_notebook_has_a_title_prose_a_figure_and_checks_and_no_stored_outputs(notebook):
    cells = _cells(notebook)
    markdown = [_source(cell) for cell in cells if cell["cell_type"] == "markdown"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert markdown[0].startswith("# "), "the first cell is the page's title"
    assert len(markdown) >= 4 and len(code) >= 4
    sources = "\n".join(_source(cell) for cell in code)
    assert "%matplotlib inline" in _source(code[0])  # before simlab.plot's first figure
    assert re.search(r"plt\.subplots|simlab\.plot\.", sources), "no figure"
    assert len(re.findall(r"^\s*(assert |np\.testing\.assert_)", sources, re.MULTILINE)) >= 3
    # The build runs them: outputs stored in the file would only go stale.
    assert all(not cell["outputs"] and cell["execution_count"] is None for cell in code)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[notebook.stem for notebook in NOTEBOOKS])
def test_the_notebook_runs_and_its_checks_hold(notebook):
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    contents = nbformat.read(notebook, as_version=4)
    # As `make docs` runs it: none of this suite's configuration (conftest.py's XLA_FLAGS,
    # the Agg backend) reaches the kernel.
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MPLBACKEND")}
    client = nbclient.NotebookClient(
        contents, timeout=600, resources={"metadata": {"path": str(notebook.parent)}}
    )
    client.execute(env=env)
