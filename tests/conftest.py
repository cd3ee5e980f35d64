"""Test configuration: float64 (float32 with SIMLAB_TEST_X64=0), strict promotion, four
simulated CPU devices, headless plots."""

import gc
import os
import sys

os.environ.setdefault("MPLBACKEND", "Agg")
# The four simulated devices meet in collectives (ppermute, psum). XLA aborts the whole
# process when one of them waits more than 40 s for the others, which a loaded two-core
# machine running two test workers can reach; it has an hour instead.
os.environ["XLA_FLAGS"] = " ".join(
    (
        os.environ.get("XLA_FLAGS", ""),
        "--xla_cpu_collective_call_warn_stuck_timeout_seconds=600",
        "--xla_cpu_collective_call_terminate_timeout_seconds=3600",
    )
).strip()

import jax  # noqa: E402

# SIMLAB_TEST_X64=0 runs in float32, as on an accelerator: `pytest -m accelerator` then checks
# the tests marked `accelerator`, whose tolerances hold in either precision.
X64 = os.environ.get("SIMLAB_TEST_X64", "1").strip() != "0"
jax.config.update("jax_enable_x64", X64)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
jax.config.update("jax_num_cpu_devices", 4)

import pytest  # noqa: E402
from jax.experimental.compilation_cache import compilation_cache  # noqa: E402


def _restore_precision():
    """Back to the precision chosen above, after a test module switched x64 when it was
    imported (test_order.py turns it on) or a test switched it in-process (the `simlab`
    command turns it on)."""
    if jax.config.jax_enable_x64 != X64:
        jax.config.update("jax_enable_x64", X64)


def pytest_collectstart(collector):
    _restore_precision()  # every test module is imported in the chosen precision


@pytest.fixture(autouse=True)
def _precision_stays_put():
    _restore_precision()  # and every test runs in it


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    # Only where a test drew (an accelerator machine has no matplotlib; MPLBACKEND above
    # keeps it headless where it has).
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


# Each executable XLA compiles holds memory mappings until JAX's caches let it go. A worker
# that compiles for several hundred tests passes Linux's limit on mappings per process
# (vm.max_map_count, 65,530 by default), and XLA aborts the process at its next compile.
# After a test file, a worker above this many mappings clears JAX's caches.
MAPPINGS_BEFORE_CLEARING = 20_000


def memory_mappings() -> int:
    """How many memory mappings this process holds (0 where /proc does not tell)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


@pytest.fixture(scope="module", autouse=True)
def _release_compiled_programs():
    yield
    if memory_mappings() > MAPPINGS_BEFORE_CLEARING:
        jax.clear_caches()
        gc.collect()


_CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")


@pytest.fixture(autouse=True)
def _compilation_cache_stays_off():
    """The `simlab` command turns JAX's persistent compilation cache on for its whole process;
    a test that runs it in-process turns it off again, so the rest of the worker does not
    serialize every executable it compiles."""
    before = {name: getattr(jax.config, name) for name in _CACHE_SETTINGS}
    yield
    if any(getattr(jax.config, name) != value for name, value in before.items()):
        for name, value in before.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Runs in an empty folder, with the `simlab` command's compilation cache kept inside it."""
    from simlab import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(cli.CACHE_ENVIRONMENT, str(tmp_path / "cache"))
    return tmp_path


