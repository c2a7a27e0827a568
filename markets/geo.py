"""Country and language codes, from pycountry (ISO 3166-1 and ISO 639), never a hand-typed table."""
import pycountry


def country(alpha2: str):
    """The ISO 3166-1 country for an alpha-2 code (case-insensitive), or None."""
    if not isinstance(alpha2, str) or len(alpha2) != 2 or not alpha2.isalpha():
        return None
    return pycountry.countries.get(alpha_2=alpha2.upper())


def is_country(alpha2: str) -> bool:
    return country(alpha2) is not None


def geo_target_id(alpha2: str) -> int:
    """Google Ads country criterion id: 2000 + ISO 3166-1 numeric (US 2840, FR 2250, DE 2276)."""
    found = country(alpha2)
    if found is None:
        raise ValueError("not an ISO 3166-1 alpha-2 country code")
    return 2000 + int(found.numeric)


def is_language(code: str) -> bool:
    """True for an ISO 639-1 two-letter language code (lowercase), e.g. `en`, `fr`, `de`."""
    return (
        isinstance(code, str) and len(code) == 2 and code.islower()
        and pycountry.languages.get(alpha_2=code) is not None
    )



# Every code the API accepts, as it must be written: countries in capitals, languages in lower case.
COUNTRY_CODES = tuple(sorted(c.alpha_2 for c in pycountry.countries))
LANGUAGE_CODES = tuple(sorted(lang.alpha_2 for lang in pycountry.languages if hasattr(lang, "alpha_2")))
