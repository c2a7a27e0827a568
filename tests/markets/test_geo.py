"""Country and language codes from the maintained ISO library; geo target ids."""
import pytest

from markets import geo


@pytest.mark.parametrize(("country", "expected"), [("US", 2840), ("FR", 2250), ("DE", 2276), ("fr", 2250)])
def test_geo_target_id_is_2000_plus_iso_numeric(country, expected):
    assert geo.geo_target_id(country) == expected


@pytest.mark.parametrize("bad", ["XX", "USA", "", "1A", None])
def test_unknown_country_is_rejected(bad):
    assert not geo.is_country(bad)


@pytest.mark.parametrize(("code", "ok"), [("en", True), ("fr", True), ("zz", False), ("EN", False), ("eng", False)])
def test_language_codes_are_iso_639_1(code, ok):
    assert geo.is_language(code) is ok
