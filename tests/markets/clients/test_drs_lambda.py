"""The DRS client's Lambda transport at the botocore seam: target validation, invoke failures, payload
parsing, the proxy shape, the read timeout, and the EMF lines each outcome leaves behind."""

import io
import json
import logging
import socket
import threading
from types import SimpleNamespace

import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from markets.clients import drs

ARN = "arn:aws:lambda:us-east-1:123456789012:function:drs-prompt-generation"
PARAMS = {
    "siteId": "site-1",
    "brand": "Acme Outdoor",
    "aliases": ["Acme"],
    "baseUrl": "https://acme.example",
    "market": "US",
    "languageCode": "en",
    "count": 2,
    "imsOrgId": "ORG1@AdobeOrg",
    "seeds": [{"topic": "trail running shoes", "volume": 900, "examplePrompts": ["best trail shoes"]}],
}
SHIP = {
    "prompts": [{"prompt": "Which trail running shoes grip best on wet rock?", "category": "trail-running-shoes"}],
    "language_evidence": [{"detected_language": "en", "language_confidence": 0.91, "language_validation_passed": True}],
    "ship_summary": {
        "generated": 1,
        "hard_validated": 1,
        "guardrail_dropped": 0,
        "language_rejected": 0,
        "quality_downranked": 0,
        "final_count": 1,
        "verdict": "ship",
        "error_category": None,
        "reason": "ok",
    },
}


def wire(doc) -> bytes:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def expected_invoke(arn: str = ARN) -> dict:
    return {"FunctionName": arn, "InvocationType": "RequestResponse", "Payload": wire(drs.build_request(PARAMS))}


def payload(body: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(body), len(body))


@pytest.fixture
def lambda_settings(settings):
    settings.DRS_TRANSPORT = "lambda"
    settings.DRS_PROMPT_GENERATION_FUNCTION = ARN
    settings.DRS_PROMPT_GENERATION_MODEL = "gpt-5-nano"
    return settings


@pytest.fixture
def stub(lambda_settings):
    with Stubber(drs.lambda_client("us-east-1")) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def emf(caplog):
    """The EMF documents logged so far, read through the `serenity.metrics` logger's records."""
    caplog.set_level(logging.INFO, logger="serenity.metrics")
    caplog.set_level(logging.INFO, logger="markets.clients.drs")
    return lambda: [r.emf for r in caplog.records if r.name == "serenity.metrics" and hasattr(r, "emf")]


def answer_with(stub: Stubber, body: bytes, **response) -> None:
    stub.add_response("invoke", {"StatusCode": 200, "Payload": payload(body), **response}, expected_invoke())


def failure(params=PARAMS) -> drs.DrsError:
    with pytest.raises(drs.DrsError) as raised:
        drs.generate(params)
    return raised.value


def metric_names(doc: dict) -> list[str]:
    return [m["Name"] for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]]


def assert_failure_metric(docs: list[dict], *, with_duration: bool = True) -> None:
    [doc] = docs
    assert metric_names(doc) == (["DRSInvokeDurationMs", "DRSInvokeFailure"] if with_duration else ["DRSInvokeFailure"])
    assert doc["DRSInvokeFailure"] == 1
    assert doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "SpacecatSerenityMarketWorker"
    assert doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Environment"]]


# -- target ---------------------------------------------------------------------------------------------


def test_unset_function_is_terminal_and_nothing_is_invoked(stub, lambda_settings, emf):
    lambda_settings.DRS_PROMPT_GENERATION_FUNCTION = ""

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "DRS_GENERATION_TERMINAL",
        False,
        "DRS_PROMPT_GENERATION_FUNCTION is not set",
    )
    assert_failure_metric(emf(), with_duration=False)


def test_name_only_function_is_an_invalid_target_and_its_value_is_never_logged(stub, lambda_settings, emf, caplog):
    lambda_settings.DRS_PROMPT_GENERATION_FUNCTION = "drs-prompt-generation"

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "DRS_INVALID_TARGET",
        False,
        "DRS_PROMPT_GENERATION_FUNCTION is not a full Lambda function ARN (name-only, 21 chars)",
    )
    assert_failure_metric(emf(), with_duration=False)
    assert "drs-prompt-generation" not in caplog.text
    assert all("drs-prompt-generation" not in json.dumps(vars(r), default=str) for r in caplog.records)


def test_partial_arn_is_an_invalid_target_and_its_value_is_never_logged(stub, lambda_settings, emf, caplog):
    lambda_settings.DRS_PROMPT_GENERATION_FUNCTION = "arn:aws:lambda:us-east-1:123456789012:drs-prompt-generation"

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "DRS_INVALID_TARGET",
        False,
        "DRS_PROMPT_GENERATION_FUNCTION is not a full Lambda function ARN (partial-arn, 6 segments, 59 chars)",
    )
    assert all("123456789012" not in json.dumps(vars(r), default=str) for r in caplog.records)


