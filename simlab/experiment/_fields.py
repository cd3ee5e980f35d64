"""The names an experiment file uses: models, initial fields of grid models, the event of
an `[event]` table, and the observables a sweep or a sensitivity analysis may keep."""

import dataclasses
import inspect
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import models as models_module
from ..integrate._events import Event
from ..models import AbstractGridModel, AbstractModel


def model_classes() -> dict[str, type[AbstractModel]]:
    """The concrete models of `simlab.models`, by class name."""
    return {
        name: cls
        for name, cls in vars(models_module).items()
        if isinstance(cls, type) and issubclass(cls, AbstractModel) and not inspect.isabstract(cls)
    }


def initial_field(
    kind: str,
    model: AbstractGridModel,
    *,
    amplitude: float,
    width: float,
    noise: float,
    seed: int,
    peak_wavenumber: float = 4.0,
) -> np.ndarray:
    """The initial state of a grid model, built with NumPy (nothing compiles) except for the
    random vorticity fields.

    - `"gaussian"`: $A \\exp(-|x - c|^2 / 2w^2)$ at the domain centre $c$, `width` $w$ as a
      fraction of the extent.
    - `"sine"`: $A \\prod_i \\sin(\\pi x_i / L_i)$, the slowest mode of a Dirichlet box.
    - `"gray_scott_seed"`: $(u, v) = (1, 0)$ with a central square (side `width` times the
      extent) set to $(1/2, 1/4)$, Pearson's seed.
    - `"kassam_trefethen"`: $A \\prod_i \\cos(2\\pi x_i / L_i)\\,(1 + \\sin(2\\pi x_i / L_i))$,
      smooth and periodic: on $L = 32\\pi$ it is Kassam and Trefethen's
      $\\cos(x/16)(1 + \\sin(x/16))$ start for Kuramoto–Sivashinsky (SIAM J. Sci. Comput. 26,
      2005).
    - `"taylor_green"`: the vorticity $\\omega = (|\\mathbf k|^2 A / k_y)\\sin(k_x x)\\sin(k_y y)$,
      $k_i = 2\\pi / L_i$, of the Taylor–Green vortex of peak speed $A$
      ([`simlab.models.taylor_green_vorticity`][]), for `NavierStokes2D`.
    - `"random_vorticity"`: decaying turbulence's start, random phases with the energy
      spectrum $E(k) \\propto k^4 e^{-2(k/k_p)^2}$ peaked at $k_p$ (`peak_wavenumber`), of
      kinetic energy $A$ ([`simlab.models.random_vorticity`][], its key drawn from `seed`),
      for `NavierStokes2D`.
    - `"kolmogorov_laminar"`: the laminar state of the model's Kolmogorov forcing
      ([`simlab.models.kolmogorov_laminar_vorticity`][]) plus a `"random_vorticity"`
      disturbance of energy $A$ (none for $A = 0$).

    `noise` adds uniform noise of that amplitude (drawn with NumPy's generator from `seed`).
    """
    grid = model.grid
    coordinates = np.meshgrid(*map(np.asarray, grid.coordinates()), indexing="ij")
    centres = [x0 + extent / 2 for x0, extent in zip(grid.origin, grid.extent, strict=True)]
    if kind == "gaussian":
        radius2 = sum(
            ((x - c) / (width * extent)) ** 2
            for x, c, extent in zip(coordinates, centres, grid.extent, strict=True)
        )
        field = amplitude * np.exp(-0.5 * radius2)
    elif kind == "sine":
        field = amplitude * np.prod(
            [
                np.sin(np.pi * (x - x0) / extent)
                for x, x0, extent in zip(coordinates, grid.origin, grid.extent, strict=True)
            ],
            axis=0,
        )
    elif kind == "kassam_trefethen":
        phases = [
            2 * np.pi * (x - x0) / extent
            for x, x0, extent in zip(coordinates, grid.origin, grid.extent, strict=True)
        ]
        field = amplitude * np.prod([np.cos(p) * (1 + np.sin(p)) for p in phases], axis=0)
    elif kind == "taylor_green":
        field = np.asarray(models_module.taylor_green_vorticity(grid, speed=amplitude))
    elif kind in ("random_vorticity", "kolmogorov_laminar"):
        field = _vorticity_field(kind, model, amplitude, seed, peak_wavenumber)
    else:
        inside = np.all(
            [
                np.abs(x - c) <= width * extent / 2
                for x, c, extent in zip(coordinates, centres, grid.extent, strict=True)
            ],
            axis=0,
        )
        field = np.stack([np.where(inside, 0.5, 1.0), np.where(inside, 0.25, 0.0)])
    rng = np.random.default_rng(seed)
    return field + noise * rng.uniform(size=field.shape)


