"""Mutation testing of simlab's core modules with mutmut, one module at a time.

Usage: `python benchmarks/mutate.py [--budget SECONDS] [MODULE ...]` (default: every
module in `TARGETS`). Each module is mutated in a scratch copy of the checkout and its
mutants run against the test files that check it; mutants still untested when a module's
time budget runs out are reported as such. Prints the score per module (killed / tested)
and the surviving mutants, for benchmarks/results/mutation.txt.
"""

import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

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


def mutate(module: str, tests: list[str], budget: float) -> str:
    with tempfile.TemporaryDirectory(prefix="simlab-mutate-") as folder:
        work = pathlib.Path(folder)
        scratch_copy(work)
        selection = "\n    ".join(tests)
        (work / "setup.cfg").write_text(
            "[mutmut]\nsource_paths=simlab\n"
            f"only_mutate=\n    {module}\n"
            f"pytest_add_cli_args_test_selection=\n    {selection}\n"
            "pytest_add_cli_args=\n    -x\n    -q\n    -p\n    no:cacheprovider\n"
            # JAX's thread pools do not survive a fork: fork workers from a bare server.
            "process_isolation=forkserver\nforkserver_warmup=none\n"
        )
        mutmut = pathlib.Path(sys.executable).with_name("mutmut")
        try:
            subprocess.run(
                [str(mutmut), "run", "--max-children", "2"], cwd=work, timeout=budget, check=False
            )
        except subprocess.TimeoutExpired:
            print(f"{module}: time budget of {budget:.0f} s spent", flush=True)
        results = subprocess.run(
            [str(mutmut), "results", "--all", "true"], cwd=work, capture_output=True, text=True
        ).stdout
    counts: dict[str, int] = {}
    surviving = []
    for line in results.splitlines():
        match = re.match(r"^\s*(?P<name>\S+): (?P<status>.+)$", line)
        if match:
            counts[match["status"]] = counts.get(match["status"], 0) + 1
            if match["status"] in ("survived", "no tests", "timeout", "suspicious"):
                surviving.append(f"  {match['name']}: {match['status']}")
    killed = counts.get("killed", 0)
    tested = killed + sum(counts.get(s, 0) for s in ("survived", "timeout", "suspicious"))
    score = f"{100 * killed / tested:.0f} %" if tested else "n/a"
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return "\n".join(
        [f"{module}: {score} killed ({killed} of {tested} tested; {summary})", *surviving]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(TARGETS))
    parser.add_argument("--budget", type=float, default=1200.0, help="seconds per module")
    arguments = parser.parse_args()
    for module in arguments.modules:
        print(mutate(module, TARGETS[module], arguments.budget), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
