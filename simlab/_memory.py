"""Sizes refused before anything is allocated: the bytes a request needs against the
memory of the machine that would hold them, with the size and the fix in the message."""

import os

import jax


def machine_memory(*, device: bool) -> int | None:
    """The bytes the default device can hold (`device`, where its runtime says), else the
    host's physical memory; `None` where neither is known."""
    if device:
        stats = jax.devices()[0].memory_stats() or {}
        if "bytes_limit" in stats:
            return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


# Below this no machine's memory is asked for: asking the device starts JAX's backend,
# which must not happen before a multi-process cluster is initialised (a grid built first
# would start a single-process backend).
NO_MACHINE_HOLDS_LESS = 2**30


def check_fits(what: str, num_bytes: int | float, fix: str, *, device: bool) -> None:
    """Refuses `what` where its `num_bytes` exceed `machine_memory`, naming both and `fix`."""
    if num_bytes < NO_MACHINE_HOLDS_LESS:
        return
    limit = machine_memory(device=device)
    if limit is not None and num_bytes > limit:
        where = "the device" if device else "this machine"
        raise ValueError(
            f"{what} would need {num_bytes / 2**30:.3g} GiB of memory, more than the "
            f"{limit / 2**30:.3g} GiB {where} has; {fix}."
        )