def _vorticity_field(
    kind: str, model, energy: float, seed: int, peak_wavenumber: float
) -> np.ndarray:
    """A random vorticity field of kinetic energy `energy`, on the laminar Kolmogorov state
    for `"kolmogorov_laminar"`."""
    base = (
        np.asarray(models_module.kolmogorov_laminar_vorticity(model))
        if kind == "kolmogorov_laminar"
        else np.zeros(model.grid.shape)
    )
    if energy == 0:
        return base
    disturbance = models_module.random_vorticity(
        jax.random.PRNGKey(seed),
        model.grid,
        peak_wavenumber=peak_wavenumber,
        energy=energy,
        dealiasing_fraction=model.dealiasing_fraction,
    )
    return base + np.asarray(disturbance)


# Module-level functions: sweep compiles once per observable function object.
def final_state(trajectory):
    """Each named state component at the last time, as `final_<name>`."""
    final = trajectory.ys[-1]
    return {f"final_{name}": final[index] for index, name in enumerate(trajectory.state_names)}


def peak(trajectory):
    """The largest value of each named state component over the time span."""
    highest = jnp.max(trajectory.ys, axis=0)
    return {f"{name}_peak": highest[index] for index, name in enumerate(trajectory.state_names)}


def final_field(trajectory):
    """The whole field at the last time."""
    return {"final_field": trajectory.ys[-1]}


def event(trajectory):
    """The time of the `[event]` and each named state component there, as `event_time` and
    `event_<name>` (`NaN` where the event never happened)."""
    state = trajectory.event_state
    return {
        "event_time": trajectory.event_time,
        **{f"event_{name}": state[index] for index, name in enumerate(trajectory.state_names)},
    }


OBSERVABLE_FUNCTIONS = {
    "final_state": final_state,
    "peak": peak,
    "final_field": final_field,
    "event": event,
}


def observable_names(observable: str, state_names: tuple[str, ...]) -> tuple[str, ...]:
    """The variables an observable produces, known before anything runs."""
    if observable == "final_state":
        return tuple(f"final_{name}" for name in state_names)
    if observable == "peak":
        return tuple(f"{name}_peak" for name in state_names)
    if observable == "event":
        return ("event_time", *(f"event_{name}" for name in state_names))
    return ("final_field",)


class StateEvent(eqx.Module):
    r"""The event of an `[event]` table: state component $y_i$ crosses a `threshold`, or
    reaches an extremum (its rate $f_i(t, y)$ crosses zero: downward at a maximum, upward
    at a minimum).

    Called with a member's model it builds that member's [`simlab.Event`][] (recorded, not
    stopping the solve), as `sweep(..., event=...)` takes it; its fields are static, so
    equal tables give equal events and one compiled solve.
    """

    index: int = eqx.field(static=True)
    threshold: float | None = eqx.field(static=True)
    direction: int = eqx.field(static=True)

    def __call__(self, model) -> Event:
        index, threshold = self.index, self.threshold
        if threshold is None:

            def rate(t, y, args):  # f_i(t, y): zero where y_i is extremal
                return model(t, y, args)[index]

            return Event(rate, terminate=False, direction=self.direction)

        def level(t, y, args):  # y_i - c: zero where y_i crosses c
            return y[index] - jnp.asarray(threshold, dtype=y.dtype)

        return Event(level, terminate=False, direction=self.direction)

    def first_passage(self, trajectory):
        """The first crossing of the threshold in the event's direction on the saved path,
        between two save times and located by linear interpolation there: `(time, state)`,
        `NaN` where the path never crosses. A stochastic path has no smooth solution to
        find roots on, so its passage is timed at the save times (save every step)."""
        ts, ys = trajectory.ts, trajectory.ys
        level = ys[:, self.index] - jnp.asarray(self.threshold, dtype=ys.dtype)
        before, after = level[:-1], level[1:]
        rising, falling = (before < 0) & (after >= 0), (before > 0) & (after <= 0)
        crossed = {1: rising, -1: falling, 0: rising | falling}[self.direction]
        k = jnp.argmax(crossed)
        fraction = before[k] / (before[k] - after[k])
        time = ts[k] + fraction * (ts[k + 1] - ts[k])
        state = ys[k] + fraction * (ys[k + 1] - ys[k])
        found = jnp.any(crossed)
        return jnp.where(found, time, jnp.nan), jnp.where(found, state, jnp.nan)


class PathObservable(eqx.Module):
    """An observable of a stochastic path, which reads the `[event]` off the saved path
    (`StateEvent.first_passage`) rather than from the solver; hashable, so equal tables
    share one compiled sweep."""

    event: StateEvent
    observable: Callable = eqx.field(static=True)

    def __call__(self, trajectory):
        return self.observable(with_first_passage(self.event, trajectory))


def with_first_passage(event: StateEvent, trajectory):
    """`trajectory` with its `event_time` and `event_state` read off the saved path."""
    time, state = event.first_passage(trajectory)
    return dataclasses.replace(trajectory, event_time=time, event_state=state)
