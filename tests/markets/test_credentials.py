"""markets/credentials.py: the promise headers a view reads once and hands on."""

from markets.credentials import PromiseHeaders

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJ0eXBlIjoicHJvbWlzZV90b2tlbiJ9.c2lnbmF0dXJl"


def test_the_promise_headers_carry_both_headers_and_never_show_the_token_in_their_repr():
    headers = PromiseHeaders.of({"x-promise-audience": "semrush", "x-promise-token": TOKEN})

    assert (headers.audience, headers.token) == ("semrush", TOKEN)
    assert TOKEN not in repr(headers) + str(headers)
    assert PromiseHeaders.of({}) == PromiseHeaders(audience=None, token=None)
