"""Mutation testing of simlab's core modules with mutmut, one module at a time.

Usage: `python benchmarks/mutate.py [--budget SECONDS] [--stride N] [MODULE ...]`
(default: every module in `TARGETS`). Each module is mutated in a scratch copy of the
checkout; mutmut writes the mutants and finds which of the given tests reach each mutated
function, then each mutant runs those tests in a fresh process (mutmut's own workers are
forked, which JAX's thread pools do not survive). Mutants left when a module's time budget
runs out are counted as such. Prints the score per module (killed / tested)
and the surviving mutants, for benchmarks/results/mutation.txt.
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

# module -> the test files (or node ids) that check it
TARGETS = {
    "simlab/models/_ode.py": [
        "tests/test_references.py::test_ode_vector_fields_equal_their_equations",
        "tests/test_models.py",
    ],
    "simlab/models/_pde.py": ["tests/test_references.py", "tests/test_pde.py"],
    "simlab/_lean.py": ["tests/test_lean.py", "tests/test_references.py"],
    "simlab/_simulate.py": ["tests/test_simulate.py", "tests/test_simulate_bad_input.py"],
    "simlab/_fit/_uncertainty.py": [
        "tests/test_references.py::test_covariance_and_standard_errors_equal_scipys",
        "tests/test_references.py::test_prediction_band_equals_a_finite_difference_delta_method",
        "tests/test_references.py::test_fitted_optimum_equals_scipys",
    ],
    "simlab/grid/_operators.py": ["tests/test_grid.py", "tests/test_references.py"],
    "simlab/grid/_boundary.py": ["tests/test_grid.py", "tests/test_references.py"],
    "simlab/io/_store.py": ["tests/test_store.py"],
}


def scratch_copy(target: pathlib.Path) -> None:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in files:
        source = ROOT / name
        if source.is_file():
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


def generate(work: pathlib.Path, module: str, tests: list[str], budget: float) -> dict:
    """Has mutmut write the mutants of `module` and map each function to the tests that
    run it (`mutants/mutmut-stats.json`); stops it before it forks workers, which JAX's
    thread pools do not survive."""
    selection = "\n    ".join(tests)
    (work / "setup.cfg").write_text(
        "[mutmut]\nsource_paths=simlab\n"
        f"only_mutate=\n    {module}\n"
        f"pytest_add_cli_args_test_selection=\n    {selection}\n"
        "pytest_add_cli_args=\n    -p\n    no:cacheprovider\n"
    )
    mutmut = pathlib.Path(sys.executable).with_name("mutmut")
    stats = work / "mutants" / "mutmut-stats.json"
    process = subprocess.Popen(
        [str(mutmut), "run"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + budget
    while not stats.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(2)  # the file is written whole before the forked phase starts
    process.kill()
    process.wait()
    return json.loads(stats.read_text())["tests_by_mangled_function_name"]


def mutant_names(work: pathlib.Path) -> list[str]:
    mutmut = pathlib.Path(sys.executable).with_name("mutmut")
    listing = subprocess.run(
        [str(mutmut), "results", "--all", "true"], cwd=work, capture_output=True, text=True
    ).stdout
    return re.findall(r"^\s*(\S+__mutmut_\d+):", listing, flags=re.M)


def run_mutant(work: pathlib.Path, name: str, tests: list[str], timeout: float) -> str:
    """Runs the tests that reach the mutated function in a fresh process; the trampolines
    mutmut wrote pick the mutant named by `MUTANT_UNDER_TEST`."""
    mutants = work / "mutants"
    command = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider"]
    environment = {**os.environ, "MUTANT_UNDER_TEST": name, "PYTHONPATH": str(mutants)}
    try:
        completed = subprocess.run(
            command, cwd=mutants, env=environment, capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if completed.returncode == 0 else "killed"


def mutate(module: str, tests: list[str], budget: float, stride: int) -> str:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="simlab-mutate-") as folder:
        work = pathlib.Path(folder)
        scratch_copy(work)
        coverage = generate(work, module, tests, budget)
        names = mutant_names(work)[::stride]
        outcomes: dict[str, str] = {}
        for name in names:
            if time.monotonic() - start > budget:
                break
            # mutmut credits a module-scoped fixture's work to the first test using it
            # only, so every mutant that some test reaches runs the module's whole selection.
            reached = name.rsplit("__mutmut_", 1)[0] in coverage
            outcomes[name] = run_mutant(work, name, tests, 600) if reached else "no tests"
    counts = {status: list(outcomes.values()).count(status) for status in set(outcomes.values())}
    killed = counts.get("killed", 0)
    tested = killed + counts.get("survived", 0) + counts.get("timeout", 0)
    score = f"{100 * killed / tested:.0f} %" if tested else "n/a"
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    sampled = f"every {stride}th of " if stride > 1 else ""
    header = (
        f"{module}: {score} killed ({killed} of {tested} run; {summary}; {sampled}"
        f"{len(names) * stride} mutants, {len(names) - len(outcomes)} left by the budget)"
    )
    surviving = [f"  {name}: {status}" for name, status in outcomes.items() if status != "killed"]
    return "\n".join([header, *surviving])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(TARGETS))
    parser.add_argument("--budget", type=float, default=1200.0, help="seconds per module")
    parser.add_argument("--stride", type=int, default=1, help="run every STRIDE-th mutant")
    arguments = parser.parse_args()
    for module in arguments.modules:
        print(mutate(module, TARGETS[module], arguments.budget, arguments.stride), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
