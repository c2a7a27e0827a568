"""Hooks of the schemathesis run (tests/api/test_contract_fuzzing.py), loaded through SCHEMATHESIS_HOOKS.

A `siteId` in a createMarket body must name a site of the brand, which no generator can guess: a generated
UUID is replaced by the id of the brand's site (SERENITY_FUZZ_SITE_ID), as the UI only ever sends the id of a
site the service gave it. A value that is not a UUID is left alone, so the server's refusal of it is still
fuzzed.
"""
import os
import re

import schemathesis

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


@schemathesis.hook
def map_case(context, case):
    if case.operation.definition.raw.get("operationId") == "createMarket":
        case.body = _real_site(case.body)
    return case
