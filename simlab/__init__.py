"""simlab: differentiable simulation on JAX."""

import importlib.metadata

from . import datasets as datasets, decomposition as decomposition, grid as grid, models as models
from ._fit import FitResult as FitResult, fit as fit
from ._results import RESULTS as RESULTS, Trajectory as Trajectory
from ._simulate import SOLVERS as SOLVERS, simulate as simulate
from ._sweep import SweepResult as SweepResult, sweep as sweep
from .grid import (
    Dirichlet as Dirichlet,
    Grid as Grid,
    Neumann as Neumann,
    Periodic as Periodic,
    Robin as Robin,
)

__version__ = importlib.metadata.version("simlab")
