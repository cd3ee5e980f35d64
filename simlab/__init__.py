"""simlab: differentiable simulation on JAX."""

from . import (
    datasets as datasets,
    decomposition as decomposition,
    grid as grid,
    integrate as integrate,
    models as models,
)
from ._continuation import (
    Bifurcation as Bifurcation,
    Branch as Branch,
    continuation as continuation,
)
from ._expectation import Estimate as Estimate, expectation as expectation
from ._export import export as export
from ._fit import FitResult as FitResult, fit as fit
from ._fit._moments import fit_moments as fit_moments
from ._fit._multistart import Starts as Starts
from ._fit._noise import AbstractNoise as AbstractNoise, NegativeBinomial as NegativeBinomial
from ._fit._profile import Profile as Profile
from ._fit._series import Series as Series
from ._options import SolveOptions as SolveOptions
from ._results import (
    RESULTS as RESULTS,
    SimulationError as SimulationError,
    Trajectory as Trajectory,
)
from ._sample import Posterior as Posterior, sample as sample
from ._sensitivity import sensitivity as sensitivity
from ._simulate import simulate as simulate
from ._steady_state import (
    STABILITY as STABILITY,
    SteadyState as SteadyState,
    steady_state as steady_state,
)
from ._sweep import SweepResult as SweepResult, sweep as sweep
from ._version import __version__ as __version__
from .grid import (
    Dirichlet as Dirichlet,
    Grid as Grid,
    Inflow as Inflow,
    Neumann as Neumann,
    Outflow as Outflow,
    Periodic as Periodic,
    Robin as Robin,
)
from .integrate._events import Event as Event
from .integrate._solvers import SOLVERS as SOLVERS
