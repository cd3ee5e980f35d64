"""The kernel integrator: a whole batch of fixed-step explicit Runge–Kutta solves in one
Pallas kernel.

The lean loop (`simlab.integrate._lean`) runs a `jax.vmap` batch as array operations that
XLA launches step by step, each reading and writing the batch's states in memory. Here a
batch runs as one `pallas_call`: every program takes a block of members laid along the
vector lanes, each component of their state a `(sublanes, 128)` tile, and keeps the state
in registers through all the steps, writing it out at the save times only (as the
hand-written Lorenz kernel of `benchmarks/gpu_ensemble.py` does). The member's vector
field is evaluated on the tiles by `jax.vmap` over the tile's two axes, so fields made of
elementwise arithmetic and stacking or indexing of state components run unchanged.

`jax.custom_batching.custom_vmap` gives the kernel the whole batch: its rule lays a new
batch axis along the members (nested `jax.vmap`s multiply them), broadcasting what does
not vary to every member; an unbatched solve is a batch of one. The batch is padded to
whole blocks with copies of its last member.

On a TPU the kernel compiles with Mosaic, with `TPU_TILING`'s (8, 128) tiles; elsewhere
it runs in the Pallas interpreter (`simlab.kernels._pallas.Launch.target`), chosen for
the platform the program is lowered for, so a program traced on a CPU exports for a TPU.
The kernel takes fixed steps whose number per save interval is known when the solve is
traced, or adaptive steps (`_kernel_adaptive`), and no events. A kernel has no transpose,
so with `adjoint=None` a differentiated solve takes the lean loop's derivatives (in the
modes it has them, `with_lean_derivatives`); with `adjoint="forward"`, forward mode
(`jax.jvp`, `jax.jacfwd`) of fixed steps runs the kernel on the state and its tangents
together, the forward sensitivities of the same steps: the directions of a `jax.jacfwd` in
one launch, which steps the solve too.

`integrator="auto"` takes the kernel on a TPU where it can (65,536 adaptive Van der Pol
solves took 3.5 ms there against the lean loop's 25 ms): the member's vector field must
be made of primitives Mosaic compiles there (`KERNEL_PRIMITIVES`), as checked on its
traced program before the solve.
"""

import functools as ft
import math
from typing import Any

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.experimental import pallas as pl
from jaxtyping import Array

from .._results import RESULTS
from ..kernels._pallas import Launch
from ..kernels._tiling import TPU_TILING
from ._brownian import (
    Increment,
    hashed_bits,
    pairs,
    path_words,
    standard_normal,
    threefry,
)
from ._closures import with_closed_over_tracers_held
from ._interface import AbstractIntegrator, Problem, Solution
from ._kernel_adaptive import AdaptiveEnsemble, first_step, runge_kutta_on_tiles, split_outcome
from ._lean import LeanIntegrator, _field, _status
from ._sde import AbstractSDESolver, SDEIntegrator, noise_shape
from ._solvers import error_order, is_lean_solver
from ._tiles import CALLS, STRUCTURAL, on_tiles, primitives

STATE_LIMIT = 64  # state components up to which a member's state stays in registers
INTERPRETED_SUBLANES = 1  # rows of 128 members per program in the Pallas interpreter
VECTOR_REGISTERS_A_STATE = 8  # see `_tpu_sublanes`


class _Ensemble(eqx.Module):
    """What a kernel launch is built from, all static: the member's vector field `field(t,
    y, leaves)` on a flat state, the tableau and the steps per save interval."""

    field: Any
    tableau: Any
    steps: int

    def saved_components(self, size: int) -> int:
        return size

    def program(self, *refs, num_saves: int):
        return _kernel(*refs, ensemble=self, num_saves=num_saves)


def _step(field, tableau, t, y, f0, h):
    """One explicit Runge–Kutta step on tiles: the new state and f there. The lean loop's
    step (`_lean._runge_kutta_step`) also estimates the error and stores stage states for
    XLA:CPU, neither of which a fixed step in registers needs."""
    return runge_kutta_on_tiles(field, tableau, t, y, f0, h)[:2]


