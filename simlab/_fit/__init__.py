"""Fitting model parameters to data: `fit`, `FitResult`."""

from ._fit import FitResult as FitResult, UnidentifiableWarning as UnidentifiableWarning, fit as fit
from ._moments import fit_moments as fit_moments
from ._multistart import Starts as Starts
from ._noise import (
    AbstractLeastSquaresNoise as AbstractLeastSquaresNoise,
    AbstractNoise as AbstractNoise,
    Gaussian as Gaussian,
    LogNormal as LogNormal,
    NegativeBinomial as NegativeBinomial,
    Poisson as Poisson,
)
from ._profile import Profile as Profile
from ._series import Series as Series
