"""Fitting model parameters to data: `fit`, `FitResult`."""

from ._fit import FitResult as FitResult, UnidentifiableWarning as UnidentifiableWarning, fit as fit
