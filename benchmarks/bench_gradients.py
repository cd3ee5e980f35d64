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

The Lorenz sweep also runs written out directly in JAX: a fixed-step Tsit5 loop with the
members along the last axis, once for the state and once for the state with its three
sensitivities, whose vector field is written by hand with no operation to spare. The ratio
of the two is what forward sensitivities cost on their own, the floor of the lean rows.

Forward and gradient are timed in turn round after round (best round kept), as in
bench_ensemble.
"""

import functools as ft

import diffrax as dfx
import jax
import jax.numpy as jnp
from _harness import Row
from bench_ensemble import first_call_seconds, interleaved_best_seconds

import simlab

BATCH = 256
TS = jnp.linspace(0.0, 1.0, 11)
FIXED = dict(adaptive=False, dt0=1e-3)
STEPS_PER_SAVE = round(float(TS[1] - TS[0]) / FIXED["dt0"])


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


def _tsit5_step(field, y, f0, h):
    """One Tsit5 step of `field` from `(y, f0 = field(y))`: the new state and the field there
    (first same as last: the last stage is at the new state)."""
    tableau = dfx.Tsit5.tableau
    stages = [f0]
    for a_row in tableau.a_lower:
        state = y + h * sum(float(a) * k for a, k in zip(a_row, stages, strict=False) if a != 0)
        stages.append(field(state))
    return state, stages[-1]


def _hand_written_solve(field, z0):
    """`z0` at every save time of `TS`, by fixed Tsit5 steps of `field` in a plain loop."""

    def interval(carry, _):
        carry = jax.lax.fori_loop(
            0, STEPS_PER_SAVE, lambda _, c: _tsit5_step(field, *c, FIXED["dt0"]), carry
        )
        return carry, carry[0]

    _, zs = jax.lax.scan(interval, (z0, field(z0)), None, length=TS.shape[0] - 1)
    return jnp.concatenate([z0[None], zs])


def _lorenz_members_last(params, y):
    """The Lorenz field of a batch: `params` (sigma, rho, beta) and `y` (x, y, z), each with
    the members along its last axis."""
    sigma, rho, beta = params
    x, y_, z = y
    return jnp.stack([sigma * (y_ - x), x * (rho - z) - y_, x * y_ - beta * z])


def _lorenz_with_sensitivities(params, state):
    """The field of the Lorenz state and its sensitivities to (sigma, rho, beta), stacked
    as `state[0]` and `state[1:]`: for each parameter, (df/dy) S + df/dparameter."""
    sigma, rho, beta = params
    x, y_, z = state[0]
    rho_minus_z = rho - z
    own_terms = [(y_ - x, 0.0, 0.0), (0.0, x, 0.0), (0.0, 0.0, -z)]  # df/dparameter
    columns = [_lorenz_members_last(params, state[0])]
    for (sx, sy, sz), (dx, dy, dz) in zip(state[1:], own_terms, strict=True):
        columns.append(
            jnp.stack(
                [
                    sigma * (sy - sx) + dx,
                    sx * rho_minus_z - x * sz - sy + dy,
                    sx * y_ + x * sy - beta * sz + dz,
                ]
            )
        )
    return jnp.stack(columns)


def _hand_written_functions():
    """The Lorenz sweep's loss and its forward-mode Jacobian, members last, written out."""

    def residuals(ys, data):
        return ys - jnp.transpose(data, (1, 2, 0))

    def loss(params, y0, data):
        ys = _hand_written_solve(ft.partial(_lorenz_members_last, params.T), y0.T)
        return 0.5 * jnp.sum(residuals(ys, data) ** 2, axis=(0, 1))

    def forward_mode(params, y0, data):
        state0 = jnp.concatenate([y0.T[None], jnp.zeros((3, *y0.T.shape), y0.dtype)])
        states = _hand_written_solve(ft.partial(_lorenz_with_sensitivities, params.T), state0)
        return jnp.einsum("tcm,tkcm->mk", residuals(states[:, 0], data), states[:, 1:])

    return jax.jit(loss), jax.jit(forward_mode)


def _sweep_rows() -> list[Row]:
    key = jax.random.PRNGKey(0)
    params = jnp.array([10.0, 28.0, 8 / 3]) * (1 + 0.05 * jax.random.normal(key, (BATCH, 3)))
    y0 = jnp.ones((BATCH, 3))
    data = jnp.zeros((BATCH, TS.shape[0], 3))
    args = (params, y0, data)
    table = []
    for integrator in ("lean", "diffrax"):
        loss, forward_mode, reverse_mode = _sweep_functions(integrator)
        fns = [loss, forward_mode, reverse_mode]
        if integrator == "lean":
            fns += _hand_written_functions()
        for fn in fns:
            first_call_seconds(fn, args)
        base, fwd, rev, *hand_written = interleaved_best_seconds(fns, args, rounds=9)
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
        if hand_written:
            table.append(_floor_row(fns, args, *hand_written))
    return table


def _floor_row(fns, args, hand_written_solve, hand_written_forward) -> Row:
    """The row of the hand-written loops, after checking that they compute what the lean
    loop does."""
    lean_jacobian, hand_written_jacobian = fns[1](*args), fns[4](*args)
    scale = float(jnp.max(jnp.abs(lean_jacobian)))
    difference = float(jnp.max(jnp.abs(hand_written_jacobian - lean_jacobian))) / scale
    assert difference < 1e-9, f"the hand-written Jacobian differs by {difference:.1e}"
    return Row(
        "sweep grad, 3 params, hand-written sensitivities / solve",
        hand_written_forward / hand_written_solve,
        "",
        f"the floor of the two rows above; solve {hand_written_solve * 1e3:.0f} ms; "
        f"Jacobians agree to {difference:.0e}",
    )


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
