"""How simlab's objects show their values: numbers, abbreviated arrays, tables as text and
HTML.

The models and the result objects build their rows of text here and render them with
`call`, `table` or `html_table`. Nothing here reads a value that is still being traced:
`is_traced` tells the callers to keep Equinox's tree view instead.
"""

import dataclasses
import html
import math
import numbers
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

WIDTH = 88  # characters of a line of text output
DIGITS = 6  # significant digits of a number
EDGE_ITEMS = 3  # values shown at each end of an abbreviated array
SMALL_ARRAY = 8  # arrays up to this many values are shown whole
ELLIPSIS = "..."

# Writes the values it knows (a nested model, a grid) and returns None for the others.
Custom = Callable[[Any], str | None]


def is_traced(tree: Any) -> bool:
    """Whether any leaf of `tree` is a tracer: a value only known at run time under `jit`,
    `vmap` or `grad`, which must not be read (nor printed as a number); or a shape
    without a value, as `jax.eval_shape` returns."""
    return any(
        isinstance(leaf, jax.core.Tracer | jax.ShapeDtypeStruct)
        for leaf in jax.tree_util.tree_leaves(tree)
    )


def number(value: Any, digits: int = DIGITS) -> str:
    """A scalar as a short number: `0.55`, `3e7`, `1.5e-6`, `12`, `nan`, `True`."""
    value = value.item() if isinstance(value, np.generic | np.ndarray | jax.Array) else value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, complex):
        imaginary = number(abs(value.imag), digits)
        return f"{number(value.real, digits)}{'-' if value.imag < 0 else '+'}{imaginary}j"
    if not isinstance(value, numbers.Real):
        return str(value)
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    text = f"{value:.{digits}g}"
    if "e" in text:  # 3e+07 → 3e7, 1.5e-06 → 1.5e-6
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def array(value: Any, *, edge: int = EDGE_ITEMS, small: int = SMALL_ARRAY) -> str:
    """An array's values, NumPy-style: a scalar as a number, a small array whole
    (`[30, 4]`), a larger one abbreviated to its first and last values and its shape
    (`[0, 0.2, 0.4, ..., 19.6, 19.8, 20] shape (101,)`)."""
    shape = tuple(np.shape(value))
    try:
        values = np.asarray(value)
    except (TypeError, ValueError, RuntimeError):  # e.g. a PRNG key, or not addressable here
        dtype = getattr(value, "dtype", "array")
        return f"{dtype}[{','.join(map(str, shape))}]"
    if values.dtype.kind == "V" and jnp.issubdtype(values.dtype, jnp.floating):
        values = values.astype(np.float32)  # bfloat16 and the other ML formats
    if values.dtype.kind not in "biufc":
        return repr(values.tolist()) if values.size <= small else f"array of shape {shape}"
    if values.ndim == 0:
        return number(values)
    if values.size <= small:
        return _nested(values)
    flat = values.reshape(-1)
    head = ", ".join(number(x) for x in flat[:edge])
    tail = ", ".join(number(x) for x in flat[-edge:])
    return f"[{head}, {ELLIPSIS}, {tail}] shape {shape}"


def spread(value: Any) -> str:
    """A count or a value per member, compactly: the number where all are equal, else
    `lowest to highest`."""
    values = np.asarray(value)
    if values.dtype.kind not in "biuf":
        return array(values)
    if values.size == 0:
        return "none"
    low, high = values.min(), values.max()
    return number(low) if low == high else f"{number(low)} to {number(high)}"


def _nested(values: np.ndarray | np.generic) -> str:
    if values.ndim == 0:
        return number(values)
    return "[" + ", ".join(_nested(row) for row in values) + "]"


def with_unit(text: str, unit: str) -> str:
    """`text [unit]`, or `text` alone where there is no unit."""
    return f"{text} [{unit}]" if unit else text


def value(item: Any, custom: Custom | None = None) -> str:
    """Any field's value as text: numbers and arrays by their values; tuples, lists and
    dicts item by item; a small module (a dataclass) with its fields, a large one (a neural
    network) by the number of values it holds; anything else by its `repr`. `custom`
    answers first where it returns text (e.g. a nested model or a grid)."""
    if custom is not None and (text := custom(item)) is not None:
        return text
    if isinstance(item, str):
        return repr(item)
    if isinstance(item, bool | numbers.Number | np.generic):
        return number(item)
    if isinstance(item, np.ndarray | jax.Array):
        return array(item)
    if isinstance(item, dict):
        return "{" + ", ".join(f"{key!r}: {value(x, custom)}" for key, x in item.items()) + "}"
    if isinstance(item, tuple | list):
        inner = ", ".join(value(x, custom) for x in item)
        if isinstance(item, list):
            return f"[{inner}]"
        return f"({inner},)" if len(item) == 1 else f"({inner})"
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        size = sum(np.size(leaf) for leaf in jax.tree_util.tree_leaves(item))
        if size > SMALL_ARRAY:
            return f"{type(item).__name__}({size} values)"
        return call(type(item).__name__, shown_fields(item, custom))
    return repr(item)


