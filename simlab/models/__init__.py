"""Physical models: each is an `eqx.Module` whose `__call__(t, y, args)` is the vector field."""

from ..integrate._solvers import implicit_solver as implicit_solver
from ._base import (
    AbstractModel as AbstractModel,
    AbstractODEModel as AbstractODEModel,
    Bounds as Bounds,
    parameter as parameter,
)
from ._dae import (
    AbstractDAEModel as AbstractDAEModel,
    PendulumDAE as PendulumDAE,
    RLCCircuit as RLCCircuit,
    RobertsonDAE as RobertsonDAE,
    TransistorAmplifier as TransistorAmplifier,
)
from ._driven import BoundaryDriven as BoundaryDriven
from ._flow import (
    NavierStokes2D as NavierStokes2D,
    kolmogorov_laminar_vorticity as kolmogorov_laminar_vorticity,
    peaked_spectrum as peaked_spectrum,
    random_vorticity as random_vorticity,
    taylor_green_vorticity as taylor_green_vorticity,
)
from ._hamiltonian import (
    AbstractHamiltonianModel as AbstractHamiltonianModel,
    FPUTChain as FPUTChain,
    HenonHeiles as HenonHeiles,
    Kepler as Kepler,
    LennardJones as LennardJones,
    NBody as NBody,
    Pendulum as Pendulum,
)
from ._hybrid import HybridModel as HybridModel
from ._langevin import Langevin as Langevin
from ._ode import (
    SIR as SIR,
    Brusselator as Brusselator,
    DampedPendulum as DampedPendulum,
    Lorenz as Lorenz,
    LotkaVolterra as LotkaVolterra,
    Robertson as Robertson,
    VanDerPol as VanDerPol,
)
from ._pde import (
    AbstractGridModel as AbstractGridModel,
    AdvectionDiffusion as AdvectionDiffusion,
    Burgers as Burgers,
    GrayScott as GrayScott,
    Heat as Heat,
    Wave as Wave,
)
from ._sde import (
    AbstractSDEModel as AbstractSDEModel,
    DoubleWell as DoubleWell,
    GeometricBrownianMotion as GeometricBrownianMotion,
    OrnsteinUhlenbeck as OrnsteinUhlenbeck,
    StochasticFitzHughNagumo as StochasticFitzHughNagumo,
    StochasticLorenz as StochasticLorenz,
    StochasticSIR as StochasticSIR,
)
from ._sde_grid import (
    AbstractStochasticGridModel as AbstractStochasticGridModel,
    StochasticAllenCahn as StochasticAllenCahn,
    StochasticHeat as StochasticHeat,
)
from ._spectral import (
    KuramotoSivashinsky as KuramotoSivashinsky,
    SwiftHohenberg as SwiftHohenberg,
)
from ._split import (
    AbstractSpectralGridModel as AbstractSpectralGridModel,
    AbstractSplitGridModel as AbstractSplitGridModel,
)
from ._walled_flow import (
    WalledNavierStokes2D as WalledNavierStokes2D,
    poiseuille_velocity as poiseuille_velocity,
)
