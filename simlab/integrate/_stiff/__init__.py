"""Stiff solvers: Rosenbrock (Rodas5P) and Radau IIA (Radau5), with a shared adaptive loop."""

from ._loop import AbstractStiffSolver as AbstractStiffSolver
from ._radau import Radau5 as Radau5
from ._rosenbrock import Rodas5P as Rodas5P
