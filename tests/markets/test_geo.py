"""Country and language codes: normalised as the original does, from the maintained ISO library and the
Semrush language catalogue; geo target ids; the schema's patterns accept exactly what the server does."""

import re

import pytest

from markets import geo


@pytest.mark.parametrize(("country", "expected"), [("US", 2840), ("FR", 2250), ("DE", 2276), ("fr", 2250)])
def test_geo_target_id_is_2000_plus_iso_numeric(country, expected):
    assert geo.geo_target_id(country) == expected


@pytest.mark.parametrize(
    ("sent", "code"),
    [
        ("us", "US"),
        ("Fr", "FR"),
        ("XX", None),
        ("XK", None),
        ("USA", None),
        ("", None),
        ("1A", None),
        (None, None),
        (" US", None),
    ],
)
def test_a_country_is_any_case_and_must_exist(sent, code):
    assert geo.country_code(sent) == code
    assert bool(sent is not None and re.fullmatch(geo.MARKET_PATTERN, sent)) is (code is not None)


@pytest.mark.parametrize(
    ("sent", "tag"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("de-CH", "de-ch"),
        ("fil", "fil"),
        ("zh-Hant", "zh-hant"),
        ("eng-", None),
        ("fr_FR", None),
        ("f", None),
        ("abcd", None),
        ("en-toolong", None),
        (5, None),
    ],
)
def test_a_language_tag_is_lower_cased_and_must_have_the_bcp47_form(sent, tag):
    assert geo.language_tag(sent) == tag


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("en", "English"),
        ("de-ch", "German"),
        ("zh-tw", "Chinese Traditional"),
        ("zh-cn", "Chinese Simplified"),
        ("fil", "Filipino"),
        ("tlh", None),
        ("uk", None),
    ],
)
def test_a_tag_resolves_to_its_catalogue_entry_or_its_primary_subtags(tag, name):
    entry = geo.language_in(list(geo.known_languages()), tag)
    assert (entry["name"] if entry else None) == name


@pytest.mark.parametrize("sent", ["EN", "de-CH", "Zh-tW", "fil", "tlh", "uk", "en_GB", "xx-yy"])
def test_the_schemas_language_pattern_matches_what_the_catalogue_resolves(sent):
    tag = geo.language_tag(sent)
    resolves = tag is not None and geo.language_in(list(geo.known_languages()), tag) is not None
    assert bool(re.fullmatch(geo.LANGUAGE_PATTERN, sent)) is resolves