def test_a_qualified_arn_is_invoked_as_given(stub, lambda_settings):
    qualified = f"{ARN}:live"
    lambda_settings.DRS_PROMPT_GENERATION_FUNCTION = qualified
    stub.add_response("invoke", {"StatusCode": 200, "Payload": payload(wire(SHIP))}, expected_invoke(qualified))

    ship = drs.generate(PARAMS)

    assert ship.prompts == SHIP["prompts"]


def test_a_function_in_another_region_is_invoked_through_that_region(lambda_settings):
    other = "arn:aws:lambda:eu-west-1:123456789012:function:drs-prompt-generation"
    lambda_settings.DRS_PROMPT_GENERATION_FUNCTION = other
    client = drs.lambda_client("eu-west-1")
    with Stubber(client) as stubber:
        stubber.add_response("invoke", {"StatusCode": 200, "Payload": payload(wire(SHIP))}, expected_invoke(other))

        ship = drs.generate(PARAMS)

        stubber.assert_no_pending_responses()
    assert ship.summary == SHIP["ship_summary"]
    assert client.meta.region_name == "eu-west-1"


# -- client configuration ---------------------------------------------------------------------------------


def test_lambda_client_waits_the_whole_drs_budget_and_never_retries(lambda_settings):
    client = drs.lambda_client("us-east-1")

    assert client.meta.config.read_timeout == 300
    assert client.meta.config.retries == {"mode": "standard", "total_max_attempts": 1}


# -- invoke failures: retryable, counted -------------------------------------------------------------------


def test_function_error_is_retryable_and_counts_as_a_failure(stub, emf):
    answer_with(stub, wire({"errorMessage": "boom", "errorType": "RuntimeError"}), FunctionError="Unhandled")

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_TRANSIENT", True, "function error (Unhandled)")
    assert_failure_metric(emf())


def test_status_code_of_300_or_more_is_retryable_and_counts_as_a_failure(stub, emf):
    stub.add_response("invoke", {"StatusCode": 500, "Payload": payload(wire(SHIP))}, expected_invoke())

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_TRANSIENT", True, "lambda status 500")
    assert_failure_metric(emf())


def test_invoke_refused_by_lambda_is_retryable_and_counts_as_a_failure(stub, emf):
    stub.add_client_error(
        "invoke", service_error_code="ServiceException", http_status_code=500, expected_params=expected_invoke()
    )

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "DRS_TRANSIENT",
        True,
        "lambda invoke refused: ServiceException (HTTP 500)",
    )
    assert_failure_metric(emf())


def test_lambda_throttling_is_back_pressure_with_its_retry_after_and_never_a_failure(stub, emf):
    stub.add_client_error(
        "invoke",
        service_error_code="TooManyRequestsException",
        http_status_code=429,
        response_meta={"HTTPHeaders": {"retry-after": "7"}},
        expected_params=expected_invoke(),
    )

    error = failure()

    assert isinstance(error, drs.DrsThrottled)
    assert (error.code, error.retryable, error.retry_after) == ("DRS_THROTTLED", True, 7.0)
    [doc] = emf()
    assert metric_names(doc) == ["DRSInvokeDurationMs", "DRSThrottled"] and doc["DRSThrottled"] == 1


def test_empty_payload_is_retryable_and_counts_as_a_failure(stub, emf):
    answer_with(stub, b"")

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_TRANSIENT", True, "payload is empty")
    assert_failure_metric(emf())


