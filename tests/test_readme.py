"""The README's Python blocks run as written, and the demo produces its figure."""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def test_readme_python_blocks_run_in_a_fresh_interpreter(tmp_path):
    # A fresh process, as a reader would run it: none of this suite's configuration applies.
    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert blocks, "the README should hold a runnable API tour"
    script = tmp_path / "readme_tour.py"
    script.write_text("\n".join(blocks))
    completed = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "d(mean prey)/d(alpha)" in completed.stdout
    assert "LotkaVolterra has state shape (2,)" in completed.stdout


def test_demo_writes_its_figure(tmp_path):
    from simlab import demo

    figure_path = demo.main(str(tmp_path), quick=True)
    assert figure_path.exists() and figure_path.stat().st_size > 10_000
