"""The `simlab` command: exit codes (0 success, 1 failure, 2 bad input with one clear line
and no traceback), `list`, `show`, `plot` redrawing from a stored run, `--out` protection."""

import json
import math
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


def test_a_failed_main_simulation_exits_1_keeps_the_run_and_show_says_so_first(isolated, capsys):
    """Two steps cannot reach the end of the span: the run is written, but the command
    fails, and `show` and `plot` say so before anything else."""
    path = _write(isolated, "small.toml", SMALL_TOML + "\n[solver]\nmax_steps = 2\n")
    out = isolated / "run"
    assert cli.main(["run", str(path), "--out", str(out), "--quiet"]) == 1
    line = _one_clear_line(capsys.readouterr().err)
    assert line.startswith(
        "simlab: failed: the main simulation failed (max_steps_reached after 2 steps: "
    )
    assert f"results kept in {out}" in line
    simulation = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["simulation"]
    assert simulation["succeeded"] is False and simulation["status"] == "max_steps_reached"

    assert cli.main(["show", "latest"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].startswith("FAILED: the main simulation failed (max_steps_reached after 2")
    assert shown[1].startswith("small: a small pendulum sweep")

    assert cli.main(["plot", str(out)]) == 0
    captured = capsys.readouterr()
    assert "redrew 4 file(s)" in captured.out
    assert _one_clear_line(captured.err).startswith(
        "simlab: warning: the main simulation failed (max_steps_reached after 2 steps: "
    )


# The largest stable fixed step of ETDRK4 for the Taylor–Green vortex on 64² cells: the
# advective CFL limit 2√2 / (max(|u| + |v|) k_max), with max(|u| + |v|) = 1 and k_max = 21
# after dealiasing.
TAYLOR_GREEN_LIMIT = 2 * math.sqrt(2) / 21


@pytest.mark.parametrize(
    ("name", "given", "too_large"),
    [
        ("taylor_green_decay", "dt0 = 0.1\n", 0.2),
        ("outer_solar_system", "dt0 = 100.0", 3000.0),
        ("decaying_turbulence", "dt0 = 0.006\n", 0.02),
    ],
)
def test_check_refuses_a_fixed_step_above_the_stable_step(isolated, capsys, name, given, too_large):
    """`--check` refuses what the API would refuse at the first step, with the same limit."""
    import jax.numpy as jnp

    import simlab

    original = shipped()[name]
    text = original.read_text(encoding="utf-8")
    assert given in text
    path = _write(isolated, f"{name}.toml", text.replace(given, f"dt0 = {too_large}\n", 1))
    assert cli.main(["run", str(path), "--check"]) == 2
    line = _one_clear_line(capsys.readouterr().err)
    prefix = f"simlab: error: {path}: [solver.dt0] is {too_large:g}, above the largest stable step "
    assert line.startswith(prefix), line
    limit = line.removeprefix(prefix).split()[0]

    experiment = simlab.experiment.load(original)
    ts = jnp.asarray([0.0, 2 * too_large])
    options = {**experiment.solver, "dt0": too_large}
    with pytest.raises(simlab.SimulationError, match=f"above the largest stable step {limit} "):
        simlab.simulate(experiment.model, jnp.asarray(experiment.y0), ts, **options)
    if name == "taylor_green_decay":
        assert float(limit) == pytest.approx(TAYLOR_GREEN_LIMIT, rel=1e-5)


def test_check_refuses_fixed_steps_beyond_max_steps(isolated, capsys):
    """50 time units in fixed steps of 0.1 take 500 steps, more than max_steps = 100."""
    text = shipped()["taylor_green_decay"].read_text(encoding="utf-8")
    path = _write(isolated, "short.toml", text.replace("max_steps = 100000", "max_steps = 100"))
    assert cli.main(["run", str(path), "--check"]) == 2
    assert _one_clear_line(capsys.readouterr().err) == (
        f"simlab: error: {path}: [solver.max_steps] is 100, but 500 fixed steps of dt0 = 0.1 "
        "span the time; set max_steps = 500 or more, or a larger dt0."
    )
