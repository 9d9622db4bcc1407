"""`--max-pods-expression`: a CEL expression nodeadm evaluates into the kubelet's maxPods. Pure.

nodeadm (AL2023, `spec.kubelet.maxPodsExpression`) compiles the expression at `nodeadm init` with
three integer variables: ``default_enis`` (network interfaces on the default network card),
``ips_per_eni`` (IPv4 addresses per interface) and ``max_pods`` (the standard value,
``default_enis * (ips_per_eni - 1) + 2``). A result that is not a positive integer, or an
expression that does not compile, is only logged there, and the node falls back to the standard
value; `nodeadm config check` accepts any string. So amibuild compiles and evaluates it here, with
the same variables over a few real instance types, and refuses a bad one before anything is written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from amibuild.errors import SpecError

VARIABLES = ("default_enis", "ips_per_eni", "max_pods")
MAX_LENGTH = 1024
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Sample:
    """One instance type's network limits, as `ec2 describe-instance-types` gives them."""

    instance_type: str
    default_enis: int
    ips_per_eni: int

    @property
    def max_pods(self) -> int:
        return self.default_enis * (self.ips_per_eni - 1) + 2


# Small to large (EC2's published limits): an expression is evaluated over each.
SAMPLES = (Sample("t3.medium", 3, 6), Sample("m5.large", 3, 10), Sample("m5.4xlarge", 8, 30),
           Sample("c5.18xlarge", 15, 50))


def check_expression(text: str, flag: str = "--max-pods-expression") -> str:
    """``text`` when nodeadm can turn it into a max pods value, else SpecError naming ``flag``."""
    if not text.strip():
        raise SpecError(f"{flag}: give a CEL expression, e.g. \"max_pods < 30 ? max_pods : 30\"")
    if len(text) > MAX_LENGTH or not text.isprintable() or not text.isascii():
        raise SpecError(f"{flag}: one line of at most {MAX_LENGTH} printable ASCII characters")
    import celpy  # only with a max pods expression: celpy and its lark grammar take ~40 ms to import

    environment = celpy.Environment()
    try:
        tree = environment.compile(text)
    except celpy.CELParseError:
        raise SpecError(f"{flag} {text!r}: not a CEL expression (it does not parse)") from None
    unknown = sorted({str(token) for node in tree.find_data("ident") for token in node.children} - set(VARIABLES))
    if unknown:
        raise SpecError(f"{flag} {text!r}: unknown variable {unknown[0]}; nodeadm gives {', '.join(VARIABLES)}")
    program = environment.program(tree)
    values = {sample: _evaluate(celpy, program, sample, text, flag) for sample in SAMPLES}
    # Non-positive on a small type may be meant (the node falls back to the standard value there);
    # on every type it never is.
    if not any(0 < value <= _INT32_MAX for value in values.values()):
        shown = ", ".join(f"{s.instance_type} {v}" for s, v in values.items())
        raise SpecError(f"{flag} {text!r}: gives no positive whole number below 2^31 on any instance type "
                        f"({shown}); nodeadm would ignore it")
    return text


def _evaluate(celpy: Any, program: Any, sample: Sample, text: str, flag: str) -> int:
    """``program`` (a `celpy.Runner`) evaluated over ``sample``'s variables, as a whole number.
    ``celpy`` is the module, imported by `check_expression`."""
    celtypes = celpy.celtypes
    activation = {name: celtypes.IntType(getattr(sample, name)) for name in VARIABLES}
    try:
        result = program.evaluate(activation)
    except celpy.CELEvalError as exc:
        result = exc
    if isinstance(result, celpy.CELEvalError):  # raised, or returned as the value (celpy does both)
        raise SpecError(f"{flag} {text!r}: fails on {sample.instance_type}: {result.args[0] if result.args else result}")
    # As nodeadm converts the result to CEL's int: a whole-number string and a double convert, a bool does not.
    if isinstance(result, celtypes.StringType) and re.fullmatch(r"[+-]?[0-9]{1,18}", str(result)):
        return int(str(result))
    if isinstance(result, celtypes.BoolType) or not isinstance(result, (celtypes.IntType, celtypes.UintType,
                                                                          celtypes.DoubleType)):
        raise SpecError(f"{flag} {text!r}: gives {type(result).__name__.removesuffix('Type').lower()} "
                        f"{result!s}, not a whole number")
    if isinstance(result, celtypes.DoubleType) and not math.isfinite(result):
        raise SpecError(f"{flag} {text!r}: gives {result} on {sample.instance_type}, not a whole number")
    return int(result)
