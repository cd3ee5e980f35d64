"""simlab as a user installs it: a wheel built from this tree, installed into a fresh virtual
environment with its dependencies from the package index, runs the README's tour."""

import pathlib
import re
import subprocess
import sys
import venv

import pytest

import simlab

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(command: list[str], cwd: pathlib.Path, timeout: float) -> subprocess.CompletedProcess:
    completed = subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert completed.returncode == 0, (command, completed.stdout[-3000:], completed.stderr[-3000:])
    return completed


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_environment_and_runs_the_readme_tour(tmp_path):
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        cwd=tmp_path,
        timeout=600,
    )
    (wheel,) = dist.glob("simlab-*.whl")
    assert wheel.name.startswith(f"simlab-{simlab.__version__}-")

    environment = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(environment)
    python = str(environment / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path, timeout=900)

    # The first Python block of the README is the tour; run from tmp_path, the source tree
    # is not on the path, so the installed wheel is what it imports.
    tour = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)[0]
    script = tmp_path / "tour.py"
    script.write_text(
        tour + "\nimport simlab\nprint('simlab', simlab.__version__, 'from', simlab.__file__)\n"
    )
    completed = _run([python, str(script)], cwd=tmp_path, timeout=600)
    assert f"simlab {simlab.__version__} from {environment}" in completed.stdout
    assert simlab.__version__ == "0.3.0"
