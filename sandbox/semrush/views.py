"""HTTP face of the Semrush simulator: the JSON REST API the client speaks, plus `_state` and `_control`.

Plain Django views on purpose: the product's DRF defaults are what the simulator stands in for. Every
API call passes, in order, the latency switch, the rate limit per client pair (429 + Retry-After above it),
the injected-failure switch and the bearer check (an
RS256 access token signed by the IMS simulator's key, with a scope that allows the call); then it is
served and recorded (method, path, status and the caller's user id: never a header or a token).
"""

import json
import re
import time
from functools import wraps

import jwt
from django.db import IntegrityError, transaction
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from sandbox.semrush import controls, services, state
from sandbox.semrush.models import Call, IdempotentResponse, Project, Prompt

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


def _verify_bearer(header: str | None) -> dict | None:
    """The claims of a valid `Authorization: Bearer <JWT>` signed by the IMS simulator, or None.

    Signature, issuer and expiry are checked; the audience is not, because both user bearers (audience:
    the UI) and exchanged access tokens (audience: the consumer client) call Semrush. A promise token is
    refused: it is only ever exchanged at IMS, never presented to a resource server.
    """
    from sandbox.ims import keys

    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    try:
        claims = keys.verify_token(token.strip())
    except (jwt.PyJWTError, ValueError):
        return None
    return claims if claims.get("type") == keys.ACCESS_TOKEN else None


def _pair(claims: dict | None) -> str:
    """The client pair a call counts against for the rate limit: an exchanged access token's `client_id`
    (its audience), a user bearer's audience; "" without a valid bearer."""
    if not claims:
        return ""
    aud = claims.get("aud")
    return str(claims.get("client_id") or (aud[0] if isinstance(aud, list) and aud else aud) or "")[:200]


def _in_scope(claims: dict, method: str) -> bool:
    """User bearers carry no `scope` and may do everything; an exchanged access token needs
    `semrush.write` to change anything and `semrush.read` (or write) to read."""
    scope = claims.get("scope")
    if scope is None:
        return True
    granted = set(re.split(r"[,\s]+", str(scope)))
    needed = {"semrush.read", "semrush.write"} if method == "GET" else {"semrush.write"}
    return bool(granted & needed)


def _error(status: int, code: str, message: str, headers: dict | None = None, **extra) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, **extra}}, status=status, headers=headers)


def _body(request) -> dict:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        raise services.Invalid("the body must be JSON") from None
    if not isinstance(body, dict):
        raise services.Invalid("the body must be a JSON object")
    return body


def _record(request, status: int, user_id: str) -> None:
    Call.objects.create(
        method=request.method,
        path=request.path,
        query=request.META.get("QUERY_STRING", "")[:1000],
        status=status,
        user_id=user_id[:200],
    )


def api(*methods: str):
    """Decorate one simulator API view: switches, bearer, error mapping, call log."""

    def decorate(view):
        @csrf_exempt
        @wraps(view)
        def wrapper(request, **kwargs):
            latency = controls.latency_ms()
            if latency:
                time.sleep(latency / 1000)
            user_id = ""
            claims = _verify_bearer(request.headers.get("Authorization"))
            wait = controls.take_rate_slot(_pair(claims), request.method, request.path)
            if wait is not None:
                response = _error(429, "rate_limited", "too many requests for this client", {"Retry-After": str(wait)})
                _record(request, response.status_code, str((claims or {}).get("user_id") or ""))
                return response
            failure = controls.take_failure(request.method, request.path)
            if failure is not None and failure.stall_ms:
                time.sleep(failure.stall_ms / 1000)
            if failure is not None and not (failure.lose_answer or failure.stall_ms):
                response = _injected(failure)
            elif request.method not in methods:
                response = _error(405, "method_not_allowed", f"use {' or '.join(methods)}")
            else:
                if claims is None:
                    response = _error(
                        401,
                        "unauthorized",
                        "a valid bearer token is required",
                        {"WWW-Authenticate": 'Bearer realm="semrush"'},
                    )
                elif not _in_scope(claims, request.method):
                    user_id = str(claims.get("user_id") or "")
                    response = _error(403, "insufficient_scope", "the token's scope does not allow this call")
                else:
                    user_id = str(claims.get("user_id") or "")
                    try:
                        response = view(request, **kwargs)
                    except services.SimError as exc:
                        response = _error(exc.status, exc.code, exc.message, **exc.extra)
            # Recorded as served, so the call log says what really happened even when the answer is lost.
            _record(request, response.status_code, user_id)
            if failure is not None and failure.lose_answer:
                return _injected(failure)
            return response

        return wrapper

    return decorate


def _injected(failure) -> JsonResponse:
    headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else None
    return _error(failure.status, "injected_failure", "failure injected by a test switch", headers)


