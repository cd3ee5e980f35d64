"""Kernel launches as JAX primitives lowered per platform.

A Pallas launch is laid out for where it runs: the interpreter on a CPU, Triton or Mosaic
GPU on an NVIDIA GPU, Mosaic on a TPU, each with tiles its compiler takes. So every launch
is bound as a primitive whose lowering rule, registered for each platform, builds the
launch for the platform being lowered: a program traced once lowers for any of them
(`jax.export` for `"cuda"` or `"tpu"` on a CPU-only machine included), whatever the
process's default backend. Run eagerly, a launch takes the platform of its argument's
device.

`KernelLaunch` is the static description a primitive carries (a frozen dataclass in each
kernel file); `launch_p` binds the nonlinear ones, whose derivatives their callers define
(`jax.custom_jvp`); `simlab.kernels._linear` binds the linear stencils with their own
derivative rules through a primitive made the same way.
"""

import abc
import functools as ft
from typing import ClassVar

import jax
import jax.numpy as jnp
from jax.extend import backend as jax_backend
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir
from jaxtyping import Array

from ._pallas import PLATFORMS


class KernelLaunch(abc.ABC):
    """A Pallas launch over a padded field: the result is the field's interior (each
    spatial axis `2 * width` shorter), computed by `run` for the platform it is lowered
    for. Subclasses are frozen dataclasses (hashable: the primitive's parameter)."""

    primitive: ClassVar[Primitive]  # the primitive that binds this class of launch

    @property
    @abc.abstractmethod
    def width(self) -> int:
        """The halo width $w$: each spatial axis of the result is `2 * w` shorter."""

    @property
    @abc.abstractmethod
    def num_spatial(self) -> int:
        """The number of trailing (spatial) axes the launch runs over."""

    @abc.abstractmethod
    def run(self, platform: str, padded: Array, *coefficients: Array) -> Array:
        """The Pallas launch as laid out for `platform` (`"cpu"`, `"cuda"`, ...)."""

    def __call__(self, padded: Array, *coefficients: Array) -> Array:
        return self.primitive.bind(padded, *coefficients, launch=self)


def _device_platform(array) -> str:
    """The lowering platform of the device an array lives on (`"cuda"`, not `"gpu"`)."""
    device = next(iter(array.devices())) if isinstance(array, jax.Array) else jax.devices()[0]
    for name, client in jax_backend.backends().items():
        if client is device.client:
            return name
    return device.platform


def _impl(padded, *coefficients, launch: KernelLaunch):
    return launch.run(_device_platform(padded), padded, *coefficients)


def _abstract_eval(padded, *coefficients, launch: KernelLaunch):
    leading = padded.shape[: padded.ndim - launch.num_spatial]
    spatial = padded.shape[padded.ndim - launch.num_spatial :]
    return padded.update(shape=leading + tuple(n - 2 * launch.width for n in spatial))


def _lowering(platform: str):
    def rule(ctx, *args, launch: KernelLaunch):
        run = ft.partial(launch.run, platform)
        return mlir.lower_fun(run, multiple_results=False)(ctx, *args)

    return rule


def _batch(args, dims, *, launch: KernelLaunch):
    padded, *coefficients = args
    padded_dim, *coefficient_dims = dims
    if all(d is None for d in coefficient_dims):  # None: not batched
        # Leading axes of the padded field are a batch already.
        return launch(jnp.moveaxis(padded, padded_dim, 0), *coefficients), 0
    # Coefficients that vary over the batch: one launch per member.
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    stacked = [
        jnp.broadcast_to(a, (size, *a.shape)) if d is None else jnp.moveaxis(a, d, 0)
        for a, d in zip(args, dims, strict=True)
    ]
    return jax.lax.map(lambda member: launch(*member), stacked), 0


def launch_primitive(name: str) -> Primitive:
    """A primitive that runs its `KernelLaunch` parameter: evaluation, shapes, batching
    (leading axes are a batch; batched coefficients take one launch per member) and a
    lowering rule per platform. Derivative rules are the caller's to add."""
    primitive = Primitive(name)
    primitive.def_impl(_impl)
    primitive.def_abstract_eval(_abstract_eval)
    batching.primitive_batchers[primitive] = _batch
    for platform in PLATFORMS:
        mlir.register_lowering(primitive, _lowering(platform), platform=platform)
    return primitive


launch_p = launch_primitive("simlab_pallas_launch")
KernelLaunch.primitive = launch_p
