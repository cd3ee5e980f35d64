"""simlab: differentiable simulation on JAX."""

import importlib.metadata

from . import datasets as datasets, decomposition as decomposition, grid as grid, models as models
from ._fit import FitResult as FitResult, fit as fit
from ._options import SolveOptions as SolveOptions
from ._results import (
    RESULTS as RESULTS,
    SimulationError as SimulationError,
    Trajectory as Trajectory,
)
from ._sensitivity import sensitivity as sensitivity
from ._simulate import simulate as simulate
from ._solvers import SOLVERS as SOLVERS
from ._steady_state import (
    STABILITY as STABILITY,
    Bifurcation as Bifurcation,
    Branch as Branch,
    SteadyState as SteadyState,
    continuation as continuation,
    steady_state as steady_state,
)
from ._sweep import SweepResult as SweepResult, sweep as sweep
from .grid import Dirichlet as Dirichlet, Grid as Grid, Neumann as Neumann, Periodic as Periodic

__version__ = importlib.metadata.version("simlab")
