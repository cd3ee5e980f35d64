"""Files simlab writes: the on-disk sweep store (zarr), written chunk by chunk, durably."""

from ._store import (
    DurableLocalStore as DurableLocalStore,
    StoreLayout as StoreLayout,
    SweepStore as SweepStore,
    VariableSpec as VariableSpec,
)
