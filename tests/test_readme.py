"""The README's Python blocks run as written, and the demo produces its figure."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_readme_python_blocks_run(capsys):
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert blocks, "the README should hold a runnable API tour"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # our own file, run as documentation
    printed = capsys.readouterr().out
    assert "d(mean prey)/d(alpha)" in printed
    assert "LotkaVolterra has state shape (2,)" in printed


def test_demo_writes_its_figure(tmp_path):
    from simlab import demo

    figure_path = demo.main(str(tmp_path), quick=True)
    assert figure_path.exists() and figure_path.stat().st_size > 10_000
