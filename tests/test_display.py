"""Models and results show their values: as text in a terminal, as an HTML table in a notebook;
under jit, vmap and grad (tracers) they keep Equinox's tree view."""

import html
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import LOTKA_VOLTERRA
from jaxtyping import Array, Float

import simlab
from simlab import _display as display
from simlab._results import RESULTS
from simlab.models import AbstractODEModel, parameter

Y0 = jnp.array([30.0, 4.0])
TS = jnp.linspace(0.0, 4.0, 5)


class Decay(AbstractODEModel):
    """dx/dt = -rate x, with a label (a static field) that a notebook must escape."""

    rate: Float[Array, ""] = parameter(lower=0.0, unit="1/s")
    label: str = eqx.field(static=True, default="")
    state_names: ClassVar[tuple[str, ...]] = ("x",)

    def __call__(self, t, y, args):
        return -self.rate * y


class Riccati(AbstractODEModel):
    r"""$\dot y = r y^2$ from $y(0) = 1$: infinite at $t = 1/r$, so it fails for $r > 1$."""

    rate: Float[Array, ""] = parameter(lower=0.0)
    state_names: ClassVar[tuple[str, ...]] = ("y",)

    def __call__(self, t, y, args):
        return self.rate * y**2


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.55, "0.55"),
        (3e7, "3e7"),
        (1.5e-6, "1.5e-6"),
        (2 / 3, "0.666667"),
        (np.float32(0.028), "0.028"),
        (np.int32(12), "12"),
        (True, "True"),
        (float("nan"), "nan"),
        (-float("inf"), "-inf"),
    ],
)
def test_numbers_are_short(value, text):
    assert display.number(value) == text


def test_arrays_show_their_values_and_large_ones_are_abbreviated():
    assert display.array(jnp.asarray(0.25)) == "0.25"
    assert display.array(np.array([30.0, 4.0])) == "[30, 4]"
    assert display.array(np.eye(2)) == "[[1, 0], [0, 1]]"
    assert display.array(np.arange(100.0)) == "[0, 1, 2, ..., 97, 98, 99] shape (100,)"
    assert display.array(np.zeros((64, 32))).endswith("shape (64, 32)")


def test_a_model_shows_its_parameters_with_values_and_units():
    text = repr(LOTKA_VOLTERRA)
    assert text.startswith("LotkaVolterra(")
    for name, value in LOTKA_VOLTERRA.parameters().items():
        unit = LOTKA_VOLTERRA.parameter_units()[name]
        assert f"{name}={display.number(value)} [{unit}]" in text
    assert "alpha=0.55" in text and "f64[]" not in text and "f32[]" not in text
    assert str(LOTKA_VOLTERRA) == text
    # A model without units and settings at their defaults fits on one line.
    assert repr(Decay(rate=0.5)) == "Decay(rate=0.5 [1/s])"
    assert repr(Decay(rate=0.5, label="fast")) == "Decay(rate=0.5 [1/s], label='fast')"


def test_array_parameters_and_grids_are_shown_compactly():
    diffusivity = jnp.linspace(0.1, 0.2, 16 * 16).reshape(16, 16)
    grid = simlab.Grid((16, 16), extent=2.0, boundary=["periodic", "dirichlet"])
    text = repr(simlab.models.Heat(diffusivity=diffusivity, grid=grid))
    assert f"diffusivity=[{display.number(diffusivity[0, 0])}, " in text
    assert "shape (16, 16) [length²/time]" in text
    assert "grid=Grid(shape=(16, 16), extent=(2, 2), boundary=['periodic', Dirichlet(" in text
    masses = jnp.array([1.0, 2e-3, 3e-4])
    nbody = simlab.models.NBody(masses=masses, G=1.0, dimension=2)
    assert "masses=[1, 0.002, 0.0003] [mass]" in repr(nbody)
    assert "dimension=2" in repr(nbody)  # a setting away from its default
    assert "dimension" not in repr(simlab.models.NBody(masses=masses, G=1.0))


def test_a_traced_model_keeps_the_tree_view_under_jit_vmap_and_grad():
    shown = []

    def loss(alpha):
        model = simlab.models.LotkaVolterra(alpha=alpha, beta=0.028, gamma=0.84, delta=0.026)
        shown.append((repr(model), model._repr_html_()))
        return model.alpha * 2

    jax.jit(loss)(0.55)
    jax.vmap(loss)(jnp.array([0.5, 0.6]))
    jax.grad(loss)(0.55)
    assert len(shown) == 3
    for text, page in shown:
        assert text.startswith("LotkaVolterra(alpha=f") and "[]" in text
        assert page.startswith("<pre>") and html.escape(text) in page


@pytest.fixture(scope="module")
def trajectory():
    return simlab.simulate(LOTKA_VOLTERRA, Y0, TS)


