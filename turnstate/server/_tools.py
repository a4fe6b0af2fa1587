"""The small tool set the reference server offers, so tool loops can be tried from the page.

``weather`` answers from a fixed table (deterministic, no network), ``calculator``
evaluates arithmetic through a whitelist of syntax nodes (never ``eval``), ``clock``
tells the current UTC time with an optional whole-hour offset.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from turnstate.core._conversation import Tool, ToolSpec

_FORECASTS = {"lisbon": ("sunny", 21), "porto": ("cloudy", 17), "paris": ("rain", 12),
              "tokyo": ("clear", 19), "new york": ("windy", 9)}

_OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}
_MAX_EXPRESSION = 200
_MAX_EXPONENT = 64
_MAX_RESULT_BITS = 1024
"""The largest integer result (about 308 digits, a float's range)."""


class CalculatorError(ValueError):
    """The expression is not plain arithmetic (or is too large to evaluate)."""


def calculate(expression: str) -> float:
    """Evaluate ``+ - * / // % **`` and parentheses over numbers."""
    if len(expression) > _MAX_EXPRESSION:
        msg = "the expression is too long"
        raise CalculatorError(msg)
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        msg = f"not an arithmetic expression: {exc.msg}"
        raise CalculatorError(msg) from None
    return _evaluate(tree.body)


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return _bounded(node.value)  # 1e999 reads as infinity
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            return _bounded(_OPERATORS[type(node.op)](left, right))
        except ZeroDivisionError:
            msg = "division by zero"
            raise CalculatorError(msg) from None
        except OverflowError:  # a float beyond its range
            msg = "the result is too large"
            raise CalculatorError(msg) from None
    msg = f"unsupported syntax: {type(node).__name__}"
    raise CalculatorError(msg)


def _check_power(base: float, exponent: float) -> None:
    """Refuse a power whose integer result would pass ``_MAX_RESULT_BITS``, before it is
    computed: each exponent is bounded, but a power of a power grows as a tower."""
    if abs(exponent) > _MAX_EXPONENT:
        msg = "the exponent is too large"
        raise CalculatorError(msg)
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 \
            and (abs(base).bit_length() - 1) * exponent >= _MAX_RESULT_BITS:
        msg = "the result is too large"
        raise CalculatorError(msg)


def _bounded(value: float) -> float:
    """``value`` when it is a real number within ``_MAX_RESULT_BITS`` (a negative base's
    fractional power is complex) or a finite float (a float product or sum past its
    range is infinity without an ``OverflowError``, and infinity minus itself NaN)."""
    if isinstance(value, complex):
        msg = "the result is not a real number"
        raise CalculatorError(msg)
    if (isinstance(value, int) and value.bit_length() > _MAX_RESULT_BITS) \
            or (isinstance(value, float) and not math.isfinite(value)):
        msg = "the result is too large"
        raise CalculatorError(msg)
    return value


async def _weather(args: dict[str, Any]) -> Any:
    city = str(args.get("city", "")).strip()
    sky, temp = _FORECASTS.get(city.lower(), ("mild", 18))
    return {"city": city or "unknown", "forecast": sky, "tempC": temp}


async def _calculator(args: dict[str, Any]) -> Any:
    expression = str(args.get("expression", ""))
    return {"expression": expression, "result": calculate(expression)}


async def _clock(args: dict[str, Any]) -> Any:
    offset = args.get("utc_offset_hours", 0)
    if not isinstance(offset, int) or not -12 <= offset <= 14:
        offset = 0
    now = datetime.now(UTC) + timedelta(hours=offset)
    return {"utcOffsetHours": offset, "time": now.strftime("%Y-%m-%d %H:%M")}


def _spec(name: str, description: str, properties: dict[str, Any],
          required: list[str]) -> ToolSpec:
    return ToolSpec(name=name, description=description,
                    parameters={"type": "object", "properties": properties,
                                "required": required})


DEMO_TOOLS: dict[str, Tool] = {
    "weather": Tool(spec=_spec("weather", "Current weather of a city",
                               {"city": {"type": "string"}}, ["city"]), handler=_weather),
    "calculator": Tool(spec=_spec("calculator", "Evaluate an arithmetic expression",
                                  {"expression": {"type": "string"}}, ["expression"]),
                       handler=_calculator),
    "clock": Tool(spec=_spec("clock", "The current date and time",
                             {"utc_offset_hours": {"type": "integer"}}, []), handler=_clock),
}
"""The server's tools by name; a turn asks for a subset with ``tools: [names]``."""
