"""Status codes and the result objects returned by simlab's entry points."""

import collections
import re
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from . import _display as display


class RESULTS(dfx.RESULTS):
    """Status of a solve, extending Diffrax's (and so Optimistix's) status codes.

    `RESULTS.successful` means the solve reached the last requested time with a finite
    state. Compare a status with `==` (it works under `jax.jit` and `jax.vmap`) and read its
    message with `RESULTS[status]`.
    """

    nonfinite_state = (
        "The state became NaN or infinite, or every step the solver tried from some time on "
        "did (Trajectory.nonfinite_time, with throw=False, says when). Check the model's "
        "parameters and initial state (a blow-up is often physical: finite-time singularity "
        "or an unstable parameter region); for stiff dynamics pass an implicit solver such "
        "as solver='kvaerno5'."
    )
    invalid_times = (
        "The save times ts are not strictly increasing (or not finite). Sort the times and "
        "drop duplicates."
    )
    invalid_step = (
        "The step dt0 is not a positive, finite number (or, with adaptive=False, it is longer "
        "than the whole span ts[-1] - ts[0]); under jax.jit or jax.vmap it is checked per "
        "member. Pass a positive dt0, or dt0=None to have one chosen."
    )
    invalid_tolerance = (
        "The tolerances are out of range: rtol must lie in (0, 0.5) and atol must be positive "
        "and finite; under jax.jit or jax.vmap they are checked per member. Pass e.g. "
        "rtol=1e-6, atol=1e-9, or leave them unset."
    )
    nonfinite_initial_state = (
        "The initial state y0 holds NaN or inf; under jax.jit or jax.vmap it is checked per "
        "member. Pass a finite y0."
    )
    parameter_out_of_range = (
        "A model parameter lies outside its declared valid range (see the model's "
        "parameter_bounds()); under jax.vmap or jax.jit the range is checked per member."
    )
    singular_jacobian = (
        "The implicit solver's iteration matrix I/(h*gamma) - J (M/(h*gamma) - J with a mass "
        "matrix M) was singular or not finite (J is the Jacobian of the vector field). Check "
        "the model for NaN or infinite derivatives at the state reached (e.g. sqrt or log at "
        "zero) or rescale the problem."
    )
    inconsistent_initial_state = (
        "The initial state y0 is not consistent with the algebraic equations of M y' = f(t, y) "
        "(Trajectory.stats['initial_residual'] holds their largest residual), and Newton's "
        "method on the algebraic components, with the differential ones held, found no "
        "consistent state. Pass a y0 closer to one that satisfies the algebraic equations."
    )
    singular_algebraic_jacobian = (
        "The Jacobian of the algebraic equations of M y' = f(t, y) with respect to the "
        "algebraic components is singular at t0, so the system is not of index 1: most "
        "likely a constraint that does not involve the algebraic unknowns (index 2 or 3, as "
        "a pendulum's position constraint with its Lagrange multiplier). Rodas5P and Radau5 "
        "solve index-1 systems: differentiate the constraint until it involves the algebraic "
        "unknowns (the docs' DAE page shows this for the pendulum)."
    )
    unstable_step = (
        "The fixed step dt0 is above the largest stable step of the explicit solver for this "
        "model (its diffusion-number/CFL limit, model.max_stable_step(solver, y0); zero when "
        "no step is stable, as for forward Euler on waves), so the solution would grow "
        "without bound. Pass a smaller dt0 (or dt0=None to have a stable one chosen); for "
        "an ODE also adaptive=True or an implicit or IMEX solver such as solver='kvaerno5' "
        "or solver='kencarp4'; for a stochastic model (whose solvers are all explicit) also "
        "adaptive steps with solver='spark'."
    )
    nonfinite_event_condition = (
        "The event condition returned NaN or infinity at a finite state, so whether the event "
        "happened is unknown. Make the condition return a finite real number wherever the "
        "solution can go (e.g. guard a sqrt, log or division of the state)."
    )
    energy_drift = (
        "The energy of a symplectic solve changed by more than simlab.integrate."
        "ENERGY_TOLERANCE = 10% between t0 and a save time (relative to |H| at t0, or to a "
        "tenth of the kinetic energy's range over the save times where that is larger; "
        "Trajectory.stats['energy_error'] holds the largest change): the fixed step is too "
        "long for the fastest motion the solve met, such as a close encounter or a pass "
        "through a singularity of the potential, where the force is unbounded. Pass a "
        "smaller dt0 (dt0=None chooses one from y0 for an energy error near 0.1%), soften "
        "the potential, or use an adaptive solver such as solver='dopri8'; throw=False "
        "returns the states as computed."
    )
    invalid_initial_state = (
        "The initial state y0 is not one the model is defined at (two bodies at the same "
        "point without softening, a constrained pendulum moving along its rod): at top "
        "level a ValueError names the problem, and under jax.jit or jax.vmap the model's "
        "initial_state_valid(y0) is checked per member. Pass a y0 the model accepts."
    )


class SimulationError(RuntimeError):
    """A solve failed: the message is the [`simlab.RESULTS`][] message of its status."""


