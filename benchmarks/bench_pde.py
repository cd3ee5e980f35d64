"""PDE benchmarks: stencil throughput against numpy and the memory roofline, a Gray–Scott
step against numpy, the cost of gradients through a heat solve, and the memory of a long
checkpointed rollout."""

import time

import jax
import jax.numpy as jnp
import numpy as np
from _harness import Row, median_seconds

import simlab

LAPLACIAN_SIZE = 2048
GRAY_SCOTT_SIZE = 1024
BYTES_PER_CELL = 8  # float32: read the cell once, write it once
STEP_FACTOR = 0.2  # dt D / h^2, inside the explicit limit


def _numpy_heat_step(u):
    padded = np.pad(u, 1, mode="wrap")
    laplacian = padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * u
    return u + STEP_FACTOR * laplacian


def _memcpy_bandwidth(num_bytes: int) -> float:
    """Bytes per second moved by numpy copying a buffer (read plus write)."""
    source = np.ones(num_bytes // 4, np.float32)
    target = np.empty_like(source)
    seconds = median_seconds(lambda: np.copyto(target, source), repeats=7)
    return 2 * num_bytes / seconds


def _laplacian_rows() -> list[Row]:
    grid = simlab.Grid((LAPLACIAN_SIZE, LAPLACIAN_SIZE), spacing=1.0)
    step = jax.jit(lambda u: u + STEP_FACTOR * simlab.grid.laplacian(u, grid, impl="xla"))
    field = np.random.default_rng(0).standard_normal(grid.shape).astype(np.float32)
    device_field = jnp.asarray(field)
    np.testing.assert_allclose(step(device_field), _numpy_heat_step(field), atol=1e-4)
    simlab_seconds = median_seconds(lambda: step(device_field), repeats=7)
    numpy_seconds = median_seconds(lambda: _numpy_heat_step(field), repeats=5)
    cells_per_second = grid.num_cells / simlab_seconds
    roofline = _memcpy_bandwidth(field.nbytes) / BYTES_PER_CELL
    return [
        Row(
            "pde: 5-point Laplacian step 2048² f32 vs numpy",
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


def _numpy_gray_scott_step(y, dt, feed, kill, diffusivities):
    u, v = y
    laplacians = []
    for field in (u, v):
        padded = np.pad(field, 1, mode="wrap")
        laplacians.append(
            padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:] - 4 * field
        )
    reaction = u * v * v
    du = diffusivities[0] * laplacians[0] - reaction + feed * (1 - u)
    dv = diffusivities[1] * laplacians[1] + reaction - (feed + kill) * v
    return np.stack([u + dt * du, v + dt * dv])


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
    arguments = (dt, np.float32(0.035), np.float32(0.065), (np.float32(0.2), np.float32(0.1)))
    np.testing.assert_allclose(
        step(device_state), _numpy_gray_scott_step(state, *arguments), atol=1e-4
    )
    simlab_seconds = median_seconds(lambda: step(device_state), repeats=7)
    numpy_seconds = median_seconds(lambda: _numpy_gray_scott_step(state, *arguments), repeats=5)
    return Row(
        "pde: Gray-Scott step 1024² f32 vs numpy",
        numpy_seconds / simlab_seconds,
        ">= 3x",
        f"{grid.num_cells / simlab_seconds / 1e9:.2f} Gcell/s",
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
    forward_seconds = median_seconds(lambda: forward(diffusivity))
    gradient_seconds = median_seconds(lambda: value_and_grad(diffusivity))
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
