"""The DRS client against the pinned cross-service contract: the request mapping reproduces its `request`
byte for byte on the wire, and each of its answers parses to the SPEC §6 outcome (Lambda transport, at the
botocore seam)."""

import io
import json
import logging

import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from django.conf import settings as django_settings

from markets.clients import drs

ARN = "arn:aws:lambda:us-east-1:123456789012:function:drs-prompt-generation"
CONTRACT_PATH = django_settings.BASE_DIR / "tests" / "contracts" / "drs_semrush_market_generation.json"


@pytest.fixture(scope="module")
def contract() -> dict:
    assert CONTRACT_PATH.is_file(), f"the pinned DRS contract is missing: expected it at {CONTRACT_PATH}"
    return json.loads(CONTRACT_PATH.read_text())


@pytest.fixture
def lambda_stub(settings):
    settings.DRS_TRANSPORT = "lambda"
    settings.DRS_PROMPT_GENERATION_FUNCTION = ARN
    settings.DRS_PROMPT_GENERATION_MODEL = "gpt-5-nano"
    with Stubber(drs.lambda_client("us-east-1")) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def wire(doc: dict) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def answer(stubber: Stubber, contract: dict, payload: dict) -> None:
    body = wire(payload)
    stubber.add_response(
        "invoke",
        {"StatusCode": 200, "Payload": StreamingBody(io.BytesIO(body), len(body))},
        {"FunctionName": ARN, "InvocationType": "RequestResponse", "Payload": wire(contract["request"])},
    )


def emf_docs(caplog) -> list[dict]:
    return [r.emf for r in caplog.records if r.name == "serenity.metrics" and hasattr(r, "emf")]


def test_mapping_the_contract_job_gives_exactly_the_contract_request(contract, settings):
    settings.DRS_PROMPT_GENERATION_MODEL = "gpt-5-nano"

    request = drs.build_request(contract["job"])

    assert request == contract["request"]
    assert list(request) == list(contract["request"])


def test_contract_job_uses_only_the_documented_parameter_names(contract):
    assert set(contract["job"]) <= set(drs.JOB_PARAM_KEYS)


def test_contract_response_parses_to_a_ship_with_its_prompts(contract, lambda_stub, caplog):
    caplog.set_level(logging.INFO, logger="serenity.metrics")
    answer(lambda_stub, contract, contract["response"])

    ship = drs.generate(contract["job"])

    assert ship == drs.DrsShip(
        prompts=contract["response"]["prompts"],
        language_evidence=contract["response"]["language_evidence"],
        summary=contract["response"]["ship_summary"],
    )
    [emf] = emf_docs(caplog)
    assert [m["Name"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]] == ["DRSInvokeDurationMs"]


def test_contract_service_response_parses_with_its_categories(contract, lambda_stub):
    answer(lambda_stub, contract, contract["service_response"])

    ship = drs.generate(contract["job"])

    assert ship.prompts == [
        {
            "prompt": "Welche wasserdichten Wanderschuhe eignen sich fuer lange Touren im Herbst?",
            "category": "wanderschuhe",
        },
        {"prompt": "Worauf sollte man beim Kauf eines 40-Liter-Trekkingrucksacks achten?", "category": "rucksaecke"},
    ]
    assert ship.language_evidence == contract["service_response"]["language_evidence"]
    assert ship.summary == contract["service_response"]["ship_summary"]


def test_contract_held_response_is_terminal_held_without_a_failure_metric(contract, lambda_stub, caplog):
    caplog.set_level(logging.INFO, logger="serenity.metrics")
    answer(lambda_stub, contract, contract["held_response"])

    with pytest.raises(drs.DrsError) as raised:
        drs.generate(contract["job"])

    assert (raised.value.code, raised.value.retryable, raised.value.reason) == (
        "PROMPT_GENERATION_HELD",
        False,
        "held: language_gate",
    )
    [emf] = emf_docs(caplog)
    assert "DRSInvokeFailure" not in emf
    assert "DRSInvokeDurationMs" in emf


def test_contract_gate_error_response_is_terminal_gate_error_with_a_failure_metric(contract, lambda_stub, caplog):
    caplog.set_level(logging.INFO, logger="serenity.metrics")
    answer(lambda_stub, contract, contract["gate_error_response"])

    with pytest.raises(drs.DrsError) as raised:
        drs.generate(contract["job"])

    assert (raised.value.code, raised.value.retryable, raised.value.reason) == (
        "PROMPT_GENERATION_GATE_ERROR",
        False,
        "gate_error (terminal): invalid_model:gpt-4",
    )
    [emf] = emf_docs(caplog)
    assert emf["DRSInvokeFailure"] == 1


def test_missing_aliases_count_and_seeds_take_their_defaults(settings):
    settings.DRS_NUM_PROMPTS = 50
    settings.DRS_PROMPT_GENERATION_MODEL = "gpt-5.4-mini"

    request = drs.build_request(
        {
            "siteId": "s-1",
            "brand": "Acme",
            "baseUrl": "https://acme.example",
            "market": "FR",
            "languageCode": "fr",
            "imsOrgId": "ORG1@AdobeOrg",
        }
    )

    assert request == {
        "site_id": "s-1",
        "brand": "Acme",
        "brand_aliases": [],
        "base_url": "https://acme.example",
        "market_country": "FR",
        "language_code": "fr",
        "num_prompts": 50,
        "model": "gpt-5.4-mini",
        "catalogue_seeds": [],
        "catalogue_status": "empty",
        "metadata": {"imsOrgId": "ORG1@AdobeOrg"},
    }


def test_audience_is_sent_only_when_set(contract):
    with_audience = drs.build_request({**contract["job"], "audience": "hikers"})
    blank_audience = drs.build_request({**contract["job"], "audience": ""})

    assert with_audience["audience"] == "hikers"
    assert "audience" not in blank_audience
    assert "subpath" not in with_audience


def test_keys_outside_the_job_parameters_never_reach_the_request(contract):
    request = drs.build_request(
        {
            **contract["job"],
            "promiseToken": "pt-secret-value",
            "subpath": "/de",
            "workspaceId": "ws-1",
            "geoTargetId": 2276,
        }
    )

    assert request == contract["request"]
    assert "pt-secret-value" not in json.dumps(request)


def test_a_model_outside_the_priced_set_falls_back_to_the_default_with_a_warning(contract, settings, caplog):
    settings.DRS_PROMPT_GENERATION_MODEL = "gpt-4"

    request = drs.build_request(contract["job"])

    assert request["model"] == "gpt-5-nano"
    [warning] = [r for r in caplog.records if r.name == "markets.clients.drs" and r.levelno == logging.WARNING]
    assert (warning.configured_model, warning.model) == ("gpt-4", "gpt-5-nano")


def test_every_priced_model_is_sent_as_configured(contract, settings):
    sent = []
    for model in ("gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5-nano"):
        settings.DRS_PROMPT_GENERATION_MODEL = model
        sent.append(drs.build_request(contract["job"])["model"])

    assert sent == ["gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5-nano"]