def _idempotent(request, serve) -> JsonResponse:
    """Serve a create once per Idempotency-Key: a repeat (a retry after a lost answer) gets the first
    answer back. Without the header every request is served."""
    key = request.headers.get("Idempotency-Key", "").strip()
    if not key or controls.forgets_idempotency():
        return serve()
    where = {"method": request.method, "path": request.path, "key": key[:200]}
    stored = IdempotentResponse.objects.filter(**where).first()
    if stored is None:
        try:
            with transaction.atomic():
                # The key row goes in first: a concurrent repeat blocks on it until this write commits.
                record = IdempotentResponse.objects.create(**where, status=0, body={})
                response = serve()
                if response.status_code >= 300:
                    transaction.set_rollback(True)
                    return response
                record.status, record.body = response.status_code, json.loads(response.content)
                record.save(update_fields=["status", "body"])
                return response
        except IntegrityError:
            stored = IdempotentResponse.objects.get(**where)
    return JsonResponse(stored.body, status=stored.status, headers={"Idempotent-Replayed": "true"})


def _serve_errors(serve):
    """Turn a SimError into its response inside _idempotent, so a refused create is not remembered."""

    def run():
        try:
            return serve()
        except services.SimError as exc:
            return _error(exc.status, exc.code, exc.message, **exc.extra)

    return run


# -- API ------------------------------------------------------------------------------------------


@api("POST")
def workspaces(request):
    """POST /v1/workspaces {name, parentId} -> 201 {id, name, parentId, createdAt}."""
    body = _body(request)

    def serve():
        workspace = services.workspace_create(name=body.get("name"), parent_id=body.get("parentId"))
        return JsonResponse(state.workspace_json(workspace), status=201)

    return _idempotent(request, _serve_errors(serve))


@api("GET")
def languages(request):
    """GET /v1/languages -> {items: [{id, name, code}]}: the languages an AI project may be in."""
    from markets import geo

    return JsonResponse({"items": list(geo.known_languages())})


@api("GET")
def ai_models(request):
    """GET /v1/ai_models?page=&limit= -> {items: [{id, key, name, icon}]}: the global catalogue of AI models, one
    page (`page` from 1, `limit` 1..100, default 100); a page past the end is empty."""
    from sandbox.semrush.ai_models import AI_MODELS

    page, limit = request.GET.get("page", "1"), request.GET.get("limit", str(MAX_PAGE_SIZE))
    if not page.isdigit() or int(page) < 1:
        raise services.Invalid("`page` must be a positive integer")
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE_SIZE:
        raise services.Invalid(f"`limit` must be between 1 and {MAX_PAGE_SIZE}")
    start = (int(page) - 1) * int(limit)
    return JsonResponse({"items": [dict(model) for model in AI_MODELS[start : start + int(limit)]]})


@api("GET")
def brand_topics(request, semrushWorkspaceId):
    """GET /v1/workspaces/{id}/brand-topics?domain=&country= -> {items: [{topic, volume, examplePrompts}]}."""
    domain, country = request.GET.get("domain", "").strip(), request.GET.get("country", "").strip()
    if not domain:
        raise services.Invalid("`domain` is required")
    if len(country) != 2 or not country.isalpha():
        raise services.Invalid("`country` must be an ISO 3166-1 alpha-2 code")
    return JsonResponse({"items": controls.catalogue_for(domain, country)})


@api("GET", "POST")
def projects(request, semrushWorkspaceId):
    """GET /v1/workspaces/{id}/ai-projects[?geoTargetId=&languageCode=] -> {items: [project]};
    POST {name, geoTargetId, languageCode} -> 201 project, or 409 {error: {existingId}}."""
    if request.method == "POST":
        body = _body(request)
        project = services.project_create(
            workspace_id=semrushWorkspaceId,
            name=body.get("name"),
            geo_target_id=body.get("geoTargetId"),
            language_code=body.get("languageCode"),
        )
        return JsonResponse(state.project_json(project), status=201)
    rows = Project.objects.filter(workspace_id=semrushWorkspaceId).order_by("created_at", "id")
    geo, language = request.GET.get("geoTargetId"), request.GET.get("languageCode")
    if geo:
        if not geo.isdigit():
            raise services.Invalid("`geoTargetId` must be an integer")
        rows = rows.filter(geo_target_id=int(geo))
    if language:
        rows = rows.filter(language_code=language.lower())
    return JsonResponse({"items": [state.project_json(p) for p in rows]})


@api("DELETE")
def workspace_project(request, semrushWorkspaceId, semrushProjectId):
    """DELETE /v1/workspaces/{id}/ai-projects/{projectId} -> 204: the project and its prompts are gone for good;
    404 for a project the workspace does not have (already deleted, or never there)."""
    services.project_delete(workspace_id=semrushWorkspaceId, project_id=semrushProjectId)
    return HttpResponse(status=204)


@api("GET")
def project(request, semrushProjectId):
    """GET /v1/ai-projects/{id} -> project, with `status` "published" | "draft"."""
    return JsonResponse(state.project_json(services.project_get(semrushProjectId)))


@api("GET", "POST")
def tags(request, semrushWorkspaceId):
    """GET /v1/workspaces/{id}/tags -> {items: [{id, name, values: [{id, value}]}]};
    POST {name, values?: [str]} -> 201 {id, name, values: [{id, value}]}, or 409 {error: {existingId}}."""
    if request.method == "POST":
        body = _body(request)
        root = services.tag_root_create(
            workspace_id=semrushWorkspaceId, name=body.get("name"), values=body.get("values")
        )
        return JsonResponse(state.tag_root_json(root), status=201)
    return JsonResponse({"items": state.tags(semrushWorkspaceId)})