def _kernel(*refs, ensemble: _Ensemble, num_saves: int):
    """One program: the members of one block through every step. `refs` are the save
    times `(num_saves, S, 128)`, the initial state `(n, S, 128)`, the leaves
    `(*shape, S, 128)`, and last the saved states `(num_saves, n, S, 128)`."""
    ts_ref, y0_ref, *leaf_refs, ys_ref = refs
    leaves = [ref[...] for ref in leaf_refs]
    y0 = y0_ref[...]
    tiled = on_tiles(ensemble.field, y0[0], y0, leaves)

    def field(t, y):
        return tiled(t, y, leaves)

    def interval(k, carry):
        t_start, t_end = ts_ref[k], ts_ref[k + 1]
        h = (t_end - t_start) / ensemble.steps

        def step(i, carry):
            t = t_start + i.astype(h.dtype) * h
            return _step(field, ensemble.tableau, t, *carry, h)

        carry = lax.fori_loop(0, ensemble.steps, step, carry)
        ys_ref[k + 1] = carry[0]
        return carry

    ys_ref[0] = y0
    lax.fori_loop(0, num_saves - 1, interval, (y0, field(ts_ref[0], y0)))


class _StochasticEnsemble(eqx.Module):
    """A launch of fixed-step stochastic solves, all static: the member's step `step(t, y,
    h, normals, leaves)` on a flat state, given the standard normals of its noise (`draws`
    of them: the increments', then the Lévy area's), and the steps per save interval."""

    step: Any
    steps: int
    draws: int
    size: int  # the noise's: `draws` is twice that with the Lévy area

    def saved_components(self, size: int) -> int:
        return size

    def program(self, *refs, num_saves: int):
        return _stochastic_kernel(*refs, ensemble=self, num_saves=num_saves)


