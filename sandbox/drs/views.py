"""HTTP face of the DRS simulator: the invoke endpoint (what the client's `http` transport calls), the
control endpoint for switches, and the call ledger. Local only; no authentication."""

import json
import time

from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from sandbox.drs import controls, generator, state
from sandbox.drs.models import SwitchKind
from serenity.db import release_connection

FUNCTION_HEADER = "HTTP_X_DRS_FUNCTION"
# The Retry-After of a throttled invocation (Lambda's own is short: concurrency frees as calls end).
THROTTLE_RETRY_AFTER_SECONDS = 1
# Keys that would mean a credential crossed the DRS boundary; such a request is refused and its values are
# never stored.
_CREDENTIAL_MARKERS = ("token", "authorization", "secret", "password")


def _json(doc: dict, status: int = 200) -> JsonResponse:
    return JsonResponse(doc, status=status, json_dumps_params={"ensure_ascii": False})


def _parse_object(request):
    try:
        body = json.loads(request.body or b"null")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _credential_free(value):
    """(value with credential-like keys' values replaced, whether any were found)."""
    if isinstance(value, dict):
        out, found = {}, False
        for key, item in value.items():
            if any(marker in str(key).lower() for marker in _CREDENTIAL_MARKERS):
                out[key], found = "[REDACTED]", True
            else:
                out[key], inner = _credential_free(item)
                found = found or inner
        return out, found
    if isinstance(value, list):
        pairs = [_credential_free(item) for item in value]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    return value, False


def _respond(body: dict, outcome: str | None):
    """(response, outcome label) for one valid request body and the switch that applies, if any."""
    requested = body.get("num_prompts")
    num_prompts = requested if isinstance(requested, int) else 0
    if outcome == SwitchKind.HELD:
        return _json(generator.held(num_prompts)), outcome
    if outcome == SwitchKind.GATE_ERROR_RETRYABLE:
        return _json(generator.gate_error("retryable", generator.GATE_RETRYABLE_REASON)), outcome
    if outcome == SwitchKind.GATE_ERROR_TERMINAL:
        return _json(generator.gate_error("terminal", generator.GATE_TERMINAL_REASON)), outcome
    if outcome == SwitchKind.NON_JSON:
        return HttpResponse("<html><body>502 Bad Gateway</body></html>", content_type="text/html"), outcome
    if outcome == SwitchKind.STATUS_500:
        return _json({"errorType": "SimulatedFailure", "errorMessage": "simulated DRS failure"}, 500), outcome
    if outcome == SwitchKind.EMPTY:
        return HttpResponse(b"", content_type="application/json"), outcome
    invalid = generator.validation_error(body)
    if invalid:
        return _json(generator.gate_error("terminal", invalid)), "invalid_request"
    if outcome == SwitchKind.SHIP_ZERO:
        return _json(generator.ship(body, zero=True)), outcome
    if outcome == SwitchKind.DUPLICATES:
        return _json(generator.ship(body, duplicates=True)), outcome
    return _json(generator.ship(body)), "ship"


@csrf_exempt
@require_POST
def invoke(request):
    """The DRS function: one request in the contract's `request` shape, one answer in its `response` shape."""
    body = _parse_object(request)
    if body is None:
        return _json({"errorType": "InvalidRequest", "errorMessage": "the body must be a JSON object"}, 400)
    brand = body.get("brand") if isinstance(body.get("brand"), str) else ""
    function = request.META.get(FUNCTION_HEADER, "")
    stored, has_credential = _credential_free(body)
    if has_credential:
        state.record(brand=brand, function=function, body=stored, outcome="rejected_credential")
        return _json({"errorType": "InvalidRequest", "errorMessage": "the request carries a credential"}, 400)
    admitted, counted = controls.enter()
    if not admitted:
        state.record(brand=brand, function=function, body=body, outcome="throttled")
        return _throttled()
    try:
        outcome, latency_ms = controls.take(brand)
        response, label = _respond(body, outcome)
        # Recorded before the delay, so a caller that times out still finds its call in the ledger.
        state.record(brand=brand, function=function, body=body, outcome=label)
        if latency_ms:
            # No database connection held while the simulated generation runs: hundreds of calls wait at once.
            release_connection()
            time.sleep(latency_ms / 1000)
    finally:
        if counted:
            controls.leave()
    return response


def _throttled() -> JsonResponse:
    """What Lambda answers an invocation above the function's concurrency: HTTP 429, error type
    TooManyRequestsException (in `x-amzn-ErrorType`, as over Lambda's own API), and a Retry-After."""
    response = _json(
        {"Type": "User", "message": "Rate Exceeded.", "Reason": "ConcurrentInvocationLimitExceeded"}, status=429
    )
    response["x-amzn-ErrorType"] = "TooManyRequestsException"
    response["Retry-After"] = str(THROTTLE_RETRY_AFTER_SECONDS)
    return response


@csrf_exempt
@require_POST
def control(request):
    """`{"action": "set", "switch": kind, "brand"?, "remaining"?}`, `{"action": "latency", "latencyMs": n,
    "brand"?, "remaining"?}`, `{"action": "concurrency", "limit": n | null}`, `{"action": "clear", "brand"?}` or
    `{"action": "reset"}`; answers the switches and the concurrency (`{limit, inFlight}`)."""
    body = _parse_object(request)
    if body is None:
        return _json({"error": "the body must be a JSON object"}, 400)
    action = body.get("action")
    try:
        if action == "set":
            controls.set_switch(str(body.get("switch")), brand=body.get("brand"), remaining=body.get("remaining"))
        elif action == "latency":
            controls.set_latency(
                int(body.get("latencyMs", 0)), brand=body.get("brand"), remaining=body.get("remaining")
            )
        elif action == "concurrency":
            controls.set_concurrency_limit(body.get("limit"))
        elif action == "clear":
            controls.clear(body.get("brand"))
        elif action == "reset":
            controls.reset()
        else:
            return _json({"error": "action must be one of set, latency, concurrency, clear, reset"}, 400)
    except (TypeError, ValueError) as exc:
        return _json({"error": str(exc)}, 400)
    return _json({"switches": controls.switches(), "concurrency": controls.concurrency()})


@require_GET
def calls(request):
    """The call ledger, oldest first; `?brand=` narrows it."""
    records = state.call_records(request.GET.get("brand"))
    return _json({"count": len(records), "calls": records})
