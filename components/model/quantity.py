"""Kubernetes quantities, the one grammar every amount of the config is read with.

A port of k8s.io/apimachinery/pkg/api/resource/quantity.go (the API server's own parser), so an
amount the config accepts is one the API server stores and the reverse; re-exported by
:mod:`components.model.grammar` beside the other consumers' grammars.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

# Kubernetes quantities: a port of k8s.io/apimachinery/pkg/api/resource/quantity.go
#
#   <quantity>        ::= <signedNumber><suffix>
#   <signedNumber>    ::= <number> | <sign><number>
#   <sign>            ::= "+" | "-"
#   <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
#   <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
#   <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
#   <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an integer: strconv.ParseInt)

_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
#: The characters parseQuantityString lets into a suffix before an exponent's sign and digits.
_SUFFIX_CHARS = "eEinumkKMGTP"
QUANTITY_HELP = (
    "a Kubernetes quantity: a number with an optional suffix Ki Mi Gi Ti Pi Ei (binary), "
    "n u m k M G T P E (decimal) or an exponent e3, e.g. 64, 500m, 512Gi, 1.5Ti"
)


#: "No matter which of the three exponent forms is used, no quantity may represent a number greater
#: than 2^63-1 in magnitude ... Numbers larger or more precise will be capped" (apimachinery
#: quantity.go, the Quantity doc comment); Kueue reads quotas as int64 (``Value``/``MilliValue``).
#: Beyond it the API would store another amount, and the elastic arithmetic's decimals overflow.
MAX_QUANTITY = Decimal(2**63 - 1)


class QuantityError(ValueError):
    """``ParseQuantity`` would return ErrFormatWrong, ErrSuffix or ErrNumeric."""


def _split_quantity(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, numerator, denominator, suffix).

    Like upstream, leading zeros are dropped and ``1.`` and ``.5`` are numbers. Stricter in one
    way: the number needs a digit. Upstream's loop reads ``-``, ``.`` and ``Gi`` as 0, which the
    grammar in its own doc comment (above) does not allow, and a quota of ``Gi`` is a typo.
    """
    if not re.match(r"[+-]?\.?[0-9]", text):
        raise QuantityError(f"{text!r} does not start with a number; {QUANTITY_HELP}")
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isascii() and text[pos].isdigit():
        pos += 1
    if pos < end:
        raise QuantityError(f"{text!r} is not {QUANTITY_HELP}")
    return positive, value, num, denom, text[suffix_start:]


def parse_quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity string, or :class:`QuantityError` where the API refuses it."""
    if not text:
        raise QuantityError(f"{text!r} is not {QUANTITY_HELP}")
    if text == "0":
        return Decimal(0)
    positive, _value, num, denom, suffix = _split_quantity(text)
    if suffix in _DECIMAL_SI:
        scale = Decimal(10) ** _DECIMAL_SI[suffix]
    elif suffix in _BINARY_SI:
        scale = Decimal(2) ** _BINARY_SI[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        exponent = int(suffix[1:])
        if not -(2**63) <= exponent < 2**63:  # strconv.ParseInt(..., 10, 64)
            raise QuantityError(f"{text!r}: the exponent {suffix[1:]} is out of range")
        # Upstream then narrows it to int32 (a huge exponent wraps); only validity and sign
        # matter here, so the magnitude is clamped instead.
        # (10**±10**5 stays inside decimal's default exponent range, ±999999: 10**6 overflowed.)
        scale = Decimal(10) ** max(min(exponent, 10**5), -(10**5))
    else:
        raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}; {QUANTITY_HELP}")
    try:
        amount = Decimal(f"{num}.{denom or '0'}") * scale
    except InvalidOperation:
        raise QuantityError(f"{text!r} is not {QUANTITY_HELP}") from None
    return amount if positive else -amount


def check_quantity(value: Any) -> str:
    """A non-negative quantity (requests, limits, quotas); YAML numbers are taken as their text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not {QUANTITY_HELP}")
    text = value if isinstance(value, str) else str(value)
    amount = parse_quantity(text)
    if amount < 0:
        raise ValueError(f"{text!r} is negative; a quota or request is 0 or more")
    if amount > MAX_QUANTITY:
        raise ValueError(
            f"{text!r} is more than {MAX_QUANTITY} (2^63-1), the largest quantity Kubernetes holds (it caps a "
            "larger one: quantity.go); e.g. 7Ei at most for memory"
        )
    return text