# The long cases (each 12 s or more on an idle 2-core machine, most of it compiling), which
# `make test` leaves to `make slow`: whole files, and single tests by node id.
LONG_FILES = {"test_experiment_fit.py", "test_flow_assimilation.py"}
LONG_DOCS_PAGES = (
    "fitting",
    "events",
    "hamiltonian",
    "pde",
    "flow",
    "analysis",
    "decomposition",
    "sde",
    "dae",
    "kernels",
    "sweeps",
    "stiff",
    "petab",
)
LONG_TESTS = {
    *(
        f"test_docs.py::test_every_python_block_of_the_page_runs[{page}]"
        for page in LONG_DOCS_PAGES
    ),
    "test_experiment.py::test_lynx_hare_fit_sweep_and_figures",
    "test_readme.py::test_demo_writes_its_figure",
    "test_faults.py::test_fit_curves_keeps_its_legend_and_its_prediction_band_covers_new_data",
    "test_faults.py::test_a_checkpoint_of_another_problem_is_refused",
    "test_faults.py::test_an_underdetermined_fit_warns_instead_of_silent_nan_errors",
    "test_faults.py::test_float32_defaults_solve_the_stiff_test_problems_and_too_tight_rtol_warns",
    "test_hybrid.py::test_hybrid_beats_physics_only_on_data_with_a_missing_term",
    "test_dae.py::test_gradients_match_finite_differences_and_the_exact_derivative",
    "test_dae_analysis.py::"
    "test_fit_recovers_the_circuit_parameters_within_their_confidence_intervals",
    "test_dae_analysis.py::test_dae_pendulum_reaches_the_vertical_with_the_ode_pendulum",
    "test_integrators.py::test_heat_to_steady_state_picks_the_stiff_default_and_says_why",
    "test_integrators.py::test_sweeps_and_fits_solve_heat_as_a_direct_call_would",
    "test_fit_likelihood.py::test_series_at_their_own_times_equal_the_nan_masked_fit",
    "test_stiff.py::test_gradients_against_central_differences[rodas5p]",
    "test_stiff.py::test_gradients_against_central_differences[radau5]",
    "test_fit_profiles.py::test_profile_of_an_unidentifiable_parameter_is_open",
    "test_fit_profiles.py::test_multi_start_finds_the_optimum_a_single_start_misses",
    "test_fit_profiles.py::test_profile_intervals_cover_the_truth_95_percent_of_the_time[poisson]",
    "test_fit.py::test_data_parallel_over_four_devices_equals_one_device",
    "test_fit_multistart.py::test_gathering_unfinished_starts_changes_no_start",
    "test_events.py::test_event_time_gradient_matches_finite_differences[diffrax-reverse]",
    "test_events.py::test_event_time_gradient_matches_finite_differences[diffrax-forward]",
    "test_experiment_analysis.py::test_continuation_finds_the_brusselator_hopf_point",
    "test_lowering.py::test_a_vmapped_adaptive_ensemble_exports",
    "test_sde.py::"
    "test_strong_order_on_geometric_brownian_motion_against_its_exact_path[euler_maruyama-0.5]",
    "test_faults_events.py::"
    "test_every_integrator_puts_the_landing_at_the_same_analytic_time[zero at t0]",
    "test_faults_events.py::"
    "test_a_condition_that_turns_nan_fails_the_solve_instead_of_never_firing[stiff]",
    "test_simulate.py::test_forward_mode_matches_reverse_mode",
    "test_simulate.py::test_gradient_of_a_loss_matches_central_finite_differences[Robertson]",
    "test_faults_cli.py::test_a_damaged_cache_is_named_in_one_line",
    "test_imex.py::test_gradient_through_imex_matches_finite_differences",
    "test_parallel.py::test_two_processes_equal_one_process",
    "test_driven_boundaries.py::test_fit_recovers_a_wall_temperature_history_from_interior_sensors",
    "test_experiment.py::test_heat_inverse_recovers_the_true_diffusivity",
    "test_experiment.py::test_gray_scott_patterns_gallery_and_animation",
    "test_fit_multistart.py::test_sharded_multi_start_equals_unsharded",
    "test_hybrid.py::test_per_sample_gradients_average_to_the_batch_gradient",
    "test_hamiltonian_fit.py::test_planet_masses_from_their_perturbed_orbits",
    "test_events.py::test_event_time_gradient_matches_finite_differences[lean-reverse]",
    "test_flow.py::test_gradients_wrt_viscosity_and_forcing_amplitude_match_central_differences",
    "test_lean.py::test_sensitivities_give_the_derivatives_of_the_loop_in_both_modes[True]",
    "test_walled_flow.py::test_cavity_matches_ghia_at_re_1000",
    "test_petab.py::test_gradient_matches_central_differences",
    "test_sde_adaptive.py::test_reverse_mode_gradient_equals_forward_mode_and_the_exact_derivative",
    # The fast suite keeps the Rodas5P case of each, and Radau5's exact gradient from rest.
    "test_stiff.py::test_fixed_steps_gradients_against_the_exact_derivative[radau5]",
    "test_stiff.py::test_fixed_steps_land_on_uneven_save_times[radau5]",
    # Statuses are checked against each integrator's own cases in the fast suite.
    "test_lean.py::test_status_codes_match_diffrax",
    # The fast suite keeps the profiles of a linear model, which are exact parabolas.
    "test_fit_profiles.py::test_profile_intervals_cover_the_truth_95_percent_of_the_time[gaussian]",
    # The fast suite keeps the ring's forces, bit for bit, and one device's gradients.
    "test_pairs.py::test_gradients_flow_through_the_ring",
    # The fast suite keeps the lean loop's case, the other models' gradients, and the
    # warnings a posterior's sampler gives.
    "test_events.py::test_vmapped_members_stop_at_their_own_events[diffrax]",
    "test_petab_gradients.py::"
    "test_gradient_matches_central_differences_of_a_tight_solve[Crauste-slower-pathogen]",
    "test_faults_fits.py::test_a_posterior_clear_of_nan_samples_without_a_warning",
    # The fast suite keeps ETDRK4's float32 Gray-Scott solve against float64, Radau5's
    # exact gradient from rest, and Rodas5P's vmap over parameters against a loop.
    "test_mixed_precision.py::test_gray_scott_in_float32_follows_the_float64_solve[default]",
    "test_stiff.py::test_a_solve_that_starts_at_rest_has_the_exact_gradient[None-rodas5p]",
    "test_stiff.py::test_vmap_over_parameters_equals_a_loop[radau5]",
    # Half a minute of compiling each; the fast suite checks vmapped Rodas5P gradients on
    # test_integrators.py's closure case.
    "test_stiff.py::test_vmapped_gradients_are_each_members_own[radau5]",
    "test_stiff.py::test_vmapped_gradients_are_each_members_own[rodas5p]",
}


def pytest_collection_modifyitems(config, items):
    collected = set()
    for item in items:
        local_id = item.nodeid.removeprefix("tests/")
        collected.add(local_id)
        if item.path.name in LONG_FILES or local_id in LONG_TESTS:
            item.add_marker(pytest.mark.slow)
    # A renamed test or parameter would silently move a long case back into `make test`.
    files = {local_id.split("::")[0] for local_id in collected}
    stale = sorted(t for t in LONG_TESTS if t.split("::")[0] in files and t not in collected)
    if stale:
        raise pytest.UsageError(f"LONG_TESTS in tests/conftest.py names no collected test: {stale}")
    # The documentation pages are the longest tests (each runs a whole tutorial in a fresh
    # interpreter): started first, they do not leave one worker finishing alone.
    items.sort(key=lambda item: item.path.stem != "test_docs")
