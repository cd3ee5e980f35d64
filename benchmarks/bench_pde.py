"""PDE benchmarks: stencil throughput against numpy and the memory roofline, a Gray–Scott
step against numpy, the cost of gradients through a heat solve, and the memory of a long
checkpointed rollout.

The NumPy baselines are written the way a careful user would: no padded copy of the field,
the neighbours read as shifted views (the wrapped edges from the opposite side), results
written into preallocated buffers. Both sides are timed by the best of interleaved rounds.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row, best_seconds

import simlab

LAPLACIAN_SIZE = 2048
GRAY_SCOTT_SIZE = 1024
BYTES_PER_CELL = 8  # float32: read the cell once, write it once
STEP_FACTOR = 0.2  # dt D / h^2, inside the explicit limit


def _neighbour_sum_into(u, out):
    """The sum of each cell's four periodic neighbours, written into `out` (no padding)."""
    np.add(u[:-2], u[2:], out=out[1:-1])
    np.add(u[-1], u[1], out=out[0])
    np.add(u[-2], u[0], out=out[-1])
    out[:, 1:-1] += u[:, :-2]
    out[:, 1:-1] += u[:, 2:]
    out[:, 0] += u[:, -1]
    out[:, 0] += u[:, 1]
    out[:, -1] += u[:, -2]
    out[:, -1] += u[:, 0]
    return out


def _numpy_heat_step(u, out, scratch):
    """`u + s ∇²u = s (neighbours) + (1 - 4s) u` into `out`."""
    _neighbour_sum_into(u, out)
    out *= STEP_FACTOR
    np.multiply(u, 1 - 4 * STEP_FACTOR, out=scratch)
    out += scratch
    return out


