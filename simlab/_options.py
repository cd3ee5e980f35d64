"""`SolveOptions`: how to solve, in one frozen, hashable, validated object.

`simulate` takes these settings as keyword arguments (the friendly form) or as one
`SolveOptions`; `fit`, `sweep` and experiment files pass a `SolveOptions` through, and the
compiled sweep and fit loops use it as their cache key.
"""

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import diffrax as dfx
import jax.numpy as jnp

from ._misc import Integer, as_count, is_concrete, is_real_number, warn_at_caller
from .integrate._registry import integrator_names, runs_anywhere
from .integrate._solvers import ADJOINT_NAMES, SOLVERS, solver_name

DEFAULT_MAX_STEPS = 16_384
# Default (rtol, atol) by the precision of the state. In float32 (machine epsilon 1.2e-7),
# float64's rtol=1e-6 lies within a few roundoffs of the error estimate: stiff solves then
# reject step after step until max_steps (van der Pol at mu=1e-3 and Robertson to 1e11
# from the Test Set for IVP Solvers do; with 1e-4, 1e-7 van der Pol takes 260 steps).
DEFAULT_TOLERANCES = {8: (1e-6, 1e-9), 4: (1e-4, 1e-7), 2: (1e-2, 1e-4)}
# Below this many machine epsilons a relative tolerance asks for more than the float holds.
RESOLVABLE_EPSILONS = 100
# What a fixed step above the stability limit does: fail, or run with a warning.
UNSTABLE_STEP_CHOICES = ("raise", "warn")


@dataclasses.dataclass(frozen=True)
class SolveOptions:
    r"""The settings of one solve, checked once when built.

    **Arguments** (all keyword, all optional):

    - `solver`: a name from `simlab.SOLVERS`, a solver instance, or `None` (Tsit5, or
      for models that declare themselves stiff Rodas5P, matrix-free Kvaerno5 above 256
      state components).
    - `rtol`, `atol`: tolerances of the adaptive step-size controller, $0 < \text{rtol} < 0.5$,
      $\text{atol} > 0$. `None` (the default) follows the precision of the state:
      `rtol=1e-6, atol=1e-9` in float64, `rtol=1e-4, atol=1e-7` in float32 (see
      `DEFAULT_TOLERANCES`); an `rtol` below 100 machine epsilons draws a warning.
    - `dt0`: the initial (or, with `adaptive=False`, the fixed) step; `None` chooses one
      (for fixed steps only grid models can: their largest stable step).
    - `adaptive`: adapt the step to meet `rtol`/`atol`, or take fixed steps of `dt0`.
    - `max_steps`: the most steps before the solve reports failure.
    - `adjoint`: `None` (reverse mode), `"forward"`, `"checkpoint"`, `"direct"`,
      `"backsolve"`, `"reversible"` (symmetric symplectic solvers) or a Diffrax adjoint.
    - `integrator`: `"auto"` (the lean loop for explicit Runge–Kutta solvers, simlab's
      stiff loop for `"rodas5p"` and `"radau5"`, Diffrax for the rest), `"lean"` or
      `"diffrax"`.
    - `unstable_step`: what a fixed `dt0` above a grid model's stable step does: `"raise"`
      (the status `unstable_step`) or `"warn"` (it runs anyway, with a warning where `dt0`
      and the model are concrete; a run made unstable on purpose).

    !!! example

        ```python
        options = simlab.SolveOptions(solver="dopri5", rtol=1e-8, atol=1e-10)
        trajectory = simlab.simulate(model, y0, ts, options=options)
        faster = options.replace(rtol=1e-4)
        ```
    """

    solver: Any = None
    rtol: Any = None
    atol: Any = None
    dt0: Any = None
    adaptive: bool = True
    max_steps: Integer = DEFAULT_MAX_STEPS
    adjoint: Any = None
    integrator: str = "auto"
    unstable_step: str = "raise"

    def __post_init__(self):
        _check_solver(self.solver)
        _check_tolerance("rtol", self.rtol, upper=0.5)
        _check_tolerance("atol", self.atol, upper=math.inf)
        if self.dt0 is not None and is_concrete(self.dt0):
            if not (math.isfinite(float(self.dt0)) and float(self.dt0) > 0):
                raise ValueError(f"dt0 must be positive and finite; got {self.dt0}.")
        if not isinstance(self.adaptive, bool):
            raise ValueError(f"adaptive must be True or False; got {self.adaptive!r}.")
        # Numbers are kept as Python's (the options are frozen, hence `object.__setattr__`):
        # a NumPy scalar is strongly typed, so a np.float32 rtol would not promote with a
        # float64 state, and a np.int64 is no JSON number for `record`.
        object.__setattr__(self, "max_steps", as_count("max_steps", self.max_steps))
        for name in ("rtol", "atol", "dt0"):
            if is_real_number(getattr(self, name)):
                object.__setattr__(self, name, float(getattr(self, name)))
        _check_adjoint(self.adjoint)
        if self.unstable_step not in UNSTABLE_STEP_CHOICES:
            raise ValueError(
                f"unstable_step must be one of {list(UNSTABLE_STEP_CHOICES)}; got "
                f"{self.unstable_step!r}."
            )
        if self.integrator not in integrator_names():
            raise ValueError(
                f"unknown integrator {self.integrator!r}; use one of {list(integrator_names())}."
            )

    def replace(self, **changes: Any) -> "SolveOptions":
        """A copy with some settings changed (checked again)."""
        unknown = set(changes) - set(FIELDS)
        if unknown:
            raise ValueError(f"unknown solve settings {sorted(unknown)}; use {list(FIELDS)}.")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None) -> "SolveOptions":
        """Options from a mapping of setting names (a dict of `simulate` keywords, or an
        experiment file's `[solver]` table), refusing unknown names."""
        return cls().replace(**dict(settings or {}))

    def record(self) -> dict[str, Any]:
        """A JSON-able description: what a results store or provenance file records."""
        return {
            name: _describe(getattr(self, name)) if name in ("solver", "adjoint") else value
            for name, value in ((n, getattr(self, n)) for n in FIELDS)
        }


