"""The `[model]` of an experiment: a model class by name with its parameters, its integer
settings (`num_masses`), its grid, or a preset of the library with its own initial state."""

import dataclasses
import inspect
import math
import pathlib
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..grid import Grid
from ..models import AbstractGridModel, AbstractModel
from ._check import FLOAT_BYTES, Checker, check_memory
from ._fields import model_classes


def model_from_config(check: Checker, config: dict) -> tuple[AbstractModel, np.ndarray | None]:
    """The `[model]`, and the initial state of its preset (`None` without one)."""
    table = check.table(config, "model", "model")
    classes = model_classes()
    name = check.string(table, "name", "model")
    if name not in classes:
        raise check.fail("model.name", f"unknown model {name!r}; use one of {sorted(classes)}.")
    cls = classes[name]
    if "preset" in table:
        return _preset(check, table, cls)
    integers = _integer_settings(cls)
    check.keys(table, "model", ("name", "parameters", "grid", *integers))
    parameters = _parameters(check, table, cls, required=True)
    settings = {
        key: check.integer(table, key, "model", default=default)
        for key, default in integers.items()
    }
    settings = {key: value for key, value in settings.items() if value is not None}
    if issubclass(cls, AbstractGridModel):
        settings["grid"] = _grid(check, table)
    elif "grid" in table:
        raise check.fail("model.grid", f"{name} is not a grid model; remove [model.grid].")
    try:
        return cls(**parameters, **settings), None
    except (TypeError, ValueError) as error:
        raise check.fail("model", f"{name} refused these settings: {error}") from None


def _preset(check: Checker, table: dict, cls) -> tuple[AbstractModel, np.ndarray]:
    """`preset = "lid_driven_cavity"`: the model and initial state a class method of the
    model gives, with its number settings as keys of `[model]` (`num_cells = 64`) and any
    `[model.parameters]` replaced."""
    if not cls.presets:
        raise check.fail(
            "model.preset", f"{cls.__name__} has no presets; give its settings instead."
        )
    preset = check.string(table, "preset", "model", choices=cls.presets)
    builder = getattr(cls, preset)
    settings = _preset_settings(builder)
    check.keys(table, "model", ("name", "parameters", "preset", *settings))
    chosen = {
        key: check.integer(table, key, "model")
        if isinstance(default, int)
        else check.number(table, key, "model")
        for key, default in settings.items()
        if key in table
    }
    try:
        model, y0 = builder(**chosen)
    except ValueError as error:
        raise check.fail(
            "model", f"{cls.__name__}.{preset} refused these settings: {error}"
        ) from None
    parameters = _parameters(check, table, cls, required=False)
    return _with_parameters(model, parameters), np.asarray(y0)


def _preset_settings(builder) -> dict[str, int | float]:
    """The keywords of a preset with a number for default (`num_cells`, `reynolds`), which
    `[model]` may set, with those defaults."""
    return {
        name: parameter.default
        for name, parameter in inspect.signature(builder).parameters.items()
        if isinstance(parameter.default, int | float) and not isinstance(parameter.default, bool)
    }


def built_model(config: dict, path: pathlib.Path, parameters: dict[str, float]) -> AbstractModel:
    """The model of a checked config (a stored run's `config.toml` at `path`), with
    `parameters` replaced (those a run fitted)."""
    return _with_parameters(model_from_config(Checker(path), config)[0], parameters)


def _integer_settings(cls: type[AbstractModel]) -> dict[str, Any]:
    """The static integer fields of a model class (`num_masses` of `FPUTChain`), which
    `[model]` may set: `...` for those without a default (required), `None` for the rest."""
    return {
        field.name: ... if field.default is dataclasses.MISSING else None
        for field in dataclasses.fields(cls)
        if field.metadata.get("static") and field.type is int
    }


def _parameters(check: Checker, table: dict, cls, *, required: bool) -> dict[str, float]:
    """`[model.parameters]`, each a number inside its valid range; with `required`, every
    parameter without a default must be given."""
    name = cls.__name__
    values = check.table(table, "parameters", "model.parameters", required=False) or {}
    known = cls.parameter_names()
    defaults = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    for key in values:
        if key not in known:
            raise check.fail(
                f"model.parameters.{key}",
                f"{name} has no parameter {key!r}; its parameters are {list(known)}.",
            )
    for key in known if required else ():
        if key not in values and key not in defaults:
            raise check.fail(f"model.parameters.{key}", f"is missing; {name} needs a value for it.")
    bounds = cls.parameter_bounds()
    parameters = {}
    for key in values:
        value = check.number(values, key, "model.parameters")
        if not bounds[key].contains(np.asarray(value)):
            raise check.fail(
                f"model.parameters.{key}",
                f"is {value!r}, outside its valid range {bounds[key].describe()}.",
            )
        parameters[key] = value
    return parameters


def _with_parameters(model: AbstractModel, parameters: dict[str, float]) -> AbstractModel:
    """`model` with the given parameters replaced."""
    return eqx.tree_at(
        lambda m: [getattr(m, key) for key in parameters],
        model,
        [jnp.asarray(value, dtype=jnp.result_type(float)) for value in parameters.values()],
    )


def _grid(check: Checker, table: dict) -> Grid:
    grid = check.table(table, "grid", "model.grid")
    check.keys(grid, "model.grid", ("shape", "extent", "boundary"))
    shape = grid.get("shape")
    if (
        not isinstance(shape, list)
        or not 1 <= len(shape) <= 3
        or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 3 for n in shape)
    ):
        raise check.fail("model.grid.shape", f"must be a list of 1-3 integers >= 3; got {shape!r}.")
    check_memory(check, "model.grid.shape", "one field", math.prod(shape) * FLOAT_BYTES)
    extent = check.number(grid, "extent", "model.grid", positive=True)
    boundary = check.string(
        grid,
        "boundary",
        "model.grid",
        default="periodic",
        choices=("periodic", "dirichlet", "neumann"),
    )
    return Grid(tuple(shape), extent=extent, boundary=boundary)