@api("POST")
def tag_values(request, semrushWorkspaceId, semrushTagId):
    """POST /v1/workspaces/{id}/tags/{tagId}/values {value} -> 201 {id, value}, or 409 {error: {existingId}}."""
    value = services.tag_value_create(
        workspace_id=semrushWorkspaceId, root_id=semrushTagId, value=_body(request).get("value")
    )
    return JsonResponse({"id": value.id, "value": value.value}, status=201)


@api("GET", "POST")
def prompts(request, semrushProjectId):
    """GET /v1/ai-projects/{id}/prompts?limit=&cursor= -> {items: [prompt], nextCursor: str|null};
    POST {prompts: [{text, tagIds, createdBy, createdAt, updatedBy, updatedAt}]} (1..100) -> 201 {items}."""
    if request.method == "POST":
        body = _body(request)

        def serve():
            created = services.prompts_write(project_id=semrushProjectId, prompts=body.get("prompts"))
            return JsonResponse({"items": [state.prompt_json(p) for p in created]}, status=201)

        return _idempotent(request, _serve_errors(serve))
    services.project_get(semrushProjectId)
    limit, cursor = request.GET.get("limit", str(DEFAULT_PAGE_SIZE)), request.GET.get("cursor", "")
    if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE_SIZE:
        raise services.Invalid(f"`limit` must be between 1 and {MAX_PAGE_SIZE}")
    if cursor and not cursor.isdigit():
        raise services.Invalid("`cursor` is not one this API returned")
    rows = Prompt.objects.filter(project_id=semrushProjectId).order_by("seq")
    if cursor:
        rows = rows.filter(seq__gt=int(cursor))
    page = list(rows[: int(limit) + 1])
    more = len(page) > int(limit)
    page = page[: int(limit)]
    return JsonResponse(
        {
            "items": [state.prompt_json(p) for p in page],
            "nextCursor": str(page[-1].seq) if more else None,
        }
    )


@api("POST")
def publish(request, semrushProjectId):
    """POST /v1/ai-projects/{id}/publish -> {published: true, publishedAt}. Idempotent."""
    published = services.project_publish(project_id=semrushProjectId)
    published_at = published.published_at.isoformat() if published.published_at else None
    return JsonResponse({"published": True, "publishedAt": published_at})


# -- inspection and switches (no bearer: local tooling only) ------------------------------------


def state_view(request):
    """GET /_state[?workspaceId=] -> workspaces, projects with their prompts, tags, switches."""
    if request.method != "GET":
        return _error(405, "method_not_allowed", "use GET")
    return JsonResponse(state.snapshot(request.GET.get("workspaceId") or None))


@csrf_exempt
def control(request):
    """POST /_control with one action:
    {"action": "latency", "ms": 250}
    {"action": "rateLimit", "requests": 5, "perSeconds": 1, "path": "/prompts", "method": "POST"} (null lifts it)
    {"action": "fail", "count": 2, "status": 503, "path": "/prompts", "method": "POST", "retryAfter": 1}
    {"action": "fail", "status": 502, "path": "/prompts", "method": "POST", "loseAnswer": true} (served, answer lost)
    {"action": "fail", "path": "/prompts", "method": "POST", "stallMs": 5000} (served after 5 s)
    {"action": "catalogue", "domain": "...", "country": "FR", "items": [...]}
    {"action": "clearCatalogue", "domain": "...", "country": "FR"}
    {"action": "reset", "data": false}
    -> 200 {"ok": true, "switches": {...}}."""
    if request.method != "POST":
        return _error(405, "method_not_allowed", "use POST")
    try:
        body = _body(request)
        action = body.get("action")
        if action == "latency":
            controls.set_latency(body.get("ms"))
        elif action == "rateLimit":
            controls.set_rate_limit(
                body.get("requests"),
                per_seconds=body.get("perSeconds", 1),
                path=body.get("path"),
                method=body.get("method"),
            )
        elif action == "fail":
            controls.fail_next(
                body.get("count", 1),
                status=body.get("status", 503),
                path=body.get("path"),
                method=body.get("method"),
                retry_after=body.get("retryAfter"),
                lose_answer=body.get("loseAnswer", False),
                stall_ms=body.get("stallMs", 0),
            )
        elif action == "catalogue":
            controls.set_catalogue(
                domain=body.get("domain", ""), country=body.get("country", ""), items=body.get("items")
            )
        elif action == "clearCatalogue":
            controls.clear_catalogue(domain=body.get("domain", ""), country=body.get("country", ""))
        elif action == "reset":
            controls.reset(data=bool(body.get("data", False)))
        else:
            raise services.Invalid("`action` must be latency, rateLimit, fail, catalogue, clearCatalogue or reset")
    except (ValueError, AttributeError, services.SimError) as exc:
        return _error(400, "invalid_request", str(exc))
    return JsonResponse({"ok": True, "switches": state.snapshot()["switches"]})
