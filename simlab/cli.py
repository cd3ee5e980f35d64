"""The `simlab` command: run experiments, list them, show and redraw results folders.

Exit codes: 0 success, 1 failure while running, 2 bad input (one line, no traceback).
"""

import argparse
import contextlib
import os
import pathlib
import re
import sys
import tempfile
import warnings

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
CACHE_ENVIRONMENT = "SIMLAB_CACHE_DIR"
RESULTS = pathlib.Path("results")
# Each simulated CPU device costs memory and start-up time (a hundred thousand never finish
# starting); no machine holds more accelerators than this.
MAX_DEVICES = 1024
# JAX warns once per executable it cannot read from or write to the persistent cache.
CACHE_WARNING = re.compile(
    r"Error (?P<action>reading|writing) persistent compilation cache entry for '[^']*': "
    r"(?P<cause>.*)",
    re.DOTALL,
)


class _Parser(argparse.ArgumentParser):
    """argparse, but bad usage exits with code 2 and one `simlab: error:` line."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="simlab",
        description="Run simlab experiments (TOML files) and inspect their results folders.",
        epilog="Exit codes: 0 success, 1 failure while running, 2 bad input.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser(
        "run",
        help="run an experiment into a new results folder",
        description="Validate an experiment completely, then run its fit, sweep and figures.",
    )
    run.add_argument("experiment", help="a TOML file, or the name of a shipped experiment")
    run.add_argument(
        "--out",
        type=pathlib.Path,
        default=None,
        metavar="DIR",
        help="results folder (default: results/<experiment>/<UTC timestamp>)",
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace --out if it already holds a run"
    )
    run.add_argument(
        "--devices",
        type=_device_count,
        default=None,
        metavar="N",
        help=f"shard the sweep over N devices (N simulated CPU devices on a CPU; at most "
        f"{MAX_DEVICES})",
    )
    run.add_argument("--quiet", action="store_true", help="print only errors")
    run.add_argument(
        "--quick",
        action="store_true",
        help="apply the file's [quick] table: a reduced run for a preview",
    )
    run.add_argument(
        "--check",
        action="store_true",
        help="only validate the experiment file, run nothing and start no device",
    )
    run.add_argument(
        "--data",
        type=pathlib.Path,
        default=None,
        metavar="CSV",
        help="fit this CSV file instead of the file's data source (any path: a csv path in "
        "the TOML file must stay inside the experiment's folder or the project)",
    )

    commands.add_parser(
        "list",
        help="list the shipped experiments",
        description="List the shipped experiments with one-line descriptions.",
    )

    show = commands.add_parser(
        "show",
        help="summarise a results folder",
        description="Fitted parameters ± standard errors, sweep summary, "
        "wall times and figures of a results folder.",
    )
    show.add_argument(
        "run",
        help="a results folder written by `simlab run`, `latest` (the newest run under "
        "results/ or written with --out from here), or an experiment name (its newest run)",
    )

    plot = commands.add_parser(
        "plot",
        help="redraw a run's figures from its stored results",
        description="Redraw the figures of a results folder from its "
        "stored arrays; nothing is recomputed.",
    )
    plot.add_argument(
        "run", help="a results folder written by `simlab run`, `latest`, or an experiment name"
    )

    clean = commands.add_parser(
        "clean",
        help="remove unfinished runs left by killed processes",
        description="Remove the hidden unfinished run folders that simlab made under a "
        "results folder (.NAME.partial-XXXXXXXX, holding simlab's owner marker) whose process "
        "is gone; links, finished runs and anything else are never touched.",
    )
    clean.add_argument(
        "root",
        nargs="?",
        type=pathlib.Path,
        default=pathlib.Path("results"),
        help="the results folder to clean (default: results)",
    )
    return parser


# C0 and C1 control characters (escape sequences among them), except tab and newline.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without terminal control characters: a file cannot drive the terminal."""
    return _CONTROL.sub("", text)