@pytest.fixture
def silent_endpoint():
    """A TCP endpoint that accepts connections and never answers: a DRS that outlives the client timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted, stop = [], threading.Event()

    def accept():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{server.getsockname()[1]}", accepted=accepted)
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def test_read_timeout_is_retryable_and_counts_as_a_failure(lambda_settings, silent_endpoint, emf):
    lambda_settings.AWS_ENDPOINT_URL = silent_endpoint.url
    lambda_settings.DRS_TIMEOUT_SECONDS = 0.3

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "DRS_TRANSIENT",
        True,
        "lambda invoke timed out (ReadTimeoutError)",
    )
    [doc] = emf()
    assert doc["DRSInvokeFailure"] == 1
    # One attempt, cut by the read timeout (so the measured duration cannot be shorter than it).
    assert len(silent_endpoint.accepted) == 1
    assert doc["DRSInvokeDurationMs"] >= 250


# -- payload parsing -----------------------------------------------------------------------------------


def test_proxy_shape_with_a_string_body_is_unwrapped(stub, emf):
    answer_with(stub, wire({"statusCode": 200, "body": json.dumps(SHIP)}))

    ship = drs.generate(PARAMS)

    assert ship == drs.DrsShip(
        prompts=SHIP["prompts"], language_evidence=SHIP["language_evidence"], summary=SHIP["ship_summary"]
    )
    [doc] = emf()
    assert metric_names(doc) == ["DRSInvokeDurationMs"]


def test_proxy_shape_with_an_object_body_is_unwrapped(stub):
    answer_with(stub, wire({"statusCode": 200, "headers": {}, "body": SHIP}))

    ship = drs.generate(PARAMS)

    assert ship == drs.DrsShip(
        prompts=SHIP["prompts"], language_evidence=SHIP["language_evidence"], summary=SHIP["ship_summary"]
    )


def test_proxy_shape_with_a_failing_status_is_retryable(stub, emf):
    answer_with(stub, wire({"statusCode": 502, "body": '{"message": "bad gateway"}'}))

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_TRANSIENT", True, "proxy status 502")
    assert_failure_metric(emf())


def test_non_json_payload_is_terminal_and_counts_as_a_failure(stub, emf):
    answer_with(stub, b"<html>Internal Server Error</html>")

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_GENERATION_TERMINAL", False, "payload is not JSON")
    assert_failure_metric(emf())


def test_proxy_body_that_is_not_json_is_terminal(stub):
    answer_with(stub, wire({"statusCode": 200, "body": "not json"}))

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_GENERATION_TERMINAL", False, "proxy body is not JSON")


def test_missing_verdict_is_terminal_and_counts_as_a_failure(stub, emf):
    answer_with(stub, wire({"prompts": [], "language_evidence": [], "ship_summary": {"final_count": 0}}))

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_GENERATION_TERMINAL", False, "answer has no verdict")
    assert_failure_metric(emf())


def test_missing_ship_summary_is_terminal(stub):
    answer_with(stub, wire({"prompts": SHIP["prompts"]}))

    error = failure()

    assert (error.code, error.retryable) == ("DRS_GENERATION_TERMINAL", False)


def test_unknown_verdict_is_terminal_and_counts_as_a_failure(stub, emf):
    answer_with(stub, wire({**SHIP, "ship_summary": {**SHIP["ship_summary"], "verdict": "maybe"}}))

    error = failure()

    assert (error.code, error.retryable, error.reason) == ("DRS_GENERATION_TERMINAL", False, "unknown verdict 'maybe'")
    assert_failure_metric(emf())


def test_retryable_gate_error_is_retryable_without_a_failure_metric(stub, emf):
    summary = {
        **SHIP["ship_summary"],
        "verdict": "gate_error",
        "error_category": "retryable",
        "reason": "llm_throttled",
        "final_count": 0,
    }
    answer_with(stub, wire({"prompts": [], "language_evidence": [], "ship_summary": summary}))

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "PROMPT_GENERATION_GATE_RETRYABLE",
        True,
        "gate_error (retryable): llm_throttled",
    )
    [doc] = emf()
    assert metric_names(doc) == ["DRSInvokeDurationMs"]


def test_ship_with_zero_prompts_is_returned_for_the_caller_to_judge(stub, emf):
    summary = {**SHIP["ship_summary"], "generated": 0, "hard_validated": 0, "final_count": 0}
    answer_with(stub, wire({"prompts": [], "language_evidence": [], "ship_summary": summary}))

    ship = drs.generate(PARAMS)

    assert ship == drs.DrsShip(prompts=[], language_evidence=[], summary=summary)
    [doc] = emf()
    assert metric_names(doc) == ["DRSInvokeDurationMs"]


def test_ship_with_malformed_prompts_is_terminal(stub):
    answer_with(stub, wire({**SHIP, "prompts": ["a bare string"]}))

    error = failure()

    assert (error.code, error.retryable, error.reason) == (
        "DRS_GENERATION_TERMINAL",
        False,
        "ship answer has malformed prompts",
    )


def test_ship_failure_and_duration_lines_carry_only_the_environment_dimension(stub, emf, settings):
    answer_with(stub, wire(SHIP))

    drs.generate(PARAMS)

    [doc] = emf()
    assert doc == {
        "_aws": {
            "Timestamp": doc["_aws"]["Timestamp"],
            "CloudWatchMetrics": [
                {
                    "Namespace": "SpacecatSerenityMarketWorker",
                    "Dimensions": [["Environment"]],
                    "Metrics": [{"Name": "DRSInvokeDurationMs", "Unit": "Milliseconds"}],
                }
            ],
        },
        "Environment": settings.ENVIRONMENT,
        "DRSInvokeDurationMs": doc["DRSInvokeDurationMs"],
    }