# Equinox enumerations have no public way to list their items or to read an item's integer
# code (it is `==` and `RESULTS[item]` only); the functions below are the one place that
# reads the enumeration's `_name_to_item` and an item's `_value` for simlab.


def status_code(result: RESULTS) -> Int[Array, "..."]:
    """The integer code of a [`simlab.RESULTS`][] status (an array of codes under `vmap`).

    Works under `jax.jit` and `jax.vmap`; `status_name` reads a code back.
    """
    return jnp.asarray(result._value)


def status_codes() -> dict[str, int]:
    """The name and integer code of every [`simlab.RESULTS`][] status."""
    return {name: int(status_code(item)) for name, item in RESULTS._name_to_item.items()}


def quoted_status(text: str) -> RESULTS | None:
    """The failure status whose message `text` (an error message) quotes, if any."""
    messages = {RESULTS[item]: item for item in RESULTS._name_to_item.values() if RESULTS[item]}
    quoted = [message for message in messages if message in text]
    return messages[max(quoted, key=len)] if quoted else None


def status_name(code: int) -> str:
    """The name of the [`simlab.RESULTS`][] status with integer `code` (see `status_code`)."""
    names = {value: name for name, value in status_codes().items()}
    if code not in names:
        raise ValueError(f"{code} is not a simlab.RESULTS code; the codes are {sorted(names)}")
    return names[code]


def status_message(code: int) -> str:
    """The message of the [`simlab.RESULTS`][] status with integer `code`, on one line
    ("" for success; the code itself for a code simlab does not know)."""
    names = {value: name for name, value in status_codes().items()}
    if code not in names:
        return f"status code {code}"
    return " ".join(RESULTS[RESULTS._name_to_item[names[code]]].split())


def status_text(code: int, *, success: str = "success", failure: str = "failed") -> str:
    """A status in words: `success`, or `failed (name): the message`."""
    if code == 0:
        return success
    names = {value: name for name, value in status_codes().items()}
    return f"{failure} ({names.get(code, code)}): {status_message(code)}"


_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)\.\s")


def failure_counts(codes: Any) -> list[str]:
    """One line per failure status among `codes` (one per member), the most common first:
    how many members ended with it, its name and the first sentence of its message."""
    counts = collections.Counter(int(code) for code in np.ravel(codes) if int(code) != 0)
    names = {value: name for name, value in status_codes().items()}
    lines = []
    for code, count in counts.most_common():
        first_sentence = _SENTENCE_END.split(status_message(code), maxsplit=1)[0].rstrip(".")
        lines.append(f"{count} {names.get(code, code)}: {first_sentence}.")
    return lines