def test_a_trajectory_shows_status_solver_steps_span_and_final_state(trajectory):
    text = repr(trajectory)
    final = trajectory.final_state()
    stats = trajectory.stats
    assert text.startswith("Trajectory\n")
    assert "status       success" in text
    assert f"solver       {trajectory.solver} ({trajectory.integrator} integrator)" in text
    steps = f"{int(stats['num_steps'])} ({int(stats['num_accepted_steps'])} accepted, "
    assert steps + f"{int(stats['num_rejected_steps'])} rejected)" in text
    assert "time span    0 to 4, 5 save times" in text
    assert f"prey={display.number(final[0])}, predator={display.number(final[1])}" in text
    page = trajectory._repr_html_()
    assert page.startswith("<table") and "<script" not in page
    assert ">success<" in page and f">prey={display.number(final[0])}, " in page


def test_a_failed_trajectory_says_that_it_failed_and_why():
    failed = simlab.simulate(LOTKA_VOLTERRA, Y0, TS, max_steps=2, throw=False)
    assert not bool(failed.succeeded)
    text = " ".join(repr(failed).split())  # the message wraps over lines
    assert "status failed (max_steps_reached): " + RESULTS[RESULTS.max_steps_reached] in text
    assert f"steps {int(failed.stats['num_steps'])} (" in text
    assert html.escape(RESULTS[RESULTS.max_steps_reached]) in failed._repr_html_()


def test_a_batch_of_trajectories_counts_its_failures_and_a_traced_one_keeps_the_tree_view():
    shown = []

    def solve(rate):
        solution = simlab.simulate(
            Riccati(rate=rate), jnp.ones(1), jnp.array([0.0, 1.0]), max_steps=64, throw=False
        )
        shown.append(repr(solution))
        return solution

    batch = jax.jit(jax.vmap(solve))(jnp.array([0.5, 0.8, 1.5]))
    assert shown and shown[0].startswith("Trajectory(") and "ts=f" in shown[0]
    text = repr(batch)
    assert "members      3" in text and "status       1 of 3 failed" in text
    final = batch.final_state()[:, 0]
    assert f"y=[{', '.join(display.number(y) for y in final)}]" in text


@pytest.fixture(scope="module")
def sweep_result():
    return simlab.sweep(
        Riccati(rate=1.0),
        {"rate": np.array([0.5, 0.8, 1.5])},  # blows up before t = 1 for rate 1.5
        jnp.ones(1),
        jnp.array([0.0, 1.0]),
        max_steps=64,
        observable=lambda trajectory: {"final": trajectory.ys[-1]},
        progress=False,
    )


def test_a_sweep_shows_members_failures_with_reasons_and_observables(sweep_result):
    assert sweep_result.num_failed == 1
    [failure] = sweep_result.failures()
    reason = RESULTS[getattr(RESULTS, failure["status"])].split(". ")[0].rstrip(".")
    text = repr(sweep_result)
    assert text.startswith("SweepResult\n")
    assert "members      3, a grid over rate (3)" in text
    assert "swept        rate: [0.5, 0.8, 1.5]" in text
    assert "failed       1 of 3" in text
    assert f"1 {failure['status']}: {reason}." in " ".join(text.split())
    assert "observables  final (member: 3, final_dim_0: 1)" in text
    page = sweep_result._repr_html_()
    assert page.startswith("<table") and "<script" not in page
    assert ">1 of 3<" in page and f"1 {failure['status']}: " in page


@pytest.fixture(scope="module")
def fit_result():
    ts = jnp.linspace(0.0, 2.0, 10)
    observations = (jnp.exp(-0.7 * ts) * (1 + 0.01 * jnp.sin(7 * ts)))[:, None]
    return simlab.fit(Decay(rate=0.3), ts, observations, y0=jnp.ones(1), params=["rate"])


def test_a_fit_shows_estimates_errors_intervals_loss_and_convergence(fit_result):
    estimate, error = fit_result.params["rate"], fit_result.stderr["rate"]
    low, high = float(estimate) - 1.96 * float(error), float(estimate) + 1.96 * float(error)
    text = repr(fit_result)
    assert text.startswith("FitResult\n")
    header = next(line for line in text.splitlines() if "estimate" in line).split()
    assert header == ["parameter", "estimate", "std.", "error", "95%", "interval", "unit"]
    row = next(line for line in text.splitlines() if line.startswith("  rate ")).split()
    assert row[:3] == ["rate", display.number(estimate), display.number(error)]
    assert row[-1] == "1/s"
    np.testing.assert_allclose([float(row[3]), float(row[5])], [low, high], rtol=1e-3)
    assert "status           converged" in text
    assert f"steps            {int(fit_result.num_steps)} (at most " in text
    assert f"loss             {display.number(fit_result.loss)}" in text
    page = fit_result._repr_html_()
    assert page.startswith("<table") and "<th" in page and "<script" not in page
    assert f">{display.number(estimate)}<" in page and f">{display.number(error)}<" in page
    assert ">converged<" in page


def test_html_escapes_what_it_shows():
    page = Decay(rate=0.5, label="<b>bold</b>")._repr_html_()
    assert page.startswith("<table") and "<b>" not in page
    assert "&#x27;&lt;b&gt;bold&lt;/b&gt;&#x27;" in page and ">0.5<" in page and ">1/s<" in page
