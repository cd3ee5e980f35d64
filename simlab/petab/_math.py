"""SBML math as SymPy expressions.

libsbml writes each formula as infix text (`formulaToL3String`) and SymPy reads it back. Every
identifier is renamed to a neutral alias before the text is written, so that no SBML id can be
mistaken for a SymPy name (`beta`, `E`, `S`, `gamma`) or a Python keyword; the aliases map
back to one symbol per id. Math that has no faithful SymPy reading here is refused by name.
"""

import jax.numpy as jnp
import libsbml
import sympy

TIME = sympy.Symbol("time", real=True)
"""Simulation time: SBML's `time` csymbol and PEtab's `time`."""


def symbol(name: str) -> sympy.Symbol:
    """The symbol of an SBML or PEtab identifier (real, as PEtab's formula reader makes them,
    so that the two readings of a name are the same symbol)."""
    return sympy.Symbol(name, real=True)


def lambdify(arguments: list, expressions, *, cse: bool = True):
    """`sympy.lambdify(arguments, expressions, "jax")` whose list arguments (lists of
    symbols) take 1-D arrays: each array is split into its entries (`jnp.unstack`) before the
    SymPy function unpacks them. Unpacking an array by iteration, as the SymPy function
    would, goes through JAX's iteration in chunks of 100, which fails under `jax.jit` for
    longer arrays (`TracerIntegerConversionError`)."""
    function = sympy.lambdify(arguments, expressions, "jax", cse=cse)
    unpack = tuple(isinstance(argument, list | tuple) for argument in arguments)

    def call(*values):
        return function(
            *(
                list(jnp.unstack(jnp.asarray(value))) if split and len(argument) else value
                for value, split, argument in zip(values, unpack, arguments, strict=True)
            )
        )

    return call


# Node types that the translation reads faithfully.
_SUPPORTED = {
    getattr(libsbml, name)
    for name in (
        "AST_INTEGER",
        "AST_REAL",
        "AST_REAL_E",
        "AST_RATIONAL",
        "AST_NAME",
        "AST_NAME_TIME",
        "AST_CONSTANT_E",
        "AST_CONSTANT_PI",
        "AST_CONSTANT_TRUE",
        "AST_CONSTANT_FALSE",
        "AST_PLUS",
        "AST_MINUS",
        "AST_TIMES",
        "AST_DIVIDE",
        "AST_POWER",
        "AST_FUNCTION_POWER",
        "AST_FUNCTION_EXP",
        "AST_FUNCTION_LN",
        "AST_FUNCTION_LOG",
        "AST_FUNCTION_ROOT",
        "AST_FUNCTION_ABS",
        "AST_FUNCTION_FLOOR",
        "AST_FUNCTION_CEILING",
        "AST_FUNCTION_SIN",
        "AST_FUNCTION_COS",
        "AST_FUNCTION_TAN",
        "AST_FUNCTION_TANH",
        "AST_FUNCTION_PIECEWISE",
        "AST_RELATIONAL_LT",
        "AST_RELATIONAL_LEQ",
        "AST_RELATIONAL_GT",
        "AST_RELATIONAL_GEQ",
    )
}

# Logical operators and (in)equalities, written as calls of these functions.
_LOGICAL = {
    getattr(libsbml, name): function
    for name, function in (
        ("AST_LOGICAL_AND", "_sbml_and"),
        ("AST_LOGICAL_OR", "_sbml_or"),
        ("AST_LOGICAL_NOT", "_sbml_not"),
        ("AST_LOGICAL_XOR", "_sbml_xor"),
        ("AST_RELATIONAL_EQ", "_sbml_eq"),
        ("AST_RELATIONAL_NEQ", "_sbml_neq"),
    )
}

# What to call a refused node type in an error message.
_REFUSED_NAMES = {
    "AST_FUNCTION_DELAY": "the delay() function",
    "AST_FUNCTION_RATE_OF": "the rateOf() function",
    "AST_NAME_AVOGADRO": "the avogadro constant",
    "AST_FUNCTION": "a call to an undefined function",
    "AST_LAMBDA": "a lambda expression",
}


def _refused_name(node: libsbml.ASTNode) -> str:
    for name, text in _REFUSED_NAMES.items():
        if node.getType() == getattr(libsbml, name, None):
            return text
    return f"the math element {node.getName() or node.getType()!r}"


def _piecewise(*pieces) -> sympy.Expr:
    """SBML's `piecewise(value1, condition1, ..., otherwise)` as a SymPy `Piecewise`."""
    pairs = [(pieces[i], pieces[i + 1]) for i in range(0, len(pieces) - 1, 2)]
    if len(pieces) % 2:
        pairs.append((pieces[-1], True))
    return sympy.Piecewise(*pairs)


_FUNCTIONS = {
    # libsbml writes a product or sum of fewer than two terms as a call (`times(a)`).
    "times": lambda *terms: sympy.Mul(*terms),
    "plus": lambda *terms: sympy.Add(*terms),
    "exp": sympy.exp,
    "ln": sympy.log,
    "log10": lambda x: sympy.log(x, 10),
    "log": lambda base, x: sympy.log(x, base),
    "sqrt": sympy.sqrt,
    "root": lambda degree, x: x ** (1 / sympy.sympify(degree)),
    "pow": sympy.Pow,
    "abs": sympy.Abs,
    "floor": sympy.floor,
    "ceil": sympy.ceiling,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "tanh": sympy.tanh,
    "piecewise": _piecewise,
    "exponentiale": sympy.E,
    "pi": sympy.pi,
    "true": sympy.true,
    "false": sympy.false,
    "_sbml_and": sympy.And,
    "_sbml_or": sympy.Or,
    "_sbml_not": sympy.Not,
    "_sbml_xor": sympy.Xor,
    "_sbml_eq": sympy.Eq,
    "_sbml_neq": sympy.Ne,
}


def to_sympy(math: libsbml.ASTNode | None, where: str) -> sympy.Expr:
    """The SymPy expression of an SBML math element; `where` names its place in the model
    (e.g. "the kinetic law of reaction v1") for error messages."""
    if math is None:
        raise ValueError(f"SBML: {where} has no math.")
    node = math.deepCopy()
    aliases: dict[str, sympy.Symbol] = {}
    names: dict[str, str] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        kind = current.getType()
        if kind in _LOGICAL:
            current.setType(libsbml.AST_FUNCTION)
            current.setName(_LOGICAL[kind])
        elif kind not in _SUPPORTED:
            raise NotImplementedError(f"SBML: {where} uses {_refused_name(current)}.")
        if kind == libsbml.AST_NAME_TIME:
            current.setType(libsbml.AST_NAME)
            current.setName("_sbml_time")
            aliases["_sbml_time"] = TIME
        elif kind == libsbml.AST_NAME:
            name = current.getName()
            if name not in names:
                names[name] = f"_sbml_{len(names)}"
                aliases[names[name]] = symbol(name)
            current.setName(names[name])
        stack.extend(current.getChild(i) for i in range(current.getNumChildren()))
    text = libsbml.formulaToL3String(node)
    return sympy.sympify(text, locals={**_FUNCTIONS, **aliases}, convert_xor=True)