def _run_folder(name: str) -> pathlib.Path:
    """A results folder from the command line: a path, `latest`, or an experiment name."""
    import simlab.experiment as experiments

    path = pathlib.Path(name)
    if path.exists() or os.sep in name:
        return path
    return experiments.latest_run(RESULTS, None if name == "latest" else name)


def _device_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    if value > MAX_DEVICES:
        raise argparse.ArgumentTypeError(
            f"must be at most {MAX_DEVICES}; got {text!r}. On a CPU each device is simulated; "
            "pass a count your machine can hold."
        )
    return value


def configure_jax(num_devices: int | None, *, quiet: bool = False) -> pathlib.Path | None:
    """Application settings (the library never touches jax.config): float64, a persistent
    compilation cache so a second run starts faster, and simulated CPU devices if asked.

    Every executable is cached, however quick to compile: a run compiles about a hundred,
    most of them small, and together those cost more than the few large ones. None holds
    a host callback (which would keep it out of the cache): top-level solves read their
    status after the compiled call returns.

    **Returns:** the cache folder, or `None` if it cannot be written: then the run compiles
    without it, and one line says so (unless `quiet`).
    """
    import jax

    jax.config.update("jax_enable_x64", True)
    cache = _writable_cache(quiet)
    if cache is not None:
        jax.config.update("jax_compilation_cache_dir", str(cache))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if num_devices is not None and num_devices > 1:
        try:
            jax.config.update("jax_num_cpu_devices", num_devices)
        except RuntimeError:
            pass  # JAX already started (e.g. inside a Python session): use the devices it has
    return cache


def _writable_cache(quiet: bool) -> pathlib.Path | None:
    cache = pathlib.Path(
        os.environ.get(CACHE_ENVIRONMENT) or pathlib.Path.home() / ".cache" / "simlab" / "jax"
    )
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=cache):
            pass
    except OSError as error:
        _warn(
            f"the compilation cache {cache} cannot be written ({error.strerror or error}); "
            f"compiling without it. Set {CACHE_ENVIRONMENT} to a folder you can write to.",
            quiet,
        )
        return None
    return cache


@contextlib.contextmanager
def _cache_problems_in_one_line(cache: pathlib.Path | None, *, quiet: bool):
    """JAX warns once per executable it cannot read from or write to the persistent cache
    (a damaged entry, a full disk); the user gets one line for them all, or none if quiet."""
    with warnings.catch_warnings():
        warnings.filterwarnings("always", message=CACHE_WARNING.pattern)
        show_other = warnings.showwarning
        reported = False

        def show(message, category, filename, lineno, file=None, line=None):
            nonlocal reported
            problem = CACHE_WARNING.match(str(message))
            if problem is None:
                show_other(message, category, filename, lineno, file, line)
            elif not reported:
                reported = True
                cause = problem["cause"].partition("\n")[0]
                _warn(
                    f"cannot use entries of the compilation cache {cache} (JAX failed "
                    f"{problem['action']} one: {cause}); they are compiled again. Delete that "
                    f"folder, or set {CACHE_ENVIRONMENT} to another one.",
                    quiet,
                )

        warnings.showwarning = show
        yield


def _warn(message: str, quiet: bool) -> None:
    if not quiet:
        print(printable(f"simlab: warning: {message}"), file=sys.stderr)


def _devices(num_devices: int | None):
    import jax

    if num_devices is None:
        return None
    available = jax.devices()
    if num_devices > len(available):
        from simlab.experiment import ExperimentError

        raise ExperimentError(
            f"--devices {num_devices}: only {len(available)} device(s) are available; pass "
            f"--devices {len(available)} or fewer."
        )
    return available[:num_devices]