def _memcpy_bandwidth(num_bytes: int) -> float:
    """Bytes per second moved by numpy copying a buffer (read plus write)."""
    source = np.ones(num_bytes // 4, np.float32)
    target = np.empty_like(source)
    seconds = best_seconds({"copy": lambda: np.copyto(target, source)})["copy"]
    return 2 * num_bytes / seconds


def _laplacian_rows() -> list[Row]:
    grid = simlab.Grid((LAPLACIAN_SIZE, LAPLACIAN_SIZE), spacing=1.0)
    step = jax.jit(lambda u: u + STEP_FACTOR * simlab.grid.laplacian(u, grid, impl="xla"))
    field = np.random.default_rng(0).standard_normal(grid.shape).astype(np.float32)
    device_field = jnp.asarray(field)
    out, scratch = np.empty_like(field), np.empty_like(field)
    np.testing.assert_allclose(step(device_field), _numpy_heat_step(field, out, scratch), atol=1e-4)
    best = best_seconds(
        {
            "simlab": lambda: step(device_field),
            "numpy": lambda: _numpy_heat_step(field, out, scratch),
        }
    )
    simlab_seconds, numpy_seconds = best["simlab"], best["numpy"]
    cells_per_second = grid.num_cells / simlab_seconds
    roofline = _memcpy_bandwidth(field.nbytes) / BYTES_PER_CELL
    return [
        Row(
            f"pde: 5-point Laplacian step {LAPLACIAN_SIZE}² f32 vs numpy",
            numpy_seconds / simlab_seconds,
            ">= 4x",
            f"{cells_per_second / 1e9:.2f} Gcell/s, numpy "
            f"{grid.num_cells / numpy_seconds / 1e9:.2f}",
        ),
        Row(
            "pde: 5-point Laplacian step vs memcpy roofline (8 B/cell)",
            cells_per_second / roofline,
            ">= 0.4",
            f"roofline {roofline / 1e9:.2f} Gcell/s",
        ),
    ]


def _numpy_gray_scott_step(y, dt, feed, kill, diffusivities, out, scratch):
    """One forward-Euler step into `out` (shape of `y`), `scratch` two fields of work space:
    u + dt (D_u ∇²u - u v² + F (1 - u)), v + dt (D_v ∇²v + u v² - (F + k) v)."""
    u, v = y
    reaction, laplacian = scratch
    np.multiply(u, v, out=reaction)
    reaction *= v
    for index, (field, diffusivity, linear) in enumerate(
        zip((u, v), diffusivities, (-feed, -(feed + kill)), strict=True)
    ):
        target = out[index]
        _neighbour_sum_into(field, laplacian)
        laplacian *= dt * diffusivity
        # field (1 + dt (linear - 4 D)) + dt D (neighbours) ∓ dt u v² (+ dt F for u)
        np.multiply(field, 1 + dt * (linear - 4 * diffusivity), out=target)
        target += laplacian
        if index == 0:
            target -= dt * reaction
            target += dt * feed
        else:
            target += dt * reaction
    return out


def _gray_scott_row() -> Row:
    grid = simlab.Grid((GRAY_SCOTT_SIZE, GRAY_SCOTT_SIZE), spacing=1.0)
    model = simlab.models.GrayScott(
        feed_rate=np.float32(0.035),
        kill_rate=np.float32(0.065),
        diffusivity_u=np.float32(0.2),
        diffusivity_v=np.float32(0.1),
        grid=grid,
        impl="xla",
    )
    dt = np.float32(0.9)
    step = jax.jit(lambda y: y + dt * model(0.0, y, None))
    rng = np.random.default_rng(1)
    state = rng.uniform(size=(2, *grid.shape)).astype(np.float32)
    device_state = jnp.asarray(state)
    arguments = (
        dt,
        np.float32(0.035),
        np.float32(0.065),
        (np.float32(0.2), np.float32(0.1)),
        np.empty_like(state),
        np.empty_like(state),
    )
    np.testing.assert_allclose(
        step(device_state), _numpy_gray_scott_step(state, *arguments), atol=1e-4
    )
    best = best_seconds(
        {
            "simlab": lambda: step(device_state),
            "numpy": lambda: _numpy_gray_scott_step(state, *arguments),
        }
    )
    simlab_seconds, numpy_seconds = best["simlab"], best["numpy"]
    return Row(
        f"pde: Gray-Scott step {GRAY_SCOTT_SIZE}² f32 vs numpy",
        numpy_seconds / simlab_seconds,
        ">= 3x",
        f"{grid.num_cells / simlab_seconds / 1e9:.2f} Gcell/s, numpy "
        f"{grid.num_cells / numpy_seconds / 1e9:.2f}",
    )


def _heat_loss(grid, y0, num_steps, dt, integrator="auto"):
    def loss(diffusivity):
        model = simlab.models.Heat(diffusivity=diffusivity, grid=grid, impl="xla")
        ts = jnp.array([0.0, num_steps * dt])
        trajectory = simlab.simulate(
            model,
            y0,
            ts,
            solver="euler",
            adaptive=False,
            dt0=dt,
            max_steps=num_steps,
            integrator=integrator,
        )
        return jnp.sum(trajectory.ys[-1] ** 2)

    return loss


def _gradient_row() -> Row:
    grid = simlab.Grid((256, 256), extent=1.0)
    x, y = grid.mesh()
    y0 = jnp.sin(2 * jnp.pi * x) * jnp.cos(4 * jnp.pi * y)
    dt = 0.2 * grid.spacing[0] ** 2  # diffusivity 1: inside the Euler limit h^2 / 4
    loss = _heat_loss(grid, y0, 200, dt)
    forward = jax.jit(loss)
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    diffusivity = jnp.asarray(1.0)
    best = best_seconds(
        {"forward": lambda: forward(diffusivity), "gradient": lambda: value_and_grad(diffusivity)},
        repeats=5,
    )
    forward_seconds, gradient_seconds = best["forward"], best["gradient"]
    return Row(
        "pde: heat 256² x 200 steps value_and_grad / forward",
        gradient_seconds / forward_seconds,
        "<= 4",
        f"forward {forward_seconds * 1e3:.0f} ms",
    )


def _memory_row() -> Row:
    """Peak memory of gradients through 10^4 steps of a 256² heat solve, read from the
    compiled program's buffer assignment (no need to run it)."""
    grid = simlab.Grid((256, 256), extent=1.0)
    x, y = grid.mesh()
    y0 = jnp.sin(2 * jnp.pi * x) * jnp.cos(4 * jnp.pi * y)
    num_steps = 10_000
    dt = 0.2 * grid.spacing[0] ** 2
    loss = _heat_loss(grid, y0, num_steps, dt, integrator="diffrax")
    start = time.perf_counter()
    compiled = jax.jit(jax.grad(loss)).lower(jnp.asarray(1.0)).compile()
    analysis = compiled.memory_analysis()
    peak = analysis.temp_size_in_bytes + analysis.argument_size_in_bytes
    peak += analysis.output_size_in_bytes
    every_state = num_steps * y0.nbytes
    return Row(
        "pde: grad through 10^4 steps of 256² f64, peak GiB (checkpointed)",
        peak / 2**30,
        "<= 4 GiB",
        f"storing every state: {every_state / 2**30:.1f} GiB; "
        f"compiled in {time.perf_counter() - start:.0f} s",
    )


def rows() -> list[Row]:
    return [*_laplacian_rows(), _gray_scott_row(), _gradient_row(), _memory_row()]
