"""PEtab problems: an SBML model with measurement, observable, noise and parameter tables.

`load` reads a problem (with the `petab` library and libsbml: `pip install simlab[petab]`)
into a [`PetabProblem`][simlab.petab.PetabProblem], whose log-likelihood runs under
`jax.jit` and `jax.grad`.
"""

try:
    import libsbml as _libsbml  # noqa: F401
    import petab as _petab  # noqa: F401
    import sympy as _sympy  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"simlab.petab needs the petab extra ({error.name} is missing): pip install 'simlab[petab]'"
    ) from error

from ._model import SBMLModel as SBMLModel  # noqa: E402
from ._problem import PetabProblem as PetabProblem, load as load  # noqa: E402
