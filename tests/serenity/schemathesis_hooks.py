"""Hooks of the schemathesis run (tests/serenity/test_contract_fuzzing.py), loaded through SCHEMATHESIS_HOOKS.

A `siteId` in a createMarket body must name a site of the brand, which no generator can guess: a generated
UUID is replaced by the id of the brand's site (SERENITY_FUZZ_SITE_ID), as the UI only ever sends the id of a
site the service gave it. A value that is not a UUID is left alone, so the server's refusal of it is still
fuzzed.

createBrand reads `x-promise-audience` only when the brand needs Semrush work (an active brand; the fuzzed
organization has Serenity on), as the original does: a case whose header breaks the schema's pattern asks for
an active brand, so that the header is read and its refusal checked, rather than ignored for a pending brand.

The coverage phase names its filters by their source, for their repr alone: hypothesis parses the module a filter's
lambda is in, wherever in the stack that happens, and CPython 3.11 can fail a parse made deep in a recursion
(`SystemError: AST constructor recursion depth mismatch`, a bug of the interpreter, not of the schema). Such a lambda
is described as hypothesis describes one it cannot read, instead of ending the run.
"""

import os
import re

import schemathesis
from hypothesis.internal import lambda_sources

_describe_lambda = lambda_sources._lambda_description


def _lambda_description(f):
    try:
        return _describe_lambda(f)
    except SystemError:
        return "lambda: <unknown>"


lambda_sources._lambda_description = _lambda_description

UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _real_site(body):
    if isinstance(body, dict) and isinstance(body.get("siteId"), str) and UUID.fullmatch(body["siteId"]):
        return {**body, "siteId": os.environ["SERENITY_FUZZ_SITE_ID"]}
    return body


@schemathesis.hook
def map_body(context, body):
    operation = getattr(context, "operation", None)
    if operation is not None and operation.definition.raw.get("operationId") == "createMarket":
        return _real_site(body)
    return body


AUDIENCE = re.compile(r"^[ \t]*(?:[Ss][Ee][Mm][Rr][Uu][Ss][Hh])?[ \t]*$")  # markets.openapi.AUDIENCE_PATTERN


def _audience_read(case):
    audience = (case.headers or {}).get("x-promise-audience")
    if audience is not None and not AUDIENCE.fullmatch(audience) and isinstance(case.body, dict):
        case.body = {**case.body, "status": "active"}
    return case


@schemathesis.hook
def map_case(context, case):
    operation_id = case.operation.definition.raw.get("operationId")
    if operation_id == "createMarket":
        case.body = _real_site(case.body)
    if operation_id == "createBrand":
        case = _audience_read(case)
    return case
