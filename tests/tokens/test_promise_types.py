"""A promise token is a typed object wherever one is stored; a bare one a browser forwards is only ever exchanged."""

import json
import re

import hypothesis
import pytest
from hypothesis import strategies

from sandbox.ims import ledger
from tokens import services
from tokens.clients import ims
from tokens.delegation import PROMISE_TOKEN_PATTERN, forwarded_promise
from tokens.exceptions import InvalidForwardedToken
from tokens.models import PromiseGrant
from tokens.pairs import get_pair
from tokens.types import ForwardedPromise, InvalidPromiseToken, PromiseToken

JOB_ID = "0b7e6a1c-2f3d-4e5a-8b9c-0d1e2f3a4b5c"
VALUE = "eyJhbGciOiJSUzI1NiJ9.eyJ0eXBlIjoicHJvbWlzZV90b2tlbiJ9.c2lnbmF0dXJl"


def test_parse_refuses_a_bare_string():
    with pytest.raises(InvalidPromiseToken) as refused:
        PromiseToken.parse(VALUE)

    assert refused.value.code == "INVALID_PROMISE_TOKEN"


@pytest.mark.parametrize(
    "value",
    [
        {"token_type": "promise_token", "expires_in": 60},
        {"promise_token": "  ", "token_type": "promise_token", "expires_in": 60},
        {"promise_token": VALUE, "expires_in": 60},
        {"promise_token": VALUE, "token_type": "promise_token", "expires_in": 0},
        {"promise_token": VALUE, "token_type": "promise_token", "expires_in": True},
        {"promise_token": VALUE, "token_type": "promise_token", "expires_in": "soon"},
    ],
)
def test_parse_refuses_an_object_missing_a_usable_field(value):
    with pytest.raises(InvalidPromiseToken):
        PromiseToken.parse(value)


def test_parse_accepts_a_typed_object_and_a_numeric_string_lifetime():
    token = PromiseToken.parse({"promise_token": VALUE, "token_type": "promise_token", "expires_in": "600"})

    assert token.as_dict() == {"promise_token": VALUE, "token_type": "promise_token", "expires_in": 600}


def test_a_typed_token_never_prints_its_value():
    token = PromiseToken(promise_token=VALUE, token_type="promise_token", expires_in=600)

    assert VALUE not in f"{token} {token!r}"


@pytest.mark.django_db
def test_grant_store_refuses_a_bare_string():
    with pytest.raises(InvalidPromiseToken):
        services.grant_store(job_id=JOB_ID, pair=get_pair("semrush"), token=VALUE)

    assert not PromiseGrant.objects.exists()


def test_exchange_refuses_a_bare_string_before_calling_ims(sims):
    with pytest.raises(InvalidPromiseToken):
        ims.exchange(promise=VALUE, pair=get_pair("semrush"))

    assert ledger.events() == []


def test_a_bare_header_value_is_a_forwarded_token_to_exchange_never_a_typed_one():
    token = forwarded_promise(f"  {VALUE} ")

    assert isinstance(token, ForwardedPromise) and not isinstance(token, PromiseToken)
    assert token.promise_token == VALUE and VALUE not in repr(token) + str(token)


@pytest.mark.parametrize(
    ("header", "value"),
    [("promise%20token%20xyz", "promise token xyz"), ("promise%zztoken", "promise%zztoken"), ("%E0%A4%A", "%E0%A4%A")],
)
def test_a_header_is_url_decoded_and_used_as_sent_when_it_is_not_percent_encoding(header, value):
    assert forwarded_promise(header).promise_token == value


def test_a_json_typed_header_value_is_parsed():
    header = json.dumps({"promise_token": VALUE, "token_type": "promise_token", "expires_in": 1200})

    token = forwarded_promise(header)

    assert token.as_dict() == {"promise_token": VALUE, "token_type": "promise_token", "expires_in": 1200}


@pytest.mark.parametrize(
    "header", ['{"promise_token": ""}', "{not json", '{"promise_token": "x", "token_type": "bearer", "expires_in": 60}']
)
def test_a_typed_header_that_is_no_usable_token_is_refused(header):
    with pytest.raises(InvalidForwardedToken):
        forwarded_promise(header)


@pytest.mark.parametrize("header", ["", "   ", None])
def test_an_empty_header_is_no_token(header):
    assert forwarded_promise(header) is None


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(strategies.from_regex(PROMISE_TOKEN_PATTERN, fullmatch=True))
def test_every_header_value_the_api_schema_allows_is_read_without_a_400(value):
    forwarded_promise(value)  # InvalidForwardedToken (400) would be a schema-valid request refused


@pytest.mark.parametrize(
    "value",
    [
        "{abc",
        " %7Babc",
        "%7b",
        '{"promise_token": "t", "token_type": "access_token", "expires_in": 300}',
        '{"promise_token": "%22", "token_type": "promise_token", "expires_in": 300}',
    ],
)
def test_a_header_value_read_as_a_broken_typed_token_is_outside_the_api_schema(value):
    with pytest.raises(InvalidForwardedToken):
        forwarded_promise(value)
    assert re.fullmatch(PROMISE_TOKEN_PATTERN, value) is None
