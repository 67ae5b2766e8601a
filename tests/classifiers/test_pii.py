"""The offline PII classifier: what it finds, what it must not, and that its
notes never quote what they found."""

from __future__ import annotations

import pytest

from sessiontree.classifiers.pii import PIIClassifier, find_pii, iban_valid, luhn_valid

CARD = "4111 1111 1111 1111"  # a test Visa number, Luhn-valid
SSN = "123-45-6789"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (f"my card is {CARD}, exp 12/29", "card number (Luhn-valid)"),
        ("card 5500-0000-0000-0004 please", "card number (Luhn-valid)"),
        ("pay to DE89 3704 0044 0532 0130 00 today", "IBAN (checksum-valid)"),
        ("GB82WEST12345698765432", "IBAN (checksum-valid)"),
        (f"SSN {SSN}", "US social security number"),
        ("write to jane.doe+test@example.co.uk now", "e-mail address"),
        ("call +1 415 555 2671 tonight", "phone number"),
        ("call (415) 555-2671", "phone number"),
        ("Festnetz 030 1234 5678", "phone number"),
    ],
)
def test_finds_each_kind(text: str, kind: str) -> None:
    assert kind in find_pii(text)


@pytest.mark.parametrize(
    "text",
    [
        "order 4111 1111 1111 1112 shipped",  # 16 digits, fails Luhn
        "0000 0000 0000 0000",  # Luhn-valid but no number at all
        "DE89 3704 0044 0532 0130 01",  # IBAN checksum off by one
        "ids 000-12-3456 666-12-3456 912-12-3456 123-00-4567 123-45-0000",  # invalid SSN parts
        "123456789",  # nine bare digits: not an SSN
        "version 1.2.3 released on 2026-11-20 at 14:05",
        "commit 4f3a9c2 and build 20261120",
        "no at sign here: user(at)example.com",
    ],
)
def test_ignores_lookalikes(text: str) -> None:
    assert find_pii(text) == {}


def test_checksums() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert iban_valid("DE89370400440532013000") and not iban_valid("DE89370400440532013001")


def test_a_card_is_not_also_counted_as_a_phone_number() -> None:
    assert find_pii(f"{CARD}") == {"card number (Luhn-valid)": 1}


def test_findings_name_kinds_and_counts_but_never_the_values() -> None:
    text = f"card {CARD}, again {CARD}; SSN {SSN}; mail a@b.io"
    (findings,) = PIIClassifier().classify([text])
    (finding,) = findings
    assert finding.category == "pii"
    assert "card number (Luhn-valid) x2" in finding.note and "US social security number" in finding.note
    for secret in ("4111", "1111", "6789", "a@b.io"):
        assert secret not in finding.note
    assert PIIClassifier().classify(["nothing personal", ""]) == [[], []]
