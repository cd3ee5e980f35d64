"""`SolveOptions`: one validated, hashable object for the solve settings everywhere."""

import jax.numpy as jnp
import numpy as np
import pytest

import simlab
from simlab import models

LOTKA_VOLTERRA = models.LotkaVolterra(alpha=0.55, beta=0.028, gamma=0.84, delta=0.026)
Y0 = jnp.array([30.0, 4.0])
TS = jnp.linspace(0.0, 5.0, 6)


def test_options_are_hashable_and_equal_by_value():
    a = simlab.SolveOptions(solver="dopri5", rtol=1e-8)
    b = simlab.SolveOptions(solver="dopri5", rtol=1e-8)
    assert a == b and hash(a) == hash(b)
    assert a.replace(rtol=1e-6) != a
    assert {a: 1}[b] == 1


def test_mapping_form_refuses_unknown_settings():
    options = simlab.SolveOptions.from_mapping({"solver": "tsit5", "max_steps": 100})
    assert options.max_steps == 100
    with pytest.raises(ValueError, match=r"unknown solve settings \['rtoll'\]"):
        simlab.SolveOptions.from_mapping({"rtoll": 1e-3})


def test_record_is_plain_data():
    record = simlab.SolveOptions(solver=simlab.SOLVERS["kvaerno5"].build()).record()
    assert record["solver"] == "kvaerno5"
    assert record["adaptive"] is True


def test_simulate_with_options_equals_simulate_with_keywords():
    options = simlab.SolveOptions(solver="dopri5", rtol=1e-9, atol=1e-11)
    by_options = simlab.simulate(LOTKA_VOLTERRA, Y0, TS, options=options)
    by_keywords = simlab.simulate(LOTKA_VOLTERRA, Y0, TS, solver="dopri5", rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(by_options.ys, by_keywords.ys)
    assert by_options.solver == "dopri5"


def test_sweep_takes_fixed_steps():
    """A sweep can use fixed steps: the options carry `adaptive` like simulate's."""
    result = simlab.sweep(
        LOTKA_VOLTERRA,
        {"alpha": jnp.array([0.5, 0.6])},
        Y0,
        TS,
        observable=None,
        progress=False,
        options=simlab.SolveOptions(solver="rk4", adaptive=False, dt0=0.01),
    )
    member = models.LotkaVolterra(alpha=0.5, beta=0.028, gamma=0.84, delta=0.026)
    direct = simlab.simulate(member, Y0, TS, solver="rk4", adaptive=False, dt0=0.01).ys
    np.testing.assert_allclose(np.asarray(result.observables["trajectory"])[0], direct, rtol=1e-12)


def test_every_registered_solver_states_its_published_orders():
    # Solution order p and the local order q of the error estimate (None: fixed steps only),
    # from each method's paper; Diffrax's Runge-Kutta pairs are controlled with q = p + 1.
    published = {
        "euler": (1, None),
        "heun": (2, 3),
        "midpoint": (2, 3),
        "ralston": (2, 3),
        "bosh3": (3, 4),
        "rk4": (4, None),
        "tsit5": (5, 6),
        "dopri5": (5, 6),
        "dopri8": (8, 9),
        "implicit_euler": (1, 2),
        "kvaerno3": (3, 4),
        "kvaerno4": (4, 5),
        "kvaerno5": (5, 6),
        "rodas5p": (5, 5),  # Steinebach 2023: embedded order 4, local error ~ h^5
        "radau5": (5, 4),  # Hairer & Wanner's RADAU5 estimate: local error ~ h^4
        "kencarp3": (3, 4),
        "kencarp4": (4, 5),
        "kencarp5": (5, 6),
        "etdrk4": (4, None),
        "euler_maruyama": (0.5, None),  # strong orders (Kloeden & Platen; Rössler 2010)
        "milstein": (1.0, None),
        "sra1": (1.5, None),
        "baoab": (1.0, None),  # additive noise; measured in tests/test_langevin.py
        "spark": (0.5, 1.0),  # Foster 2023, general noise; Diffrax's SDE rule q = p + 1/2
        "symplectic_euler": (1, None),  # Hairer, Lubich & Wanner, GNI, Sect. II.4-5
        "verlet": (2, None),
        "forest_ruth": (4, None),  # Forest & Ruth 1990; Yoshida 1990
        "mclachlan4": (4, None),  # McLachlan & Atela 1992
        "yoshida6": (6, None),  # Yoshida 1990, solution A
    }
    stated = {name: (spec.order, spec.error_order) for name, spec in simlab.SOLVERS.items()}
    assert stated == published
