"""Gradients: the cost of value-and-gradient against the forward solve alone.

Two cases, each timed as a ratio (gradient time / forward time) for the lean loop and for
Diffrax on the same problem:

- a sweep with few parameters: 256 Lorenz systems, the loss of each member against data,
  differentiated with respect to its 3 parameters, in forward mode (`jax.jacfwd`: one
  tangent per parameter) and in reverse mode (`jax.value_and_grad`);
- a second sweep the lean loop was not tuned on: 256 Lotka–Volterra systems with
  adaptive Tsit5 steps, differentiated with respect to their 4 rates in both modes;
- a PDE: heat on a 64 x 64 grid, the misfit of the final field differentiated with respect
  to the diffusivity in reverse mode (the case where parameters could be a whole field).

Forward and gradient are timed in turn round after round (best round kept), as in
bench_ensemble.
"""

import jax
import jax.numpy as jnp
from _harness import Row
from bench_ensemble import first_call_seconds, interleaved_best_seconds

import simlab

BATCH = 256
TS = jnp.linspace(0.0, 1.0, 11)
FIXED = dict(adaptive=False, dt0=1e-3)


def _lorenz_loss(params, y0, data, integrator, adjoint=None):
    sigma, rho, beta = params
    model = simlab.models.Lorenz(sigma=sigma, rho=rho, beta=beta)
    trajectory = simlab.simulate(
        model, y0, TS, integrator=integrator, adjoint=adjoint, throw=False, **FIXED
    )
    return 0.5 * jnp.sum((trajectory.ys - data) ** 2)


def _sweep_functions(integrator):
    loss = jax.vmap(lambda p, y0, d: _lorenz_loss(p, y0, d, integrator))

    def forward_mode(p, y0, d):
        def member(p_, y, d_):  # Diffrax's default adjoint is reverse-mode only
            return _lorenz_loss(p_, y, d_, integrator, adjoint="forward")

        return jax.vmap(jax.jacfwd(member))(p, y0, d)

    reverse_mode = jax.vmap(jax.value_and_grad(lambda p, y0, d: _lorenz_loss(p, y0, d, integrator)))
    return jax.jit(loss), jax.jit(forward_mode), jax.jit(reverse_mode)


def _sweep_rows() -> list[Row]:
    key = jax.random.PRNGKey(0)
    params = jnp.array([10.0, 28.0, 8 / 3]) * (1 + 0.05 * jax.random.normal(key, (BATCH, 3)))
    y0 = jnp.ones((BATCH, 3))
    data = jnp.zeros((BATCH, TS.shape[0], 3))
    args = (params, y0, data)
    table = []
    for integrator in ("lean", "diffrax"):
        loss, forward_mode, reverse_mode = _sweep_functions(integrator)
        for fn in (loss, forward_mode, reverse_mode):
            first_call_seconds(fn, args)
        fns = [loss, forward_mode, reverse_mode]
        base, fwd, rev = interleaved_best_seconds(fns, args, rounds=9)
        target = "<= 4" if integrator == "lean" else "before"
        detail = f"{BATCH} Lorenz, 1000 fixed Tsit5 steps; solve {base * 1e3:.0f} ms"
        table.append(
            Row(
                f"sweep grad, 3 params, forward mode / solve ({integrator})",
                fwd / base,
                target,
                detail,
            )
        )
        table.append(
            Row(
                f"sweep grad, 3 params, reverse mode / solve ({integrator})",
                rev / base,
                "<= 4" if integrator == "lean" else "before",
                "jax.value_and_grad",
            )
        )
    return table


LV_TS = jnp.linspace(0.0, 10.0, 21)
LV_RATES = jnp.array([1.1, 0.4, 0.4, 0.1])  # alpha, beta, gamma, delta


def _lotka_volterra_loss(rates, y0, data, adjoint=None):
    alpha, beta, gamma, delta = rates
    model = simlab.models.LotkaVolterra(alpha=alpha, beta=beta, gamma=gamma, delta=delta)
    trajectory = simlab.simulate(
        model, y0, LV_TS, solver="tsit5", rtol=1e-6, atol=1e-8, adjoint=adjoint, throw=False
    )
    return 0.5 * jnp.sum((trajectory.ys - data) ** 2)


def _lotka_volterra_rows() -> list[Row]:
    key = jax.random.PRNGKey(1)
    rates = LV_RATES * (1 + 0.05 * jax.random.normal(key, (BATCH, 4)))
    y0 = jnp.full((BATCH, 2), 10.0)
    data = jnp.zeros((BATCH, LV_TS.shape[0], 2))
    args = (rates, y0, data)
    loss = jax.jit(jax.vmap(_lotka_volterra_loss))
    forward_mode = jax.jit(
        jax.vmap(jax.jacfwd(lambda r, y, d: _lotka_volterra_loss(r, y, d, adjoint="forward")))
    )
    reverse_mode = jax.jit(jax.vmap(jax.value_and_grad(_lotka_volterra_loss)))
    fns = [loss, forward_mode, reverse_mode]
    for fn in fns:
        first_call_seconds(fn, args)
    base, fwd, rev = interleaved_best_seconds(fns, args, rounds=9)
    detail = f"{BATCH} Lotka-Volterra, adaptive Tsit5; solve {base * 1e3:.0f} ms"
    return [
        Row(
            "sweep grad, 4 rates, forward mode / solve (lean, adaptive)", fwd / base, "<= 4", detail
        ),
        Row(
            "sweep grad, 4 rates, reverse mode / solve (lean, adaptive)",
            rev / base,
            "<= 4",
            "jax.value_and_grad",
        ),
    ]


HEAT_TS = jnp.array([0.0, 0.05])  # concrete: the lean loop then has a static step count


def _heat_functions(integrator, grid, u0, target):
    def misfit(diffusivity):
        model = simlab.models.Heat(diffusivity=diffusivity, grid=grid, impl="xla")
        trajectory = simlab.simulate(
            model,
            u0,
            HEAT_TS,
            solver="rk4",
            adaptive=False,
            dt0=2e-4,
            integrator=integrator,
            throw=False,
        )
        return 0.5 * jnp.sum((trajectory.ys[-1] - target) ** 2)

    return jax.jit(misfit), jax.jit(jax.value_and_grad(misfit))


def _heat_rows() -> list[Row]:
    grid = simlab.Grid((64, 64), extent=1.0, boundary="periodic")
    x, y = grid.mesh()
    u0 = jnp.sin(2 * jnp.pi * x) * jnp.cos(4 * jnp.pi * y)
    target = 0.5 * u0
    table = []
    for integrator in ("lean", "diffrax"):
        misfit, value_and_grad = _heat_functions(integrator, grid, u0, target)
        diffusivity = jnp.asarray(0.01)
        first_call_seconds(misfit, (diffusivity,))
        first_call_seconds(value_and_grad, (diffusivity,))
        base, rev = interleaved_best_seconds([misfit, value_and_grad], (diffusivity,), rounds=5)
        table.append(
            Row(
                f"PDE grad, reverse mode / solve ({integrator})",
                rev / base,
                "<= 4" if integrator == "lean" else "before",
                f"heat 64x64, 250 RK4 steps; solve {base * 1e3:.0f} ms",
            )
        )
    return table


def rows() -> list[Row]:
    return _sweep_rows() + _lotka_volterra_rows() + _heat_rows()
