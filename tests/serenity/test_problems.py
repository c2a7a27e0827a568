"""The error envelope (SPEC §3): RFC 9457 members plus the original's `error` and `message`, and `x-error` on
403 and 404. One table maps our codes to the original's tokens; every code the product can answer is in it."""

import pytest

import markets.exceptions
import serenity.problems
import tokens.exceptions
from jobs import exceptions as job_exceptions
from serenity.problems import ORIGINAL_ERROR_TOKENS, DomainError, error_token, problem, safe_message


def domain_errors() -> list[type[DomainError]]:
    found, stack = [], [DomainError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_every_code_the_product_answers_has_a_token_in_the_table():
    # Importing the modules registers their errors as subclasses.
    assert markets.exceptions and tokens.exceptions and job_exceptions
    codes = {cls.code for cls in domain_errors()} | {code for code, _ in serenity.problems._DRF_CODES.values()}
    codes |= {"bad_request", "internal_error", "invalid"}

    assert sorted(codes - set(ORIGINAL_ERROR_TOKENS)) == []


@pytest.mark.parametrize(
    ("code", "status", "token"),
    [
        ("market_exists", 409, "sliceExists"),
        ("unknown_market", 400, "unknownMarket"),
        ("unknown_language", 400, "unknownLanguage"),
        ("invalid", 400, "invalidRequest"),
        ("job_not_found", 404, "notFound"),
        ("organization_access_denied", 403, "forbidden"),
        ("job_not_awaiting_reauth", 409, "invalidState"),
        ("semrush_unavailable", 502, "serenityUpstreamError"),
        ("not_authenticated", 401, "authenticationRequired"),
        ("PROMISE_TOKEN_REQUIRED", 401, "promiseTokenRequired"),
        ("a_code_added_later", 409, "conflict"),
        ("another_one", 503, "serviceUnavailable"),
    ],
)
def test_our_codes_map_to_the_originals_tokens(code, status, token):
    assert error_token(code, status) == token


def test_a_problem_carries_both_envelopes():
    assert problem(
        409, "market_exists", "Brand already has a live market for this slice", "FR/fr is already live.", marketId="m-1"
    ) == {
        "type": "https://errors.serenity.example/market-exists",
        "title": "Brand already has a live market for this slice",
        "status": 409,
        "detail": "FR/fr is already live.",
        "code": "market_exists",
        "error": "sliceExists",
        "message": "FR/fr is already live.",
        "marketId": "m-1",
    }


def test_a_message_is_fit_for_a_header():
    assert safe_message("line one\r\nx-injected: 1\u00e9" + "x" * 600) == ("line one x-injected: 1 " + "x" * 600)[:500]