def shown_fields(item: Any, custom: Custom | None = None) -> list[tuple[str, str]]:
    """`(name, text)` of a dataclass's fields as `value` writes them, leaving out fields
    marked `repr=False` and static fields (settings) at their default."""
    shown = []
    for field in dataclasses.fields(item):
        if not field.repr:
            continue
        current = getattr(item, field.name, None)
        if field.metadata.get("static", False) and _is_default(field, current):
            continue
        shown.append((field.name, value(current, custom)))
    return shown


def _is_default(field: dataclasses.Field, current: Any) -> bool:
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        return False
    try:
        return bool(current == default)
    except (TypeError, ValueError):  # e.g. an array compared elementwise
        return False


def call(name: str, fields: Sequence[tuple[str, str]], width: int = WIDTH) -> str:
    """`Name(a=1, b=2)` on one line where it fits in `width`, else one field a line."""
    one_line = f"{name}({', '.join(f'{key}={text}' for key, text in fields)})"
    if len(one_line) <= width and "\n" not in one_line:
        return one_line
    lines = [f"{key}={text}".replace("\n", "\n  ") for key, text in fields]
    return f"{name}(\n  " + ",\n  ".join(lines) + "\n)"


def table(
    rows: Sequence[Sequence[str]],
    *,
    title: str = "",
    header: Sequence[str] | None = None,
    width: int = WIDTH,
) -> str:
    """Rows of text as aligned columns under `title`, indented two spaces; the last column
    wraps to `width` with its continuation lines aligned (keys and values, or a header
    and its columns)."""
    everything = ([list(header)] if header else []) + [list(row) for row in rows]
    if not everything:
        return title
    columns = max(len(row) for row in everything)
    everything = [row + [""] * (columns - len(row)) for row in everything]
    widths = [max(len(row[j]) for row in everything) for j in range(columns - 1)]
    left = 2 + sum(w + 2 for w in widths)
    lines = [title] if title else []
    for row in everything:
        start = "  " + "".join(cell.ljust(w + 2) for cell, w in zip(row, widths, strict=False))
        last = row[-1]
        wrapped = textwrap.wrap(last, max(width - left, 30)) if len(last) + left > width else []
        pieces = wrapped or [last]
        lines.append((start + pieces[0]).rstrip())
        lines.extend(" " * left + piece for piece in pieces[1:])
    return "\n".join(lines)


def html_table(
    rows: Sequence[Sequence[str]],
    *,
    title: str = "",
    header: Sequence[str] | None = None,
) -> str:
    """The same rows as a compact HTML table (no scripts, every text escaped), with `title`
    as its caption; a row shorter than the widest spans the remaining columns."""
    columns = max((len(row) for row in [*rows, header or ()]), default=1)
    parts = ['<table class="simlab">']
    if title:
        parts.append(f'<caption style="text-align:left">{html.escape(title)}</caption>')
    if header:
        parts.append("<thead>" + _html_row(header, columns, "th") + "</thead>")
    parts.append("<tbody>")
    parts.extend(_html_row(row, columns, "td") for row in rows)
    parts.append("</tbody></table>")
    return "".join(parts)


def _html_row(row: Sequence[str], columns: int, tag: str) -> str:
    spans = [1] * (len(row) - 1) + [columns - len(row) + 1]
    cells = (
        f'<{tag}{f" colspan={span}" if span > 1 else ""} style="text-align:left">'
        f"{html.escape(cell)}</{tag}>"
        for cell, span in zip(row, spans, strict=True)
    )
    return "<tr>" + "".join(cells) + "</tr>"


def html_text(text: str) -> str:
    """Plain text for a notebook, escaped: what a traced object shows instead of a table."""
    return f"<pre>{html.escape(text)}</pre>"


def rows_text(obj: Any, rows: Callable[[], list], title: str) -> str:
    """`obj`'s rows as a text table, or Equinox's tree view while its values are traced."""
    return eqx.tree_pformat(obj) if is_traced(obj) else table(rows(), title=title)


def rows_html(obj: Any, rows: Callable[[], list], title: str) -> str:
    """`obj`'s rows as an HTML table, or Equinox's tree view while its values are traced."""
    if is_traced(obj):
        return html_text(eqx.tree_pformat(obj))
    return html_table(rows(), title=title)