FIELDS = tuple(field.name for field in dataclasses.fields(SolveOptions))


def as_solve_options(value: "SolveOptions | Mapping[str, Any] | None") -> SolveOptions:
    """`value` as `SolveOptions`: a `SolveOptions` as is, a mapping of settings, or defaults."""
    if isinstance(value, SolveOptions):
        return value
    if value is None or isinstance(value, Mapping):
        return SolveOptions.from_mapping(value)
    raise ValueError(
        f"solve settings must be a simlab.SolveOptions or a dict of simulate keywords; got "
        f"{type(value).__name__}."
    )


def merged_options(options: SolveOptions | None, keywords: dict[str, Any]) -> SolveOptions:
    """The options of an entry point that takes `options=` or the settings as keywords:
    `options` when given (then every keyword must be at its default), else the keywords."""
    if options is None:
        return SolveOptions(**keywords)
    if not isinstance(options, SolveOptions):
        raise ValueError(f"options must be a simlab.SolveOptions; got {type(options).__name__}.")
    defaults = SolveOptions()
    given = [name for name, value in keywords.items() if not _is_default(value, defaults, name)]
    if given:
        raise ValueError(
            f"pass the solve settings either as options= or as keywords, not both; got "
            f"options and {given}. Use options.replace({given[0]}=...) instead."
        )
    return options


def _is_default(value: Any, defaults: SolveOptions, name: str) -> bool:
    default = getattr(defaults, name)
    plain = isinstance(value, int | float | str) and type(value) is type(default)
    return value is default or (plain and value == default)


def _check_solver(solver: Any) -> None:
    if isinstance(solver, str) and solver.lower() not in SOLVERS:
        raise ValueError(f"unknown solver {solver!r}; use one of {sorted(SOLVERS)}.")
    if not (solver is None or isinstance(solver, str) or runs_anywhere(solver)):
        raise ValueError(
            f"unknown solver {solver!r}; use one of {sorted(SOLVERS)} or a diffrax solver "
            "instance such as diffrax.Tsit5()."
        )


def tolerances(options: SolveOptions, dtype: Any) -> tuple[Any, Any]:
    """`(rtol, atol)` of `options` for a state of `dtype`: `None` takes the default for its
    precision (`DEFAULT_TOLERANCES`); a known `rtol` below `RESOLVABLE_EPSILONS` machine
    epsilons draws a warning that names the fix."""
    precision = jnp.finfo(dtype)
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(precision.bits // 8, (1e-6, 1e-9))
    rtol = default_rtol if options.rtol is None else options.rtol
    atol = default_atol if options.atol is None else options.atol
    floor = RESOLVABLE_EPSILONS * float(precision.eps)
    if is_concrete(rtol) and float(rtol) < floor:
        warn_at_caller(
            f"rtol={float(rtol):g} is below {RESOLVABLE_EPSILONS} machine epsilons of the "
            f"{jnp.dtype(dtype).name} state ({floor:.1e}): the error estimate is then mostly "
            f"roundoff, and adaptive solves reject steps until max_steps. Pass "
            f"rtol>={default_rtol:g} (with atol={default_atol:g}), or leave rtol and atol "
            "unset, or solve in float64 (jax.config.update('jax_enable_x64', True))."
        )
    return rtol, atol


def _check_tolerance(name: str, value: Any, *, upper: float) -> None:
    if value is None:
        return  # the default for the state's precision
    if not is_concrete(value):
        return  # traced: checked inside the compiled solve
    try:
        number = float(value)
    except TypeError as error:
        raise ValueError(f"{name} must be a positive number; got {value!r}.") from error
    if not (0 < number < upper):
        bound = f"lie in (0, {upper:g})" if math.isfinite(upper) else "be positive and finite"
        raise ValueError(f"{name} must {bound}; got {value!r}.")


def _check_adjoint(adjoint: Any) -> None:
    if adjoint is None or isinstance(adjoint, dfx.AbstractAdjoint):
        return
    if not (isinstance(adjoint, str) and adjoint in ADJOINT_NAMES):
        raise ValueError(
            f"unknown adjoint {adjoint!r}; use one of {sorted(ADJOINT_NAMES)} or a diffrax adjoint."
        )


def _describe(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if runs_anywhere(value):
        return solver_name(value)
    return type(value).__name__
