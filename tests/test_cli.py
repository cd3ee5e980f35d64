"""The `simlab` command: exit codes (0 success, 1 failure, 2 bad input with one clear line
and no traceback), `list`, `show`, `plot` redrawing from a stored run, `--out` protection."""

import pathlib
import subprocess
import sys

import pytest
from helpers import SMALL_TOML

from simlab import cli
from simlab.experiment import shipped


def _write(folder: pathlib.Path, name: str, text: str) -> pathlib.Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _command(*arguments, cwd):
    return subprocess.run(
        [sys.executable, "-m", "simlab.cli", *arguments],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )  # fmt: skip


def _one_clear_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_the_command_reports_bad_input_in_one_line(tmp_path):
    """Real processes: a missing file, broken TOML and an unknown model all exit with 2."""
    _write(tmp_path, "broken.toml", "[model\nname = 1\n")
    _write(tmp_path, "wolf.toml", SMALL_TOML.replace("DampedPendulum", "Wolf"))
    cases = {
        "missing.toml": "missing.toml: no such experiment file",
        "broken.toml": "broken.toml: not valid TOML",
        "wolf.toml": "wolf.toml: [model.name] unknown model 'Wolf'",
    }
    for argument, message in cases.items():
        finished = _command("run", argument, cwd=tmp_path)
        assert finished.returncode == 2, finished.stderr
        line = _one_clear_line(finished.stderr)
        assert line.startswith("simlab: error: ") and message in line
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("length = 1.0", "length = 1.0, omega = 2.0"),
         "[model.parameters.omega] DampedPendulum has no parameter 'omega'"),
        (("stop = 5.0", 'stop = "five"'), "[time.stop] must be a number; got 'five'"),
        (("num_points = 11", "num_points = 0"), "[time.num_points] must be an integer >= 2"),
        (("values = [0.5, 1.0]", "values = [-0.5, 1.0]"),
         "[sweep.parameters.damping] reaches outside damping's valid range [0, inf)"),
        (('variable = "final_angle"', 'variable = "angle"'),
         "[figures[0].variable] is 'angle'; use one of"),
    ],
)  # fmt: skip
def test_bad_experiment_files_exit_2(isolated, capsys, change, message):
    path = _write(isolated, "bad.toml", SMALL_TOML.replace(*change))
    assert cli.main(["run", str(path)]) == 2
    line = _one_clear_line(capsys.readouterr().err)
    assert line.startswith(f"simlab: error: {path}: {message}")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["run", "small.toml", "--devices", "0"], "--devices: must be a positive integer"),
        (["run", "small.toml", "--devices", "x"], "--devices: must be a positive integer"),
        (["run"], "the following arguments are required: experiment"),
        (["launch"], "invalid choice: 'launch'"),
    ],
)
def test_bad_usage_exits_2(isolated, capsys, arguments, message):
    _write(isolated, "small.toml", SMALL_TOML)
    with pytest.raises(SystemExit) as caught:
        cli.main(arguments)
    assert caught.value.code == 2
    assert message in _one_clear_line(capsys.readouterr().err)


def test_help_everywhere(capsys):
    for arguments in (["--help"], ["run", "--help"], ["list", "--help"], ["show", "--help"],
                      ["plot", "--help"]):  # fmt: skip
        with pytest.raises(SystemExit) as caught:
            cli.main(arguments)
        assert caught.value.code == 0
        assert "usage: simlab" in capsys.readouterr().out


def test_list_names_every_shipped_experiment(capsys):
    assert cli.main(["list"]) == 0
    printed = capsys.readouterr().out
    for name in shipped():
        line = next(line for line in printed.splitlines() if line.startswith(name))
        assert len(line.split()) > 3  # the name and a description


def test_check_validates_without_running(isolated, capsys):
    assert cli.main(["run", "lynx_hare", "--check"]) == 0
    assert "valid" in capsys.readouterr().out
    assert not (isolated / "results").exists()


@pytest.mark.parametrize("name", ["/tmp/escape", "../../escape", "sub/escape", ".escape"])
def test_check_refuses_a_figure_name_that_is_not_a_file_stem(isolated, capsys, name):
    portrait = 'kind = "phase_portrait"'
    text = SMALL_TOML.replace(portrait, f'{portrait}\nname = "{name}"')
    path = _write(isolated, "escape.toml", text)
    assert cli.main(["run", str(path), "--check"]) == 2
    line = _one_clear_line(capsys.readouterr().err)
    assert line.startswith(f"simlab: error: {path}: [figures[1].name] is {name!r}; a name")
    assert "letters, digits" in line


def test_run_show_plot_and_out_protection(isolated, capsys):
    path = _write(isolated, "small.toml", SMALL_TOML)
    out = isolated / "run"
    assert cli.main(["run", str(path), "--out", str(out), "--devices", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"figures: {out / 'figures'}" in printed
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert figures == ["phase_portrait.png", "phase_portrait.svg", "sweep_lines.png",
                       "sweep_lines.svg"]  # fmt: skip

    # Running into a folder that holds a run is refused without --overwrite, before any work.
    assert cli.main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    line = _one_clear_line(capsys.readouterr().err)
    assert "already holds another run; pass --overwrite" in line

    assert cli.main(["show", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "small: a small pendulum sweep" in summary
    assert "sweep (grid, 2 members): damping in [0.5, 1]" in summary
    assert "2 device(s)" in summary and "sweep_lines.png" in summary

    # `plot` redraws every figure from the stored run.
    for figure in (out / "figures").iterdir():
        figure.unlink()
    assert cli.main(["plot", str(out)]) == 0
    assert "redrew 4 file(s)" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "figures").iterdir()) == figures

    # An edited config.toml is checked again: a figure name that leaves figures/ is refused.
    config = out / "config.toml"
    portrait = 'kind = "phase_portrait"'
    config.write_text(config.read_text().replace(portrait, f'{portrait}\nname = "../escape"'))
    assert cli.main(["plot", str(out)]) == 2
    line = _one_clear_line(capsys.readouterr().err)
    assert f"{config}: [figures[1].name] is '../escape'" in line
    assert not list(isolated.rglob("escape.*"))

    assert cli.main(["run", str(path), "--out", str(out), "--overwrite", "--quiet"]) == 0
    assert capsys.readouterr().out == ""

    assert cli.main(["show", str(isolated)]) == 2
    assert "not a finished simlab run" in _one_clear_line(capsys.readouterr().err)
    assert cli.main(["run", str(path), "--devices", "64", "--quiet"]) == 2
    assert "only" in _one_clear_line(capsys.readouterr().err)


def test_a_failure_while_running_exits_1(isolated, capsys, monkeypatch):
    import simlab.experiment

    def broken(*args, **kwargs):
        raise FloatingPointError("the state became NaN\nmore detail")

    monkeypatch.setattr(simlab.experiment, "compute", broken)
    path = _write(isolated, "small.toml", SMALL_TOML)
    assert cli.main(["run", str(path), "--quiet"]) == 1
    error = capsys.readouterr().err
    assert "simlab: failed: FloatingPointError: the state became NaN" in error
    assert "Traceback" not in error
    assert not any((isolated / "results" / "small").iterdir())


def test_the_command_turns_on_float64_and_the_compilation_cache(isolated):
    import jax

    cli.configure_jax(None)
    assert jax.config.jax_enable_x64
    assert jax.config.jax_compilation_cache_dir == str(isolated / "cache")
