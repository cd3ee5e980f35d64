"""Integrators: one interface (`AbstractIntegrator`), one registry (`INTEGRATORS`), one
selection (`select_integrator`), and the solvers they run.

`simlab.simulate` checks its inputs, picks a solver (`default_solver` when none is named)
and an integrator, hands the integrator a `Problem` and wraps its `Solution`. A new kind
of integrator is a new module with an `AbstractIntegrator` subclass, registered with one
line in `INTEGRATORS` (or by `register_integrator`). Integrators ask models only through
small protocols (`SplitVectorField`, `FourierSplitVectorField`, `HamiltonianSystem`,
`LangevinSystem`, `max_stable_step`); they never import a model class.
"""

from ._brownian import brownian_path as brownian_path, brownian_tree as brownian_tree
from ._diffrax import DiffraxIntegrator as DiffraxIntegrator
from ._exponential import ETDRK4 as ETDRK4, ExponentialIntegrator as ExponentialIntegrator
from ._imex import ImexIntegrator as ImexIntegrator, imex_solve as imex_solve
from ._interface import (
    AbstractIntegrator as AbstractIntegrator,
    FoundEvent as FoundEvent,
    Problem as Problem,
    Solution as Solution,
)
from ._langevin import BAOAB as BAOAB, LangevinSystem as LangevinSystem
from ._lean import LeanIntegrator as LeanIntegrator
from ._registry import (
    INTEGRATORS as INTEGRATORS,
    integrator_names as integrator_names,
    register_integrator as register_integrator,
    select_integrator as select_integrator,
    unregister_integrator as unregister_integrator,
)
from ._sde import (
    SRA1 as SRA1,
    AbstractSDESolver as AbstractSDESolver,
    AbstractStochasticSolver as AbstractStochasticSolver,
    EulerMaruyama as EulerMaruyama,
    Milstein as Milstein,
    SDEIntegrator as SDEIntegrator,
    SPaRK as SPaRK,
    StochasticVectorField as StochasticVectorField,
)
from ._sde_adaptive import AdaptiveSDEIntegrator as AdaptiveSDEIntegrator
from ._selection import (
    EXPLICIT_STEP_LIMIT as EXPLICIT_STEP_LIMIT,
    default_solver as default_solver,
    explicit_step_estimate as explicit_step_estimate,
)
from ._solvers import (
    ADJOINTS as ADJOINTS,
    SOLVERS as SOLVERS,
    imex_solver as imex_solver,
    implicit_solver as implicit_solver,
)
from ._split import (
    FourierSplitVectorField as FourierSplitVectorField,
    SplitVectorField as SplitVectorField,
)
from ._stiff import Radau5 as Radau5, Rodas5P as Rodas5P
from ._stiff_integrator import StiffIntegrator as StiffIntegrator
from ._symplectic import (
    ENERGY_TOLERANCE as ENERGY_TOLERANCE,
    AbstractSymplecticSolver as AbstractSymplecticSolver,
    ForestRuth as ForestRuth,
    HamiltonianSystem as HamiltonianSystem,
    McLachlan4 as McLachlan4,
    SymplecticEuler as SymplecticEuler,
    SymplecticIntegrator as SymplecticIntegrator,
    Verlet as Verlet,
    Yoshida6 as Yoshida6,
)
