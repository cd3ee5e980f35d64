"""simlab: differentiable simulation on JAX."""

import importlib.metadata

from . import datasets as datasets, decomposition as decomposition, grid as grid, models as models
from ._fit import FitResult as FitResult, fit as fit
from ._fit._multistart import Starts as Starts
from ._fit._noise import AbstractNoise as AbstractNoise, NegativeBinomial as NegativeBinomial
from ._fit._profile import Profile as Profile
from ._results import RESULTS as RESULTS, Trajectory as Trajectory
from ._sample import Posterior as Posterior, sample as sample
from ._simulate import SOLVERS as SOLVERS, simulate as simulate
from ._sweep import SweepResult as SweepResult, sweep as sweep
from .grid import Dirichlet as Dirichlet, Grid as Grid, Neumann as Neumann, Periodic as Periodic

__version__ = importlib.metadata.version("simlab")
