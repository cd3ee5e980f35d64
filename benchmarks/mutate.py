"""Mutation testing of simlab's core modules with mutmut, one module at a time.

Usage: `python benchmarks/mutate.py [--budget SECONDS] [--stride N] [--mutant NAME]
[MODULE ...]` (default: every module in `TARGETS`; `--mutant` reruns named mutants, e.g.
survivors after new tests). Each module is mutated in a scratch copy of the checkout;
mutmut writes the mutants and finds which tests reach each mutated function, then each
reached mutant runs the module's whole selection in a fresh process (mutmut's own workers
are forked, which JAX's thread pools do not survive). Mutants left when a module's time
budget runs out are counted as such. Prints the score per module (killed / tested) and
each surviving mutant with its changed lines, for benchmarks/results/mutation.txt.
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

# module -> the tests that check it: fast, discriminating selections (each mutant runs its
# module's whole selection in a fresh process, so a slow test would eat the budget).
_REFERENCES = "tests/test_references.py::"
_PDE_FORMULAS = [
    _REFERENCES + name
    for name in (
        "test_heat_vector_field_equals_the_stencil_formulas",
        "test_fourth_order_heat_and_wave_equal_the_five_point_stencil",
        "test_wave_vector_field_equals_its_first_order_system",
        "test_advection_diffusion_vector_field_equals_the_formulas",
        "test_burgers_vector_field_equals_the_formulas",
        "test_gray_scott_vector_field_equals_its_equations",
    )
]
_STENCIL_REFERENCES = [
    _REFERENCES + name
    for name in (
        "test_heat_vector_field_equals_the_stencil_formulas",
        "test_upwind_euler_at_courant_number_one_shifts_the_field_by_one_cell",
        "test_variable_diffusion_converges_at_second_order_to_a_manufactured_solution",
    )
]
_SIMULATE = "tests/test_simulate.py::"
TARGETS = {
    "simlab/models/_ode.py": [
        _REFERENCES + "test_ode_vector_fields_equal_their_equations",
        "tests/test_models.py",
        "tests/test_mutants_models.py",
    ],
    "simlab/models/_pde.py": [*_PDE_FORMULAS, "tests/test_pde.py"],
    "simlab/integrate/_lean.py": [
        "tests/test_lean.py",
        _REFERENCES + "test_forced_oscillator_fixed_steps_converge_at_the_solvers_order",
        _REFERENCES + "test_checkpointed_rollout_equals_the_stored_one_for_a_non_square_step_count",
    ],
    "simlab/_simulate.py": [
        *(
            _SIMULATE + name
            for name in (
                "test_exponential_decay_matches_the_analytic_solution",
                "test_harmonic_oscillator_matches_the_analytic_solution",
                "test_robertson_at_t40_matches_hairer_wanner_with_the_automatic_solver",
                "test_lorenz_matches_scipy_dop853",
                "test_default_solver_converges_at_fifth_order",
                "test_a_failing_member_under_vmap_reports_its_status_and_spares_the_others",
                "test_a_failed_solve_raises_with_throw_true",
                "test_overflow_with_fixed_steps_is_reported_as_nonfinite_state",
                "test_stiff_defaults_follow_the_state_size",
            )
        ),
        "tests/test_simulate_bad_input.py",
        "tests/test_options.py::test_simulate_with_options_equals_simulate_with_keywords",
        "tests/test_mutants_simulate.py",
        "tests/test_events.py::test_projectile_lands_at_the_analytic_time",
        "tests/test_events.py::test_non_terminating_event_records_the_first_crossing_and_continues",
        "tests/test_etdrk.py::test_etdrk4_propagates_a_linear_problem_exactly_with_the_stencils_"
        "symbol",
    ],
    "simlab/_fit/_uncertainty.py": [
        _REFERENCES + "test_covariance_and_standard_errors_equal_scipys",
        _REFERENCES + "test_prediction_band_equals_a_finite_difference_delta_method",
        _REFERENCES + "test_fitted_optimum_equals_scipys",
        _REFERENCES + "test_two_data_sets_with_their_own_initial_states_equal_curve_fit_on_the_"
        "stacked_problem",
        _REFERENCES + "test_a_vector_parameter_and_a_grid_state_are_labelled_by_index_and_equal_"
        "curve_fit",
        "tests/test_fit.py::test_covariance_inverts_the_informative_directions_and_flags_the_others",
        "tests/test_fit.py::test_a_direction_is_uninformative_relative_to_the_best_determined_one",
        "tests/test_fit_likelihood.py::test_poisson_mle_and_covariance_equal_scipy",
        "tests/test_fit_likelihood.py::test_negative_binomial_fits_its_dispersion_as_scipy_does",
    ],
    "simlab/grid/_stability.py": [
        "tests/test_grid.py::test_the_advection_symbol_is_the_eigenvalue_of_the_advection_operator",
        "tests/test_grid.py::test_the_laplacian_symbol_is_the_eigenvalue_of_the_laplacian",
        "tests/test_grid.py::test_symbols_are_complex_at_the_precision_of_the_speeds",
        "tests/test_pde.py::test_fixed_step_above_the_stability_limit_is_refused_with_the_limit",
    ],
    "simlab/grid/_operators.py": ["tests/test_grid.py", *_STENCIL_REFERENCES],
    "simlab/grid/_boundary.py": ["tests/test_grid.py", "tests/test_robin.py", *_STENCIL_REFERENCES],
    "simlab/io/_store.py": [
        *(
            "tests/test_store.py::" + name
            for name in (
                "test_xarray_opens_the_store_and_it_equals_the_result",
                "test_rerunning_a_finished_sweep_reads_it_back",
                "test_a_store_of_another_sweep_is_refused_for_each_identity_key",
                "test_a_folder_that_is_not_a_store_and_an_unwritable_path_are_refused",
                "test_a_chunk_without_its_status_is_recomputed",
                "test_a_read_names_every_damaged_chunk_not_only_the_first",
            )
        ),
        "tests/test_faults.py::test_two_different_lambdas_never_share_a_store",
        "tests/test_faults.py::test_a_damaged_chunk_is_recomputed_on_resume_and_named_on_read",
        "tests/test_faults.py::test_edited_store_metadata_is_refused",
    ],
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


def mutant_diff(work: pathlib.Path, name: str) -> list[str]:
    """The changed lines of mutant `name` (`mutmut show`), to judge a survivor by."""
    mutmut = pathlib.Path(sys.executable).with_name("mutmut")
    shown = subprocess.run(
        [str(mutmut), "show", name], cwd=work, capture_output=True, text=True
    ).stdout.splitlines()
    return [
        line.strip() for line in shown if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


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


def mutate(
    module: str, tests: list[str], budget: float, stride: int, only: list[str] | None = None
) -> str:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="simlab-mutate-") as folder:
        work = pathlib.Path(folder)
        scratch_copy(work)
        coverage = generate(work, module, tests, budget)
        names = mutant_names(work)
        names = [name for name in names if name in only] if only else names[::stride]
        outcomes: dict[str, str] = {}
        for name in names:
            if time.monotonic() - start > budget:
                break
            # mutmut credits a module-scoped fixture's work to the first test using it
            # only, so every mutant that some test reaches runs the module's whole selection.
            reached = name.rsplit("__mutmut_", 1)[0] in coverage
            outcomes[name] = run_mutant(work, name, tests, 600) if reached else "no tests"
        diffs = {
            name: mutant_diff(work, name) for name, status in outcomes.items() if status != "killed"
        }
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
    surviving = [
        line
        for name, diff in diffs.items()
        for line in [f"  {name}: {outcomes[name]}", *(f"      {change}" for change in diff)]
    ]
    return "\n".join([header, *surviving])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(TARGETS))
    parser.add_argument("--budget", type=float, default=1200.0, help="seconds per module")
    parser.add_argument("--stride", type=int, default=1, help="run every STRIDE-th mutant")
    parser.add_argument(
        "--mutant", action="append", help="run only this mutant (repeatable; e.g. a survivor)"
    )
    arguments = parser.parse_args()
    for module in arguments.modules:
        outcome = mutate(
            module, TARGETS[module], arguments.budget, arguments.stride, arguments.mutant
        )
        print(outcome, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