def _stochastic_kernel(*refs, ensemble: _StochasticEnsemble, num_saves: int):
    """One program of stochastic solves: as `_kernel`, with each member's two key words
    `(2, S, 128)` after the initial state, its normals hashed from them at every step as the
    lean loop draws them (`_brownian.hashed_bits`)."""
    ts_ref, y0_ref, words_ref, *leaf_refs, ys_ref = refs
    leaves = [ref[...] for ref in leaf_refs]
    y0, words = y0_ref[...], (words_ref[0], words_ref[1])
    dtype = y0.dtype
    normals_like = jax.ShapeDtypeStruct((ensemble.draws, *y0.shape[1:]), dtype)
    tiled = on_tiles(ensemble.step, y0[0], y0, y0[0], normals_like, leaves)

    def step_of(t, y, h, normals):
        return tiled(t, y, h, normals, leaves)

    count = pairs(ensemble.size, dtype)

    def normals_at(n):
        bits = []
        for first in (0, count)[: ensemble.draws // ensemble.size]:  # dW's, then H's
            hashed = [hashed_bits(words, n, first + p, dtype, hash=threefry) for p in range(count)]
            words_first = [word for word_of in zip(*hashed, strict=True) for word in word_of]
            bits += words_first[: ensemble.size]  # word 0 of every hash, then word 1
        return standard_normal(jnp.stack(bits), dtype)

    def interval(k, y):
        t_start, t_end = ts_ref[k], ts_ref[k + 1]
        h = (t_end - t_start) / ensemble.steps

        def step(i, y):
            t = t_start + i.astype(h.dtype) * h
            return step_of(t, y, h, normals_at(k * ensemble.steps + i))

        y = lax.fori_loop(0, ensemble.steps, step, y)
        ys_ref[k + 1] = y
        return y

    ys_ref[0] = y0
    lax.fori_loop(0, num_saves - 1, interval, y0)


AnyEnsemble = _Ensemble | _StochasticEnsemble | AdaptiveEnsemble


def _tpu_sublanes(state_size: int, num_members: int) -> int:
    """Rows of 128 members a program takes on a TPU: about `VECTOR_REGISTERS_A_STATE` vector
    registers of (8, 128) members a state, whose independent arithmetic the chip overlaps
    (measured on a TPU v5e, 2^20 members: Lorenz's three components 53 ms at 8 rows, 36 ms
    at 16; one Ornstein–Uhlenbeck component, its normal hashed each step, 160 ms at 8 rows,
    35 ms at 64), and no more rows than the members fill."""
    rows = TPU_TILING[0]
    per_state = max(1, min(VECTOR_REGISTERS_A_STATE, VECTOR_REGISTERS_A_STATE // state_size))
    filled = -(-num_members // (rows * TPU_TILING[1]))
    return rows * min(per_state, filled)


def _launch(ensemble: AnyEnsemble, inputs: list[Array], *, platform: str) -> Array:
    """The kernel over `inputs` (save times, flat initial state, leaves), each with the
    members along its last axis, as laid out for `platform`; the saved states
    `(num_saves, n, members)` (with what else the ensemble saves after the `n` components)."""
    interpret = Launch(block_shape=None, interpret=None).target(platform) != "tpu"
    lanes = TPU_TILING[1]
    num_members = inputs[0].shape[-1]
    sublanes = INTERPRETED_SUBLANES if interpret else _tpu_sublanes(inputs[1].shape[0], num_members)
    block = sublanes * lanes
    padded = -(-num_members // block) * block
    tiles = [
        jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, padded - num_members)], mode="edge").reshape(
            *x.shape[:-1], padded // lanes, lanes
        )
        for x in inputs
    ]
    num_saves, n = inputs[0].shape[0], ensemble.saved_components(inputs[1].shape[0])

    def spec(shape):
        zeros = (0,) * len(shape)
        return pl.BlockSpec((*shape, sublanes, lanes), lambda i: (*zeros, i, 0))

    dtype = inputs[1].dtype
    ys = pl.pallas_call(
        ft.partial(ensemble.program, num_saves=num_saves),
        out_shape=jax.ShapeDtypeStruct((num_saves, n, padded // lanes, lanes), dtype),
        grid=(padded // block,),
        in_specs=[spec(x.shape[:-1]) for x in inputs],
        out_specs=spec((num_saves, n)),
        interpret=interpret,
    )(*tiles)
    return ys.reshape(num_saves, n, padded)[..., :num_members]


def _run(ensemble: AnyEnsemble, inputs: list[Array]) -> Array:
    """`_launch` for the platform the program is lowered for."""
    return lax.platform_dependent(
        inputs,
        tpu=lambda inputs: _launch(ensemble, inputs, platform="tpu"),
        default=lambda inputs: _launch(ensemble, inputs, platform="cpu"),
    )


def _batched(ensemble: AnyEnsemble):
    """The ensemble solve over inputs with their members along the last axis, whose
    `jax.vmap` lays the new batch axis along the members too (one launch for all)."""

    @jax.custom_batching.custom_vmap
    def solve(inputs):
        return _run(ensemble, inputs)

    @solve.def_vmap
    def rule(axis_size, in_batched, inputs):
        (batched,) = in_batched
        merged = []
        for x, b in zip(inputs, batched, strict=True):
            # Members of the new axis outermost: (..., new, members) -> (..., new * members).
            x = (
                jnp.moveaxis(x, 0, -2)
                if b
                else jnp.broadcast_to(x[..., None, :], (*x.shape[:-1], axis_size, x.shape[-1]))
            )
            merged.append(x.reshape(*x.shape[:-2], -1))
        ys = solve(merged)
        ys = ys.reshape(*ys.shape[:-1], axis_size, -1)
        return jnp.moveaxis(ys, -2, 0), True

    return solve


def _one_member(ensemble: AnyEnsemble, inputs: list[Array]) -> Array:
    """The saved states of one solve: a batch of one member (`jax.vmap` widens it)."""
    members_last = [jnp.broadcast_to(x[..., None], (*jnp.shape(x), 1)) for x in inputs]
    return _batched(ensemble)(members_last)[..., 0]


def _with_tangents(field: Any, size: int, moving: tuple[bool, ...], count: int) -> Any:
    """The field of the state and `count` tangents stacked (`(1 + count) * size`
    components): `field` and its directional derivatives along each tangent of the state and
    of the leaves that have one (`moving`; their tangents come after the leaves, each with a
    leading axis of `count`). Runge–Kutta steps of this field are the derivatives of the
    steps of `field` (the forward sensitivities of the discrete solve), so they run in the
    kernel; the field is linearised once for all tangents."""

    def field_and_tangents(t, state, leaves):
        leaves, given = leaves[: len(moving)], leaves[len(moving) :]
        moved = [x for x, m in zip(leaves, moving, strict=True) if m]

        def of_moved(y, moved):
            values = iter(moved)
            pairs = zip(leaves, moving, strict=True)
            return field(t, y, [next(values) if m else x for x, m in pairs])

        f, linear = jax.linearize(of_moved, state[:size], moved)
        components = [f[i] for i in range(size)]
        for j in range(count):
            f_dot = linear(state[(1 + j) * size : (2 + j) * size], [x[j] for x in given])
            components += [f_dot[i] for i in range(size)]
        return jnp.stack(components)

    return field_and_tangents


def _solve_directions(ensemble: _Ensemble, moving, inputs, tangents, count: int):
    """The saved states and their derivatives along `count` directions (`tangents`: the
    initial state's `(count, size)` and the moving leaves', each with a leading `count`), in
    one launch of the kernel on the state and all its tangents."""
    ts, y0, *leaves = inputs
    y0_dot, *moved = tangents
    size = y0.shape[0]
    augmented = _Ensemble(
        _with_tangents(ensemble.field, size, moving, count), ensemble.tableau, ensemble.steps
    )
    states = jnp.concatenate([y0, y0_dot.reshape(-1)])
    out = _one_member(augmented, [ts, states, *leaves, *moved])
    return out[:, :size], jnp.moveaxis(out[:, size:].reshape(-1, count, size), 1, 0)


def _tangent_solver(ensemble: _Ensemble, moving: tuple[bool, ...]):
    """`(inputs, tangents) -> (ys, ys_dot)` along one direction, whose `jax.vmap` over
    directions alone (as `jax.jacfwd` makes) runs them all in one launch beside one solve."""

    def one_direction(inputs, tangents):
        _, ys_dot = _solve_directions(ensemble, moving, inputs, [t[None] for t in tangents], 1)
        # The solve apart, so that it is not batched where the tangents alone are.
        return _one_member(ensemble, inputs), ys_dot[0]

    @jax.custom_batching.custom_vmap
    def solve(inputs, tangents):
        return one_direction(inputs, tangents)

    @solve.def_vmap
    def rule(axis_size, in_batched, inputs, tangents):
        inputs_batched, tangents_batched = in_batched
        if not any(inputs_batched):  # a batch of directions at the same point
            tangents = [
                t if b else jnp.broadcast_to(t, (axis_size, *t.shape))
                for t, b in zip(tangents, tangents_batched, strict=True)
            ]
            return _solve_directions(ensemble, moving, inputs, tangents, axis_size), (False, True)
        in_axes = (
            [0 if b else None for b in inputs_batched],
            [0 if b else None for b in tangents_batched],
        )
        return jax.vmap(one_direction, in_axes=in_axes)(inputs, tangents), (True, True)

    return solve


def _solve_jvp(ensemble: _Ensemble, primals, tangents):
    """Forward mode through a solve: the kernel on the state and its tangents together."""
    (inputs,), (tangents,) = primals, tangents
    # The save times are concrete (the solve's step count is known), so have no tangent.
    (_, y0, *_), (_, y0_dot, *leaf_tangents) = inputs, tangents
    if isinstance(y0_dot, SymbolicZero):
        y0_dot = jnp.zeros_like(y0)
    moving = tuple(not isinstance(t, SymbolicZero) for t in leaf_tangents)
    moved = [t for t, m in zip(leaf_tangents, moving, strict=True) if m]
    return _tangent_solver(ensemble, moving)(inputs, [y0_dot, *moved])


def _member_program(function: Any, example: tuple, model_and_args: Any):
    """`function(*inputs, model, args)` of flat arrays like `example` as `program(*inputs,
    leaves)`, its `leaves` (the arrays of `model` and `args`, the traced values a plain
    function closes over and the arrays it makes) and its program (a jaxpr)."""
    params, static = eqx.partition(model_and_args, eqx.is_array)

    def member(*inputs_and_params):
        *inputs, p = inputs_and_params
        return function(*inputs, *eqx.combine(p, static))

    member, _ = with_closed_over_tracers_held(member, *example, params)
    member_arrays, member_static = eqx.partition(member, eqx.is_array)
    leaves, tree = jax.tree.flatten((params, member_arrays))

    def program(*inputs_and_leaves):
        *inputs, leaves = inputs_and_leaves
        p, arrays = jax.tree.unflatten(tree, leaves)
        return eqx.combine(arrays, member_static)(*inputs, p)

    # Arrays the member makes or closes over become leaves too: a TPU kernel captures none.
    shapes = [jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in leaves]
    inputs = [jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in example]
    traced = jax.make_jaxpr(program)(*inputs, shapes)
    count = len(leaves)

    def program_of_leaves(*inputs_and_leaves):
        *inputs, leaves = inputs_and_leaves
        (out,) = jax.core.eval_jaxpr(traced.jaxpr, leaves[count:], *inputs, *leaves[:count])
        return out

    return program_of_leaves, [*leaves, *map(jnp.asarray, traced.consts)], traced.jaxpr


def _member_field(model: Any, args: Any, ts: Array, y0: Array) -> tuple[Any, list[Array], Any]:
    """The member's vector field `field(t, y, leaves)` on a flat state, its leaves and its
    program (`_member_program`)."""

    def member_field(t, y, model, args):
        return _field(model, args, t, y.reshape(y0.shape)).reshape(-1)

    return _member_program(member_field, (ts[0], y0.reshape(-1)), (model, args))


def kernel_solve(model: Any, tableau: Any, ts: Array, y0: Array, args: Any, steps: int) -> Array:
    """The states at `ts` of one solve (a member of a batch under `jax.vmap`) in `steps`
    fixed steps of `tableau` per save interval."""
    field, leaves, _ = _member_field(model, args, ts, y0)
    ensemble = _Ensemble(field, tableau, steps)
    inputs = [ts, y0.reshape(-1), *leaves]

    @jax.custom_jvp
    def solve(inputs):
        return _one_member(ensemble, inputs)

    solve.defjvp(ft.partial(_solve_jvp, ensemble), symbolic_zeros=True)
    return solve(inputs).reshape(ts.shape[0], *y0.shape)


def _member_sde_step(model: Any, solver: Any, ts: Array, y0: Array, args: Any):
    """The member's stochastic step `step(t, y, h, normals, leaves)` on a flat state, given
    its `draws` standard normals (the increments', then the Lévy area's, as
    `_brownian.block_draws` numbers them), its leaves, its program and `draws`."""
    shape = noise_shape(model, y0, args)
    size = math.prod(shape)
    draws = 2 * size if solver.uses_area else size

    def member_step(t, y, h, normals, model, args):
        dW = jnp.sqrt(h) * normals[:size].reshape(shape)
        H = jnp.sqrt(h / 12) * normals[size:].reshape(shape) if solver.uses_area else None
        y1 = solver.step(model, t, y.reshape(y0.shape), h, Increment(dW, H), args)
        return y1.reshape(-1)

    example = (ts[0], y0.reshape(-1), ts[0], jnp.zeros(draws, y0.dtype))
    return (*_member_program(member_step, example, (model, args)), draws)


def kernel_sde_solve(
    model: Any, solver: Any, ts: Array, y0: Array, args: Any, key: Array, steps: int
) -> Array:
    """The states at `ts` of one stochastic solve with `key` (a member of a batch under
    `jax.vmap`) in `steps` fixed steps of `solver` per save interval, on the Brownian path
    the lean loop draws from `key`."""
    step, leaves, _, draws = _member_sde_step(model, solver, ts, y0, args)
    ensemble = _StochasticEnsemble(step, steps, draws, math.prod(noise_shape(model, y0, args)))
    ys = _one_member(ensemble, [ts, y0.reshape(-1), path_words(key), *leaves])
    return ys.reshape(ts.shape[0], *y0.shape)


def adaptive_kernel_solve(
    model: Any,
    solver: Any,
    ts: Array,
    y0: Array,
    args: Any,
    dt0: Array | None,
    rtol: Array,
    atol: Array,
    max_steps: int,
) -> tuple[Array, dict[str, Array]]:
    """The states at `ts` of one adaptive solve (a member of a batch under `jax.vmap`), the
    lean loop's steps taken in the kernel, and its outcome (`_kernel_adaptive.OUTCOME`)."""
    field, leaves, _ = _member_field(model, args, ts, y0)
    ensemble = AdaptiveEnsemble(field, solver.tableau, error_order(solver), max_steps)
    h0 = first_step(model, args, solver, ts, y0, dt0, rtol, atol)
    controls = jnp.stack([h0, rtol, atol]).astype(ts.dtype)
    out = _one_member(ensemble, [ts, y0.reshape(-1), controls, *leaves])
    ys, outcome = split_outcome(out, y0.size)
    return ys.reshape(ts.shape[0], *y0.shape), outcome


# The elementwise primitives that Mosaic compiles on tiles on a TPU v5e, each checked there
# on a field that uses it (`benchmarks/tpu_probes.py`, section `fields`, kept in
# `benchmarks/results/tpu-fields.txt`); with the primitives that only move, pick, combine
# or sum elements (`_tiles.STRUCTURAL`), what `integrator="auto"` takes the kernel for.
# The lean loop keeps the others: `expm1` is not lowered, for one.
KERNEL_PRIMITIVES = (
    frozenset(
        "abs add add_any and convert_element_type cos div eq erf exp floor ge gt "
        "integer_pow le log log1p logistic lt max min mul ne neg pow rsqrt select_n sign "
        "sin sqrt square sub tanh".split()
    )
    | STRUCTURAL
)


def runs_in_kernel(problem: Problem) -> bool:
    """Whether the member's vector field (or stochastic step) uses only `KERNEL_PRIMITIVES`
    (and calls)."""
    model, ts, y0, args = problem.model, problem.ts, problem.y0, problem.args
    if problem.key is None:
        jaxpr = _member_field(model, args, ts, y0)[2]
    else:
        jaxpr = _member_sde_step(model, problem.solver, ts, y0, args)[2]
    return primitives(jaxpr) <= KERNEL_PRIMITIVES | CALLS


def with_lean_derivatives(solve: Any, lean_solve: Any, problem: Problem) -> tuple[Array, Any]:
    """`solve(problem)`, the states and what else the kernel reports (`(ys, extras)`), the
    states' derivatives in both modes those of `lean_solve(problem)` (the lean loop's,
    taken through its own rules): the kernel has no transpose. `extras` have none."""
    # Every array an input, keys and integers too (their tangents are symbolic zeros): a
    # custom derivative must not close over the values a `jax.vmap` batches.
    arrays, static = eqx.partition(problem, eqx.is_array)
    if problem.adaptive and problem.adjoint is None:
        # The lean loop differentiates these in reverse mode alone (`_lean._solve_reverse`).
        return _with_lean_vjp(solve, lean_solve, arrays, static)

    @jax.custom_jvp
    def outputs(arrays):
        return solve(eqx.combine(arrays, static))

    @ft.partial(outputs.defjvp, symbolic_zeros=True)
    def outputs_jvp(primals, tangents):
        (arrays,), (tangents,) = primals, tangents
        moving = jax.tree.map(lambda t: not isinstance(t, SymbolicZero), tangents)
        moved, fixed = eqx.partition(arrays, moving)
        given = eqx.filter(tangents, moving)

        def lean_ys(moved):
            return lean_solve(eqx.combine(moved, fixed, static))

        _, ys_dot = jax.jvp(lean_ys, (moved,), (given,))
        ys, extras = outputs(arrays)
        return (ys, extras), (ys_dot, jax.tree.map(jnp.zeros_like, extras))

    return outputs(arrays)


def _with_lean_vjp(solve: Any, lean_solve: Any, arrays: Any, static: Any) -> tuple[Array, Any]:
    """`with_lean_derivatives` in reverse mode: the states' cotangents go through the lean
    loop's own reverse-mode rule."""

    @jax.custom_vjp
    def outputs(arrays):
        return solve(eqx.combine(arrays, static))

    def outputs_fwd(arrays):
        _, lean_vjp = jax.vjp(lambda arrays: lean_solve(eqx.combine(arrays, static)), arrays)
        return outputs(arrays), lean_vjp

    def outputs_bwd(lean_vjp, cotangents):
        ys_cotangent, _ = cotangents
        return lean_vjp(ys_cotangent)

    outputs.defvjp(outputs_fwd, outputs_bwd)
    return outputs(arrays)


class KernelIntegrator(AbstractIntegrator):
    """A `jax.vmap` batch of explicit Runge–Kutta solves, adaptive or at fixed steps, or of
    fixed-step stochastic solves, as one Pallas kernel, each member's state in registers
    for all steps (`kernel_solve`, `adaptive_kernel_solve`, `kernel_sde_solve`).

    `integrator="auto"` takes it on a TPU for an adaptive solve, or a fixed-step one whose
    step count is known when traced, with a state of up to `STATE_LIMIT` components and a
    vector field (or stochastic step) of `KERNEL_PRIMITIVES`; elsewhere the lean loop (or
    the stochastic one). With `adjoint=None` its derivatives are those loops' (forward and
    reverse mode for fixed steps, reverse mode for adaptive ones, as theirs); with
    `adjoint="forward"` forward mode of a fixed-step ODE solve runs in the kernel too, on
    the state and its tangents, and of an adaptive one takes the lean loop's."""

    name = "kernel"
    runs = (
        "explicit Runge-Kutta solvers ('tsit5', 'rk4', ...) and stochastic ones "
        "('euler_maruyama', 'milstein', 'sra1', ...) at fixed steps"
    )
    events_advice = ": pass integrator='lean'"
    adjoints = (None, "forward")
    counts_steps_when_traced = True

    def accepts_solver(self, solver: Any) -> bool:
        return is_lean_solver(solver) or isinstance(solver, AbstractSDESolver)

    def auto_may_choose_here(self) -> bool:
        return on_tpu()

    def chosen_by_auto(self, problem: Problem | None) -> bool:
        return (
            problem is not None
            and self.auto_may_choose_here()
            and _unfit(problem) is None
            and runs_in_kernel(problem)
        )

    def solve(self, problem: Problem) -> Solution:
        reason = _unfit(problem)
        if reason is not None:
            raise ValueError(reason)
        if problem.adaptive:
            return _adaptive_solution(problem)
        steps = problem.known_steps_per_interval
        if problem.adjoint is None or problem.key is not None:
            ys, _ = with_lean_derivatives(_kernel_outputs, _lean_ys, problem)
        else:
            ys, _ = _kernel_outputs(problem)
        finite = jnp.all(jnp.isfinite(ys))
        status = RESULTS.where(finite, RESULTS.successful, RESULTS.nonfinite_state)
        total = jnp.asarray(steps * (problem.ts.shape[0] - 1))
        stats = {
            "num_steps": total,
            "num_accepted_steps": total,
            "num_rejected_steps": total * 0,
            "max_steps": jnp.asarray(problem.max_steps),
        }
        return Solution(ys, status, stats)


@ft.cache  # asked at every solve and sweep; `jax.default_backend()` takes about 30 µs
def on_tpu() -> bool:
    """Whether programs run on a TPU by default, where `"auto"` may take the kernel."""
    return jax.default_backend() == "tpu"


def _unfit(problem: Problem) -> str | None:
    """Why the kernel cannot take `problem`'s step counts or state, or `None`."""
    y0 = problem.y0
    loop = "'lean'" if problem.key is None else "'sde'"
    adaptive_reason = _unfit_adaptive(problem) if problem.adaptive else None
    if adaptive_reason is not None:
        return adaptive_reason
    if not problem.adaptive and problem.known_steps_per_interval is None:
        return (
            "simlab's kernel integrator needs the same number of fixed steps in every save "
            "interval, known when the solve is traced: pass ts and dt0 as concrete values "
            "(not traced under jax.jit) with ts on a grid of equal intervals, or pass "
            f"integrator={loop}."
        )
    if not jnp.issubdtype(y0.dtype, jnp.floating) or y0.size > STATE_LIMIT:
        return (
            f"simlab's kernel integrator runs real floating-point states of up to "
            f"{STATE_LIMIT} components; got {y0.dtype} of shape {y0.shape}. Pass "
            f"integrator={loop}."
        )
    return None


def _adaptive_solution(problem: Problem) -> Solution:
    """An adaptive solve in the kernel: its states, status and step counts."""
    ys, outcome = with_lean_derivatives(_kernel_outputs, _lean_ys, problem)
    num_steps = outcome["num_steps"].astype(jnp.int32)
    num_rejected = outcome["num_rejected"].astype(jnp.int32)
    stats = {
        "num_steps": num_steps,
        "num_accepted_steps": num_steps - num_rejected,
        "num_rejected_steps": num_rejected,
        "max_steps": jnp.asarray(problem.max_steps),
    }
    return Solution(ys, _status(outcome["finished"] > 0, outcome["nonfinite_time"]), stats)


def _unfit_adaptive(problem: Problem) -> str | None:
    """Why the kernel cannot take `problem`'s adaptive steps, or `None`."""
    # Steps are counted in the state's floating point type, exactly up to here.
    exact = 2 ** (jnp.finfo(problem.y0.dtype).nmant + 1)
    if problem.max_steps > exact:
        return (
            f"simlab's kernel integrator counts up to {exact} steps in {problem.y0.dtype}; "
            f"got max_steps={problem.max_steps}: pass fewer, or integrator='lean'."
        )
    return None


def _kernel_outputs(problem: Problem) -> tuple[Array, dict[str, Array]]:
    """The kernel's states at the save times and, for adaptive steps, its outcome."""
    if problem.adaptive:
        return adaptive_kernel_solve(
            problem.model,
            problem.solver,
            problem.ts,
            problem.y0,
            problem.args,
            problem.dt0,
            problem.rtol,
            problem.atol,
            problem.max_steps,
        )
    return _kernel_ys(problem), {}


def _kernel_ys(problem: Problem) -> Array:
    if problem.key is not None:
        return kernel_sde_solve(
            problem.model,
            problem.solver,
            problem.ts,
            problem.y0,
            problem.args,
            problem.key,
            problem.known_steps_per_interval,
        )
    return kernel_solve(
        problem.model,
        problem.solver.tableau,
        problem.ts,
        problem.y0,
        problem.args,
        problem.known_steps_per_interval,
    )


def _lean_ys(problem: Problem) -> Array:
    loop = LeanIntegrator() if problem.key is None else SDEIntegrator()
    return loop.solve(problem).ys