class Trajectory(eqx.Module):
    """The solution of an initial value problem, saved at the requested times.

    **Attributes:**

    - `ts`: the save times, shape `(num_times,)`.
    - `ys`: the state at each save time, shape `(num_times, *state_shape)`. After a failed
      solve (with `throw=False`) the entries past the failure are `inf`.
    - `result`: a [`simlab.RESULTS`][] status; `RESULTS[trajectory.result]` is its message.
    - `stats`: solver statistics (`num_steps`, `num_accepted_steps`, `num_rejected_steps`,
      `max_steps`).
    - `state_names`: names of the state components, when the model declares them.
    - `solver`: the name of the solver that ran (e.g. `"tsit5"`), static metadata.
    - `solver_choice`: why `simulate(solver=None)` chose `solver` where it chose a stiff
      one (e.g. "an explicit solver would need about 1e+05 steps for stability"); `None`
      otherwise.
    - `integrator`: the name of the integrator that ran (`"lean"`, `"stiff"`,
      `"exponential"`, `"imex"`, `"diffrax"`, see `simlab.integrate.INTEGRATORS`), static.
    - `event_time`: with `simulate(..., event=...)`, the time $\tau$ at which the event's
      condition first crossed zero (`NaN` if it never did); `None` without an event.
    - `event_state`: the state $y(\tau)$ there (`NaN` if the event never fired).
    - `nonfinite_time`: where `result` is `RESULTS.nonfinite_state`, the time of the first
      non-finite value: the time from which every step the solver tried gave NaN or inf,
      or else the first save time whose state holds NaN or inf; `NaN` for any other
      result (one value per member under `vmap`).
    """

    ts: Float[Array | np.ndarray, " num_times"]  # NumPy when read back from a store
    ys: Float[Array | np.ndarray, " num_times *state"]
    result: RESULTS
    stats: dict[str, Any]
    state_names: tuple[str, ...] | None = eqx.field(static=True, default=None)
    solver: str | None = eqx.field(static=True, default=None)
    integrator: str | None = eqx.field(static=True, default=None)
    solver_choice: str | None = eqx.field(static=True, default=None)
    event_time: Float[Array, ""] | None = None
    event_state: Float[Array, " *state"] | None = None
    nonfinite_time: Float[Array, ""] | None = None

    @property
    def succeeded(self):
        """Boolean array: did the solve succeed (one value per member under `vmap`)."""
        return self.result == RESULTS.successful

    def component(self, name: str) -> Float[Array, " num_times"]:
        """The time series of one named state component, e.g. `trajectory.component("prey")`."""
        names = self.state_names or ()
        if name not in names:
            raise ValueError(
                f"unknown state component {name!r}; this trajectory's components are {list(names)}"
            )
        return self.ys[..., names.index(name)]

    def final_state(self) -> Float[Array | np.ndarray, "..."]:
        """The state at the last save time; for a batch of trajectories (a `vmap`ped
        `simulate`), each member's, with the batch axes first."""
        batch_axes = np.ndim(self.ts) - 1  # ts gains the batch axes, as every leaf does
        return self.ys[(slice(None),) * batch_axes + (-1,)]

    def __repr__(self) -> str:
        """The solve in words: its status (the failure message, if any), the solver, the
        steps taken and rejected, the time span and the final state by component name.
        Under `jit` or `vmap`, where the values are not known, Equinox's tree view."""
        return display.rows_text(self, self._rows, "Trajectory")

    def _repr_html_(self) -> str:
        """The same rows as an HTML table (a notebook's view of a trajectory)."""
        return display.rows_html(self, self._rows, "Trajectory")

    def plot(self, model: Any = None, **kwargs: Any):
        """The figure of the trajectory, as `simlab run` draws it: each named state
        component against time, or for a grid model's field its history (1-D) or
        snapshots at up to four times (2-D).

        **Arguments:**

        - `model`: the model that was simulated, for its grid (a field's coordinates) and
          its `state_units` (the value axis); optional.
        - `grid`, `channel`: a field's grid (in place of `model`) and which field of a
          multi-field state to draw (default: the first).
        - `kwargs`: passed to [`simlab.plot.trajectory`][], [`simlab.plot.space_time`][]
          or [`simlab.plot.field_snapshots`][], whichever draws (e.g. `time_label`,
          `components`, `label`).

        **Returns:** the matplotlib `Figure` (a notebook shows it inline).

        !!! example

            ```python
            model = simlab.models.LotkaVolterra(alpha=0.5, beta=0.02, gamma=0.9, delta=0.03)
            trajectory = simlab.simulate(model, jnp.array([30.0, 4.0]), jnp.linspace(0, 20, 200))
            figure = trajectory.plot(model)
            figure.savefig("lotka_volterra.png")
            ```
        """
        from .plot._results import trajectory_figure

        return trajectory_figure(self, model, **kwargs)

    def _rows(self) -> list[tuple[str, str]]:
        codes = np.asarray(status_code(self.result))
        if codes.ndim == 0:
            rows = [("status", status_text(int(codes)))]
        else:  # a batch of solves, from a vmapped simulate
            shape = f", shape {codes.shape}" if codes.ndim > 1 else ""
            failed = int(np.sum(codes != 0))
            status = f"{failed} of {codes.size} failed" if failed else "all succeeded"
            rows = [("members", f"{codes.size}{shape}"), ("status", status)]
            rows += [("", line) for line in failure_counts(codes)]
        if self.solver is not None:
            integrator = f" ({self.integrator} integrator)" if self.integrator else ""
            choice = f"; {self.solver_choice}" if self.solver_choice else ""
            rows.append(("solver", f"{self.solver}{integrator}{choice}"))
        rows += _step_rows(self.stats)
        ts = np.asarray(self.ts)
        if ts.shape[-1]:
            span = f"{display.number(ts[..., 0].min())} to {display.number(ts[..., -1].max())}"
            rows.append(("time span", f"{span}, {ts.shape[-1]} save times"))
            rows.append(("final state", self._final_state_text()))
        if self.event_time is not None:
            fired = ~np.isnan(np.asarray(self.event_time))
            event = (
                "never fired"
                if not fired.any()
                else f"at t = {display.array(self.event_time)}, "
                f"state {display.array(self.event_state)}"
            )
            rows.append(("event", event))
        if self.nonfinite_time is not None and not np.all(np.isnan(self.nonfinite_time)):
            rows.append(("non-finite at", f"t = {display.array(self.nonfinite_time)}"))
        return rows

    def _final_state_text(self) -> str:
        final = self.final_state()
        names = self.state_names or ()
        batch_axes = np.ndim(self.ts) - 1
        if names and np.shape(final)[batch_axes:] == (len(names),):
            return ", ".join(
                f"{name}={display.array(final[..., i])}" for i, name in enumerate(names)
            )
        return display.array(final)


def _step_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    """The steps taken, accepted and rejected (and the limit), then any other statistics;
    for a batch of solves, the range over its members."""
    stats = {key: display.spread(value) for key, value in stats.items()}
    rows = []
    if "num_steps" in stats:
        steps = stats.pop("num_steps")
        parts = [
            f"{stats.pop(key)} {word}"
            for key, word in (
                ("num_accepted_steps", "accepted"),
                ("num_rejected_steps", "rejected"),
            )
            if key in stats
        ]
        if parts:
            steps += f" ({', '.join(parts)})"
        if "max_steps" in stats:
            steps += f", at most {stats.pop('max_steps')}"
        rows.append(("steps", steps))
    if stats:
        rows.append(("stats", ", ".join(f"{key}={text}" for key, text in stats.items())))
    return rows