def _run(arguments) -> int:
    if arguments.check:
        return _check(arguments)
    cache = configure_jax(arguments.devices, quiet=arguments.quiet)  # before any array exists
    import simlab.experiment as experiments

    with _cache_problems_in_one_line(cache, quiet=arguments.quiet):
        experiment = experiments.load(
            experiments.find(arguments.experiment), quick=arguments.quick, data=arguments.data
        )
        folder = experiments.run(
            experiment,
            out=arguments.out,
            overwrite=arguments.overwrite,
            devices=_devices(arguments.devices),
            quiet=arguments.quiet,
        )
    if arguments.out is not None:
        try:
            experiments.record_run(RESULTS, folder, experiment.name)
        except OSError as error:
            _warn(
                f"cannot note the run in {RESULTS} ({error.strerror or error}); `simlab show "
                f"latest` will not find it, but `simlab show {folder}` will.",
                arguments.quiet,
            )
    failure = experiments.simulation_failure(folder)
    if failure is None:
        return EXIT_OK
    print(
        printable(
            f"simlab: failed: {failure}; results kept in {folder}, but its states, its event "
            "and the figures drawn from them are not valid: fix the experiment's [solver] "
            "table or model and run it again."
        ),
        file=sys.stderr,
    )
    return EXIT_FAILURE


def _check(arguments) -> int:
    """Checks the experiment file without starting a device: the model's parameters are
    arrays, so JAX starts, but on the CPU alone, without simulated devices."""
    import jax

    import simlab.experiment as experiments

    jax.config.update("jax_enable_x64", True)
    platforms = jax.config.jax_platforms
    jax.config.update("jax_platforms", "cpu")  # only before JAX starts: then it picks the CPU
    try:
        path = experiments.find(arguments.experiment)
        experiments.load(path, quick=arguments.quick, data=arguments.data)
    finally:
        jax.config.update("jax_platforms", platforms)
    print(f"{path}: valid.")
    return EXIT_OK


def _list(arguments) -> int:
    import tomllib

    import simlab.experiment as experiments

    shipped = experiments.shipped()
    if not shipped:
        print("no shipped experiments found (looked in ./experiments and simlab's own folder).")
        return EXIT_OK
    width = max(map(len, shipped))
    for name, path in shipped.items():
        try:
            description = tomllib.loads(path.read_text(encoding="utf-8")).get("description", "")
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            description = "(cannot be read; `simlab run --check` says why)"
        print(printable(f"{name:<{width}}  {description}"))
    print(f"\nrun one with `simlab run NAME` (files in {next(iter(shipped.values())).parent}).")
    return EXIT_OK


def _show(arguments) -> int:
    import simlab.experiment as experiments

    print(printable(experiments.show(_run_folder(arguments.run))))
    return EXIT_OK


def _plot(arguments) -> int:
    import simlab.experiment as experiments

    folder = _run_folder(arguments.run)
    written = experiments.redraw(folder)
    print(printable(f"redrew {len(written)} file(s) in {folder / 'figures'}"))
    failure = experiments.simulation_failure(folder)
    if failure is not None:
        _warn(f"{failure}; the figures drawn from it are not valid.", quiet=False)
    return EXIT_OK


def _clean(arguments) -> int:
    import simlab.experiment as experiments

    removed, failed = experiments.clean_partials(arguments.root)
    for folder in removed:
        print(printable(f"removed {folder}"))
    for problem in failed:
        print(printable(f"simlab: could not remove {problem}"), file=sys.stderr)
    print(printable(f"{len(removed)} unfinished run folder(s) removed from {arguments.root}."))
    return EXIT_FAILURE if failed else EXIT_OK


COMMANDS = {"run": _run, "list": _list, "show": _show, "plot": _plot, "clean": _clean}


def main(argv: list[str] | None = None) -> int:
    """The `simlab` entry point; returns the exit code (0, 1 or 2)."""
    arguments = build_parser().parse_args(argv)
    from simlab.experiment import ExperimentError

    try:
        return COMMANDS[arguments.command](arguments)
    except ExperimentError as error:
        print(printable(f"simlab: error: {error}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("simlab: interrupted; no results folder was written.", file=sys.stderr)
        return EXIT_FAILURE
    except Exception as error:  # a failure while running: say what, keep it to one line
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(printable(f"simlab: failed: {type(error).__name__}: {message}"), file=sys.stderr)
        if os.environ.get("SIMLAB_TRACEBACK"):
            raise
        print("simlab: set SIMLAB_TRACEBACK=1 to see where.", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
