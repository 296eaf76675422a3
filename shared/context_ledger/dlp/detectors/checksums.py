"""Check digits that tell a real card number, IBAN or national id from a look-alike number."""

from __future__ import annotations

# IBAN length per country (ISO 13616 registry, SEPA countries and the most common others).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip

_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check used by payment card numbers."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def card_brand_known(digits: str) -> bool:
    """Whether the number has the length and issuer prefix of a major card network.

    Without this, any Luhn-valid run of 13-19 digits (one in ten: timestamps, ids) would pass.
    """
    length = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":  # Visa
        return length in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:  # Mastercard
        return length == 16
    if two in (34, 37):  # American Express
        return length == 15
    if digits.startswith("6011") or two == 65 or 644 <= int(digits[:3]) <= 649:  # Discover
        return 16 <= length <= 19
    if 3528 <= four <= 3589:  # JCB
        return 16 <= length <= 19
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:  # Diners Club
        return 14 <= length <= 19
    if two == 62:  # UnionPay
        return 16 <= length <= 19
    return False


def iban_valid(compact: str) -> bool:
    """ISO 13616: known country length, then mod 97 of the rearranged number equals 1."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rearranged)
    return int(number) % 97 == 1


def nir_valid(compact: str) -> bool:
    """French NIR (social security number): the two-digit key is 97 - (number mod 97).

    Corsican departments 2A and 2B count as 19 and 18 in the number.
    """
    body, key = compact[:13], compact[13:]
    department = {"2A": "19", "2B": "18"}.get(body[5:7])
    if department:
        body = body[:5] + department + body[7:]
    return body.isdigit() and 97 - int(body) % 97 == int(key)


def dni_valid(number: str, letter: str) -> bool:
    """Spanish DNI: the letter is fixed by the number mod 23."""
    return _DNI_LETTERS[int(number) % 23] == letter


def ssn_valid(area: str, group: str, serial: str) -> bool:
    """US SSN issuance rules: no area 000, 666 or 9xx, no group 00, no serial 0000."""
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"
