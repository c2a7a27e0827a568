"""Country and language codes of a market, normalised the way the original service does (SPEC §3).

Countries come from pycountry (ISO 3166-1), never a hand-typed table; languages are BCP-47 tags checked
against the Semrush language catalogue. A market is sent in any case and stored in capitals (`us` -> `US`);
a language is lower-cased (`IT` -> `it`, `de-CH` -> `de-ch`) and must be a primary subtag of two or three
letters with an optional region or script subtag.
"""

import json
import re
from functools import cache
from pathlib import Path

import pycountry

ALPHA2 = r"^[A-Za-z]{2}$"
LANGUAGE_TAG = r"^[a-z]{2,3}(-[a-z]{2,4})?$"
_LANGUAGE_TAG = re.compile(LANGUAGE_TAG)

# Every ISO 3166-1 alpha-2 code, in capitals (249; Kosovo's XK has no ISO numeric code and is not one).
COUNTRY_CODES = tuple(sorted(c.alpha_2 for c in pycountry.countries))
_COUNTRIES = frozenset(COUNTRY_CODES)

# The Semrush language catalogue as Semrush answered it (markets/data/semrush_languages.json). The API schema
# is generated from it; at request time the live catalogue (SemrushClient.languages) decides.
CATALOGUE_FILE = Path(__file__).resolve().parent / "data" / "semrush_languages.json"


def country_code(value) -> str | None:
    """The ISO 3166-1 alpha-2 code for `value` in any case (`us` -> `US`), or None when it names no country."""
    if not isinstance(value, str) or not re.fullmatch(ALPHA2, value):
        return None
    code = value.upper()
    return code if code in _COUNTRIES else None


# Every country's criterion id falls here (2000 + a three-digit ISO numeric code): a market's geo target id is one.
COUNTRY_GEO_TARGET_IDS = range(2000, 3000)


def geo_target_id(alpha2: str) -> int:
    """Google Ads country criterion id: 2000 + ISO 3166-1 numeric (US 2840, FR 2250, DE 2276)."""
    found = pycountry.countries.get(alpha_2=alpha2.upper()) if isinstance(alpha2, str) else None
    if found is None:
        raise ValueError("not an ISO 3166-1 alpha-2 country code")
    return 2000 + int(found.numeric)


def language_tag(value) -> str | None:
    """`value` lower-cased when it is a BCP-47 tag of the accepted form (`de-CH` -> `de-ch`), else None."""
    if not isinstance(value, str):
        return None
    tag = value.lower()
    return tag if _LANGUAGE_TAG.fullmatch(tag) else None


def language_in(catalogue: list[dict], tag: str) -> dict | None:
    """The catalogue entry a (normalised) language tag resolves to: the entry whose code is the whole tag
    (`zh-tw`), else the one whose code is its primary subtag (`de-ch` -> `de`); None when Semrush has neither."""
    by_code = {str(entry.get("code", "")).lower(): entry for entry in catalogue if isinstance(entry, dict)}
    return by_code.get(tag) or by_code.get(tag.split("-", 1)[0])


@cache
def known_languages() -> tuple[dict, ...]:
    return tuple(json.loads(CATALOGUE_FILE.read_text())["items"])


def any_case(codes) -> str:
    """A regular expression (ECMA 262, as JSON Schema uses) matching exactly `codes`, in any case."""

    def letters(code: str) -> str:
        return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in code)

    return "(?:" + "|".join(letters(code) for code in sorted(codes, key=lambda c: (-len(c), c))) + ")"


# The schema's patterns: exactly the values the server accepts (the languages: as the catalogue stood).
MARKET_PATTERN = f"^{any_case(COUNTRY_CODES)}$"
LANGUAGE_PATTERN = f"^{any_case({e['code'].split('-')[0] for e in known_languages()})}(?:-[A-Za-z]{{2,4}})?$"
