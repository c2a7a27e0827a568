"""HTTP face of the IMS simulator: IMS's own endpoints (form-encoded, like IMS) and JSON controls.

Plain Django views on purpose: the product's DRF defaults (IMS bearer authentication, JSON only) are
what the simulator stands in for, not what it is served by.
"""

import json
import time

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sandbox.ims import controls, keys, ledger, services

# Tokens in an answer must not be stored by anything between the simulator and its caller.
_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def _refused(operation: str, exc: services.Refused) -> JsonResponse:
    ledger.record(
        ledger.REFUSED,
        operation=operation,
        fingerprint=exc.fingerprint,
        pair=exc.pair,
        user_id=exc.user_id,
        status=exc.status,
        reason=exc.reason,
    )
    return JsonResponse(exc.body(), status=exc.status, headers=_NO_STORE)


def _answer_lost(operation: str, exc: services.AnswerLost) -> JsonResponse:
    """The call was committed; now lose its answer: an error status at once, or the real answer held back
    past the caller's timeout."""
    ledger.record(
        ledger.ANSWER_LOST,
        operation=operation,
        fingerprint=exc.fingerprint,
        pair=exc.pair,
        user_id=exc.user_id,
        status=None if exc.forced.stall_seconds else exc.forced.status,
        reason="stalled" if exc.forced.stall_seconds else "error_after_commit",
    )
    if exc.forced.stall_seconds:
        time.sleep(exc.forced.stall_seconds)
        return JsonResponse(exc.answer, headers=_NO_STORE)
    return JsonResponse({"error": "server_error"}, status=exc.forced.status, headers=_NO_STORE)


def _with_latency(view):
    def wrapped(request, *args, **kwargs):
        delay = controls.latency_ms()
        if delay:
            time.sleep(delay / 1000)
        return view(request, *args, **kwargs)

    wrapped.__name__, wrapped.__doc__ = view.__name__, view.__doc__
    return wrapped


@require_GET
def jwks(request):
    return JsonResponse(keys.jwks(), headers={"Cache-Control": "max-age=300"})


@csrf_exempt
@require_POST
@_with_latency
def token(request):
    """POST /ims/token/v4 with grant_type promise_token_mint or promise_token_exchange."""
    grants = {"promise_token_mint": ("mint", services.mint), "promise_token_exchange": ("exchange", services.exchange)}
    grant = grants.get(request.POST.get("grant_type", ""))
    if grant is None:
        return JsonResponse({"error": "unsupported_grant_type"}, status=400, headers=_NO_STORE)
    operation, handle = grant
    try:
        return JsonResponse(handle(request.POST.dict()), headers=_NO_STORE)
    except services.Refused as exc:
        return _refused(operation, exc)
    except services.AnswerLost as exc:
        return _answer_lost(operation, exc)


@csrf_exempt
@require_POST
@_with_latency
def validate(request):
    """POST /ims/validate_token/v1: 200 {valid, user_id?, expires_in?, reason?}; changes nothing."""
    try:
        return JsonResponse(services.validate(request.POST.dict()), headers=_NO_STORE)
    except services.Refused as exc:
        return _refused("validate", exc)


@csrf_exempt
@require_POST
@_with_latency
def invalidate(request):
    """POST /ims/invalidate_token/v2: 200 {} whether or not the token was still live."""
    try:
        return JsonResponse(services.invalidate(request.POST.dict()), headers=_NO_STORE)
    except services.Refused as exc:
        return _refused("invalidate", exc)


def _json_body(request) -> dict | None:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _bad(message: str) -> JsonResponse:
    return JsonResponse({"error": "invalid_request", "error_description": message}, status=400)


@csrf_exempt
@require_POST
def user_token(request):
    """POST /_users/token {userId, orgIds, ttl?} -> a user bearer, for curl walkthroughs."""
    body = _json_body(request)
    if body is None:
        return _bad("body must be a JSON object")
    user_id, org_ids, ttl = body.get("userId"), body.get("orgIds", []), body.get("ttl", 3600)
    if not isinstance(user_id, str) or not user_id:
        return _bad("userId must be a non-empty string")
    if not isinstance(org_ids, list) or not all(isinstance(o, str) and o for o in org_ids):
        return _bad("orgIds must be a list of IMS org ids")
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        return _bad("ttl must be an integer number of seconds")
    value = keys.issue_user_token(user_id=user_id, org_ids=org_ids, ttl=ttl)
    return JsonResponse({"access_token": value, "token_type": "bearer", "expires_in": ttl}, headers=_NO_STORE)


@csrf_exempt
@require_http_methods(["GET", "POST"])
def control(request):
    """GET: the armed switches. POST {action, ...}: act, then answer the switches. Actions:
    fail_next_exchanges|fail_next_mints {count?, status?}; lose_next_exchange_answers|lose_next_mint_answers
    {count?, status?, stallSeconds?}; latency {ms}; expire_live_tokens; reset; clear_ledger."""
    if request.method == "POST":
        body = _json_body(request)
        if body is None:
            return _bad("body must be a JSON object")
        action = body.get("action")
        try:
            if action == "fail_next_exchanges":
                controls.fail_next_exchanges(body.get("count", 1), body.get("status", 401))
            elif action == "fail_next_mints":
                controls.fail_next_mints(body.get("count", 1), body.get("status", 503))
            elif action == "lose_next_exchange_answers":
                controls.lose_next_exchange_answers(
                    body.get("count", 1), body.get("status", 500), body.get("stallSeconds", 0)
                )
            elif action == "lose_next_mint_answers":
                controls.lose_next_mint_answers(
                    body.get("count", 1), body.get("status", 500), body.get("stallSeconds", 0)
                )
            elif action == "latency":
                controls.set_latency(body.get("ms"))
            elif action == "expire_live_tokens":
                controls.expire_live_tokens()
            elif action == "reset":
                controls.reset()
            elif action == "clear_ledger":
                ledger.clear()
            else:
                return _bad("unknown action")
        except ValueError as exc:
            return _bad(str(exc))
    return JsonResponse({"switches": controls.state()})


@require_GET
def ledger_view(request):
    """GET /_ledger[?kind=...]: every event, fingerprints only, and how many tokens are live."""
    kind = request.GET.get("kind") or None
    events = [{**e, "at": e["at"].isoformat()} for e in ledger.events(kind)]
    return JsonResponse({"events": events, "live_tokens": ledger.live_tokens()})
