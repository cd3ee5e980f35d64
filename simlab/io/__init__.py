"""Files simlab writes: the on-disk sweep store (zarr), written chunk by chunk, durably, and
single files written whole or not at all."""

from ._atomic import atomic_write as atomic_write
from ._store import (
    DamagedStore as DamagedStore,
    StoreLayout as StoreLayout,
    SweepStore as SweepStore,
    VariableSpec as VariableSpec,
)
