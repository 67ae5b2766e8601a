"""An offline classifier of personal data: e-mail addresses, phone numbers,
payment card numbers (with the Luhn check), IBANs (with their mod-97
checksum) and US social security numbers.

Patterns alone flag too much (an order number is not a card number), so the
numbers that carry a checksum must pass it, and SSNs need their separators
and a valid area/group/serial. Matches are taken most specific first (IBANs,
cards, SSNs, e-mail, phones) and a later kind never re-reads a span an
earlier one took. The finding's note names the kinds and how many of each,
never a matched value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .base import Finding

CATEGORY = "pii"

# A card number as people write one: 13-19 digits in one run, or in groups of
# four with one kind of separator (4-4-4-4, 4-4-4-4-3), or Amex's 4-6-5.
_CARD = re.compile(
    r"(?<![\d-])(?:\d{13,19}|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?|\d{4}([ -])\d{6}\2\d{4,5})(?![\d-])"
)
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\d-])")
_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}\.)+[A-Za-z]{2,24}\b"
)
# A phone number: an international one (+ and 8-15 digits), or a national one
# written with separators ((555) 123-4567, 030 1234 5678); bare digit runs are
# left out (they are order numbers and timestamps far more often).
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
    r"|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}"
    r"|\d{2,4}([ .-])\d{3,4}\1\d{3,5})(?![\w])"
)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum of a card number (digits only)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    """ISO 13616: letters as numbers (A=10 … Z=35), the first four characters
    moved to the end, the whole number mod 97 is 1."""
    iban = candidate.replace(" ", "")
    if not 15 <= len(iban) <= 34:
        return False
    moved = iban[4:] + iban[:4]
    number = "".join(str(int(char, 36)) for char in moved)
    return int(number) % 97 == 1


def _digits(text: str) -> str:
    return "".join(char for char in text if char.isdigit())


def _card(match: str) -> bool:
    digits = _digits(match)
    return 13 <= len(digits) <= 19 and luhn_valid(digits) and len(set(digits)) > 1


def _phone(match: str) -> bool:
    return 7 <= len(_digits(match)) <= 15


@dataclass(frozen=True)
class _Kind:
    name: str
    pattern: re.Pattern[str]
    accept: Callable[[str], bool]
    consumes: bool = False  # a match that fails ``accept`` still takes its span


KINDS: tuple[_Kind, ...] = (
    _Kind("IBAN (checksum-valid)", _IBAN, iban_valid, consumes=True),
    _Kind("card number (Luhn-valid)", _CARD, _card, consumes=True),
    _Kind("US social security number", _SSN, lambda match: True),
    _Kind("e-mail address", _EMAIL, lambda match: True),
    _Kind("phone number", _PHONE, _phone),
)


def find_pii(text: str) -> dict[str, int]:
    """How many matches of each kind ``text`` holds (kinds without one left out)."""
    taken: list[tuple[int, int]] = []
    counts: dict[str, int] = {}
    for kind in KINDS:
        for match in kind.pattern.finditer(text):
            start, end = match.span()
            if any(start < taken_end and taken_start < end for taken_start, taken_end in taken):
                continue
            if kind.accept(match.group(0)):
                counts[kind.name] = counts.get(kind.name, 0) + 1
                taken.append((start, end))
            elif kind.consumes:
                # A long number whose checksum fails is some other number (an
                # order id, a reference): no later kind reads it as a phone.
                taken.append((start, end))
    return counts


class PIIClassifier:
    """Personal data found by patterns and checksums; offline and deterministic."""

    name = "pii"

    def classify(self, texts: Sequence[str]) -> list[list[Finding]]:
        results: list[list[Finding]] = []
        for text in texts:
            counts = find_pii(text) if text else {}
            if not counts:
                results.append([])
                continue
            note = ", ".join(f"{name} x{count}" if count > 1 else name for name, count in counts.items())
            results.append([Finding(CATEGORY, f"Personal data: {note}", 1.0)])
        return results
