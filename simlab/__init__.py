"""simlab: differentiable simulation on JAX."""

import importlib.metadata

from . import models as models
from ._results import RESULTS as RESULTS, Trajectory as Trajectory
from ._simulate import SOLVERS as SOLVERS, simulate as simulate

__version__ = importlib.metadata.version("simlab")
