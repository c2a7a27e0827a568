"""Semrush client: brand-topic catalogue, sub-workspaces, AI projects, tags, prompt writes and publish.

The only code that talks to Semrush. JSON over HTTPS on SEMRUSH_API_BASE with `Authorization: Bearer
<IMS access token>`; the wire contract is documented in docs/simulators/semrush.md. Every method raises
only the shared taxonomy from serenity.clients.http: TransientError (timeout, network, 429, 5xx, retried
here with bounded backoff inside the caller's deadline; a 429 that persists, or asks for a longer wait than
is slept in place, is its `Throttled` kind), ReauthRequired (401/403) and PermanentError
(other 4xx, or a payload we cannot use). The bearer never reaches a log line or an error message.
"""

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
from django.conf import settings

from markets.clients import semrush_budget
from serenity import metrics
from serenity.clients import http

log = logging.getLogger(__name__)

# Semrush accepts at most this many prompts per write and returns at most this many per page.
PROMPT_BATCH_SIZE = 100
PAGE_SIZE = 100
# A runaway cursor (a server that never stops paging) must not loop forever.
MAX_PAGES = 1000
# The language catalogue changes with Semrush releases, not per request: read once an hour per process.
LANGUAGES_CACHE_SECONDS = 3600
# The AI-model catalogue is read a page at a time, as the original reads it.
AI_MODELS_PAGE_SIZE = 100
AI_MODELS_MAX_PAGES = 5
_languages: dict[str, tuple[float, list[dict]]] = {}

# A call whose reserved slot has passed by more than its margin when it is about to go moves its reservation's calls
# to fresh slots at the end of the line (`Reservation.retake`), at most this many times; then it goes.
LATE_SLOTS_RETAKEN = 2
# What a write request passes right before it goes out (`SemrushClient(write_guard=...)`): called with the attempt's
# timeout, it raises to stop the request, or gives a context the request is sent in.
WriteGuard = Callable[[float], AbstractContextManager[None]]


class _Session:
    """The calls of one SemrushClient, sent on this thread's pooled connection (serenity/clients/http.py):
    the bearer rides on each request, never on the shared client. No attempt starts and no backoff sleeps past
    the caller's deadline, and each attempt's waits (pool, connect, write, read) are each capped at the time
    left, so an attempt can end somewhat after it. With a `pair`, every attempt first takes its slot in the
    fleet's rate budget of that pair (markets/clients/semrush_budget.py), and a 429 pauses the pair for the
    whole fleet."""

    def __init__(
        self,
        *,
        bearer: str,
        deadline: float | None,
        pair: str | None = None,
        write_guard: WriteGuard | None = None,
        reservation: semrush_budget.Reservation | None = None,
    ):
        self._reservation = reservation
        self._pool = http.pooled_client(settings.SEMRUSH_API_BASE.rstrip("/"), timeout=settings.SEMRUSH_TIMEOUT_SECONDS)
        self._headers = {"Authorization": f"Bearer {bearer}", "Accept": "application/json"}
        self._deadline = deadline
        self._pair = pair
        self._write_guard = write_guard

    def request(self, method, url, *, headers=None, **kwargs) -> httpx.Response:
        reserved = self._reservation is not None and self._reservation.covers()
        for _late in range(LATE_SLOTS_RETAKEN + 1):
            # A retake (the slot went past its margin) moves the reservation's calls to the end of the line.
            due = self._reservation.retake() if _late else self._take_slot(reserved)  # type: ignore[union-attr]
            deadline = self._deadline
            if deadline is not None and reserved:
                deadline += self._reservation.waited  # type: ignore[union-attr]  # a wait in line is not time writing
            timeout = settings.SEMRUSH_TIMEOUT_SECONDS
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    # Raised as a timeout so the retry loop classifies it as transient and stops at once.
                    raise httpx.TimeoutException("deadline reached before the request was sent")
                timeout = min(timeout, remaining)
            kwargs["timeout"] = timeout
            guard = self._write_guard(timeout) if self._write_guard is not None and method != "GET" else nullcontext()
            with guard:  # right before the request goes out, after any wait for a slot
                # A reserved slot already past by more than its margin (the thread waited for the database, or for
                # the CPU) is not used: sent now, the call would join the calls of later slots in one second of
                # Semrush's count. Its reservation moves to the end of the line instead (nothing sent, the guard's
                # record cleared): the slots it still holds are as stale.
                if due is not None and _late < LATE_SLOTS_RETAKEN and self._reservation.is_late(due):  # type: ignore[union-attr]
                    continue
                response = self._pool.request(method, url, headers={**self._headers, **(headers or {})}, **kwargs)
            break
        if response.status_code == 429 and self._pair is not None:
            semrush_budget.pause(self._pair, http.retry_after_seconds(response))
        return response

    def _take_slot(self, reserved: bool) -> float | None:
        """Wait for this call's slot: the reservation's next (its due time returned), or one of its own."""
        if reserved:
            return self._reservation.use()  # type: ignore[union-attr]
        if self._pair is not None:
            semrush_budget.take_slot(self._pair, deadline=self._deadline)
        return None


def _segment(value: object, name: str) -> str:
    """One path segment: a non-empty id, percent-encoded. A missing id is a caller bug -> PermanentError
    (which is why the methods taking an id accept None: a brand not yet linked to Semrush has none)."""
    if not isinstance(value, str) or not value.strip():
        raise http.PermanentError(f"semrush: {name} is required")
    return quote(value, safe="")


def _items(body: dict, what: str) -> list:
    items = body.get("items")
    if not isinstance(items, list):
        raise http.PermanentError(f"{what}: response has no `items` list")
    return items


def _project(raw, what: str) -> dict:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw["id"]:
        raise http.PermanentError(f"{what}: project without an id")
    return {
        "id": raw["id"],
        "name": raw.get("name"),
        "geoTargetId": raw.get("geoTargetId"),
        "languageCode": raw.get("languageCode"),
        "published": bool(raw.get("published")),
    }


def _is_conflict(exc: http.ClientError) -> bool:
    return isinstance(exc, http.PermanentError) and exc.status == 409


class SemrushClient:
    """One caller's view of Semrush. `bearer` is an IMS access token (never logged, never in a message).

    `deadline` is a `time.monotonic()` value: no attempt starts and no backoff sleeps past it (each of an
    attempt's waits is capped at the time left), and a call out of time raises TransientError.

    `pair` (an IMS client pair's name: the pair whose token `bearer` is) puts every request under the fleet's
    Semrush rate budget of that pair (SEMRUSH_MAX_CALLS_PER_SECOND): the worker's calls name it; without it a
    call takes no slot (the entry points, whose calls a user waits for under the request's deadline).

    `reservation` (semrush_budget.reserve) holds slots of that budget its requests use first, in order, before
    taking one each (the worker's phase reserves its calls at once: markets/generation/handler.py).

    `write_guard` is passed by every request that is not a read (a GET), each attempt, right before it goes out:
    what it raises stops the request unsent (the worker's fence against a market's deletion,
    markets/generation/fence.py).
    """

    def __init__(
        self,
        bearer: str,
        *,
        deadline: float | None = None,
        pair: str | None = None,
        write_guard: WriteGuard | None = None,
        reservation: semrush_budget.Reservation | None = None,
    ):
        self._bearer = bearer
        self._deadline = deadline
        self._pair = pair
        self._write_guard = write_guard
        self._reservation = reservation

    def __repr__(self) -> str:  # never the bearer
        return f"SemrushClient(deadline={self._deadline})"

    # -- plumbing ---------------------------------------------------------------------------------

    def _http(self) -> _Session:
        if not isinstance(self._bearer, str) or not self._bearer.strip():
            raise http.ReauthRequired("semrush: no bearer to call with")
        return _Session(
            bearer=self._bearer,
            deadline=self._deadline,
            pair=self._pair,
            write_guard=self._write_guard,
            reservation=self._reservation,
        )

    def _call(self, client: _Session, method: str, url: str, *, what: str, **kwargs) -> dict:
        return http.json_object(self._send(client, method, url, what=what, **kwargs), what)

    def _send(self, client: _Session, method: str, url: str, *, what: str, **kwargs) -> httpx.Response:
        try:
            response = http.request(client, method, url, what=what, deadline=self._deadline, **kwargs)
        except semrush_budget.OverBudget:
            # Our own budget deferred the call (nothing sent): counted apart from Semrush's 429s, so a dashboard
            # tells the fleet's budget binding (SemrushBudgetDeferred) from Semrush refusing (SemrushThrottled).
            metrics.emit(SemrushBudgetDeferred=(1, metrics.COUNT))
            raise
        except http.Throttled:
            # Back-pressure, not an outage: counted apart (SemrushThrottled), so a busy Semrush pages nobody.
            metrics.emit(SemrushThrottled=(1, metrics.COUNT))
            raise
        except http.TransientError:
            # Counted (SemrushCallFailure) so that an outage pages before jobs exhaust their retries.
            metrics.emit(SemrushCallFailure=(1, metrics.COUNT))
            raise
        return response

    # -- catalogue --------------------------------------------------------------------------------

    def languages(self) -> list[dict]:
        """The entries of Semrush's language catalogue that name a code, `[{id, name, code}]`: the languages an
        AI project may be in. Read-only, safe to retry; cached as `language_catalogue`."""
        return [item for item in self.language_catalogue() if isinstance(item.get("code"), str)]

    def language_catalogue(self) -> list[dict]:
        """Semrush's language catalogue as it answered it (`GET /v1/languages`), its entries that are objects.
        Cached per process for LANGUAGES_CACHE_SECONDS (it is the same for every caller). Read-only, safe to
        retry."""
        base = settings.SEMRUSH_API_BASE
        cached = _languages.get(base)
        if cached is not None and time.monotonic() - cached[0] < LANGUAGES_CACHE_SECONDS:
            return cached[1]
        body = self._call(self._http(), "GET", "/v1/languages", what="semrush.languages")
        items = [item for item in _items(body, "semrush.languages") if isinstance(item, dict)]
        _languages[base] = (time.monotonic(), items)
        return items

    def ai_models(self) -> list[dict]:
        """Semrush's global AI-model catalogue (`GET /v1/ai_models`, not a workspace's): its entries that are
        objects, every page (AI_MODELS_PAGE_SIZE a page, at most AI_MODELS_MAX_PAGES), as Semrush answered them.
        Read-only, safe to retry."""
        client = self._http()
        items: list[dict] = []
        for page in range(1, AI_MODELS_MAX_PAGES + 1):
            params = {"page": page, "limit": AI_MODELS_PAGE_SIZE}
            body = self._call(client, "GET", "/v1/ai_models", what="semrush.ai_models", params=params)
            batch = _items(body, "semrush.ai_models")
            items += [item for item in batch if isinstance(item, dict)]
            if len(batch) < AI_MODELS_PAGE_SIZE:
                break
        return items

    def brand_topics(self, *, workspace_id: str | None, domain: str, country: str) -> list[dict]:
        """Raw catalogue items as Semrush returns them: [{"topic": str|None, "volume": any,
        "examplePrompts": [str|None, ...]}]. Nothing is filtered or ranked here; entries that are not
        objects are dropped. Read-only, safe to retry."""
        path = f"/v1/workspaces/{_segment(workspace_id, 'workspace_id')}/brand-topics"
        params = {"domain": _segment(domain, "domain"), "country": _segment(country, "country")}
        client = self._http()
        body = self._call(client, "GET", path, what="semrush.brand_topics", params=params)
        return [item for item in _items(body, "semrush.brand_topics") if isinstance(item, dict)]

    # -- workspaces and projects ------------------------------------------------------------------

    def create_workspace(self, *, name: str, parent_id: str) -> str:
        """Create a sub-workspace under `parent_id`; returns its id.

        The request carries an Idempotency-Key, so a retry after a lost answer returns the same workspace
        instead of a second one. Two separate calls create two workspaces."""
        _segment(name, "name")
        _segment(parent_id, "parent_id")
        payload = {"name": name, "parentId": parent_id}
        client = self._http()
        body = self._call(
            client,
            "POST",
            "/v1/workspaces",
            what="semrush.create_workspace",
            json=payload,
            headers={"Idempotency-Key": f"ws-{uuid.uuid4()}"},
        )
        workspace_id = body.get("id")
        if not isinstance(workspace_id, str) or not workspace_id:
            raise http.PermanentError("semrush.create_workspace: response has no id")
        return workspace_id

    def find_project(self, *, workspace_id: str, geo_target_id: int, language_code: str) -> dict | None:
        """The workspace's AI project for (geo target, language), or None.
        Returns {"id", "name", "geoTargetId", "languageCode", "published"}."""
        client = self._http()
        return self._find_project(client, workspace_id, geo_target_id, language_code)

    def _find_project(self, client, workspace_id, geo_target_id, language_code) -> dict | None:
        path = f"/v1/workspaces/{_segment(workspace_id, 'workspace_id')}/ai-projects"
        params = {"geoTargetId": int(geo_target_id), "languageCode": language_code}
        body = self._call(client, "GET", path, what="semrush.find_project", params=params)
        for raw in _items(body, "semrush.find_project"):
            project = _project(raw, "semrush.find_project")
            # Filter here too: a server that ignores the query must not hand us another market's project.
            if project["geoTargetId"] == int(geo_target_id) and project["languageCode"] == language_code:
                return project
        return None

    def create_project(self, *, workspace_id: str | None, name: str, geo_target_id: int, language_code: str) -> dict:
        """Create the AI project for (geo target, language). If it already exists (a concurrent or
        earlier create: Semrush answers 409), the existing project is returned. Safe to retry."""
        path = f"/v1/workspaces/{_segment(workspace_id, 'workspace_id')}/ai-projects"
        payload = {"name": name, "geoTargetId": int(geo_target_id), "languageCode": language_code}
        client = self._http()
        try:
            body = self._call(client, "POST", path, what="semrush.create_project", json=payload)
        except http.PermanentError as exc:
            if not _is_conflict(exc):
                raise
            existing = self._find_project(client, workspace_id, geo_target_id, language_code)
            if existing is None:
                raise http.PermanentError("semrush.create_project: 409 but no project to re-read") from None
            log.info("semrush project already existed", extra={"project_id": existing["id"]})
            return existing
        return _project(body, "semrush.create_project")

    def delete_project(self, *, workspace_id: str | None, project_id: str | None) -> bool:
        """Delete the workspace's AI project, with its prompts, for good. True when this call deleted it, False
        when Semrush does not have it (404: already deleted). Idempotent, so safe to retry: a retry whose first
        try landed finds it gone."""
        path = (
            f"/v1/workspaces/{_segment(workspace_id, 'workspace_id')}/ai-projects/{_segment(project_id, 'project_id')}"
        )
        try:
            self._send(self._http(), "DELETE", path, what="semrush.delete_project")
        except http.PermanentError as exc:
            if exc.status != 404:
                raise
            return False
        return True

    # -- tags -------------------------------------------------------------------------------------

    def ensure_tags(self, *, workspace_id: str | None, wanted: dict[str, list[str]]) -> dict[tuple[str, str], str]:
        """Make sure every `root: value` tag exists in the workspace; returns {(root, value): tag_id}.

        Names match exactly (case-sensitive). Missing roots and values are created; a duplicate create
        that lost a race (409) is absorbed by re-reading the taxonomy, so concurrent callers get the same
        ids. Safe to retry."""
        ws = _segment(workspace_id, "workspace_id")
        for root, values in wanted.items():
            _segment(root, "tag root")
            for value in values:
                _segment(value, "tag value")
        result: dict[tuple[str, str], str] = {}
        client = self._http()
        taxonomy = self._tags(client, ws)
        for root, values in wanted.items():
            if root not in taxonomy:
                taxonomy = self._create_tag_root(client, ws, root, list(dict.fromkeys(values)), taxonomy)
            root_id, known = taxonomy[root]
            for value in dict.fromkeys(values):
                if value not in known:
                    taxonomy = self._create_tag_value(client, ws, root, root_id, value, taxonomy)
                    root_id, known = taxonomy[root]
                result[(root, value)] = known[value]
        return result

    def _tags(self, client, ws: str) -> dict[str, tuple[str, dict[str, str]]]:
        """{root name: (root id, {value: value id})}."""
        body = self._call(client, "GET", f"/v1/workspaces/{ws}/tags", what="semrush.list_tags")
        return self._tags_from(body, "semrush.list_tags")

    @staticmethod
    def _tags_from(body: dict, what: str) -> dict[str, tuple[str, dict[str, str]]]:
        taxonomy: dict[str, tuple[str, dict[str, str]]] = {}
        for root in _items(body, what):
            if not (isinstance(root, dict) and isinstance(root.get("id"), str) and isinstance(root.get("name"), str)):
                raise http.PermanentError(f"{what}: tag without id or name")
            values: dict[str, str] = {}
            for value in root.get("values") or []:
                if not (
                    isinstance(value, dict) and isinstance(value.get("id"), str) and isinstance(value.get("value"), str)
                ):
                    raise http.PermanentError(f"{what}: tag value without id or value")
                values[value["value"]] = value["id"]
            taxonomy[root["name"]] = (root["id"], values)
        return taxonomy

    def _create_tag_root(self, client, ws, root, values, taxonomy):
        # A new tag is created with its values in one call: the old path's write budget is counted in
        # round trips.
        try:
            body = self._call(
                client,
                "POST",
                f"/v1/workspaces/{ws}/tags",
                what="semrush.create_tag",
                json={"name": root, "values": values},
            )
        except http.PermanentError as exc:
            if not _is_conflict(exc):
                raise
            taxonomy = self._tags(client, ws)
            if root not in taxonomy:
                raise http.PermanentError("semrush.create_tag: 409 but no tag root to re-read") from None
            return taxonomy
        created = self._tags_from({"items": [body]}, "semrush.create_tag")
        if root not in created:
            raise http.PermanentError("semrush.create_tag: response does not name the tag")
        return {**taxonomy, **created}

    def _create_tag_value(self, client, ws, root, root_id, value, taxonomy):
        path = f"/v1/workspaces/{ws}/tags/{quote(root_id, safe='')}/values"
        try:
            body = self._call(client, "POST", path, what="semrush.create_tag_value", json={"value": value})
        except http.PermanentError as exc:
            if not _is_conflict(exc):
                raise
            taxonomy = self._tags(client, ws)
            if value not in taxonomy.get(root, ("", {}))[1]:
                raise http.PermanentError("semrush.create_tag_value: 409 but no tag value to re-read") from None
            return taxonomy
        if not isinstance(body.get("id"), str) or not body["id"]:
            raise http.PermanentError("semrush.create_tag_value: response has no id")
        root_id, known = taxonomy[root]
        return {**taxonomy, root: (root_id, {**known, value: body["id"]})}

    # -- prompts ----------------------------------------------------------------------------------

    def list_prompts(self, *, project_id: str) -> list[dict]:
        """Every prompt of the project, all pages, in write order:
        [{"id", "text", "tagIds", "createdBy", "createdAt", "updatedBy", "updatedAt"}]. Safe to retry."""
        path = f"/v1/ai-projects/{_segment(project_id, 'project_id')}/prompts"
        keys = ("id", "text", "tagIds", "createdBy", "createdAt", "updatedBy", "updatedAt")
        prompts, cursor = [], None
        client = self._http()
        for _ in range(MAX_PAGES):
            params = {"limit": PAGE_SIZE, **({"cursor": cursor} if cursor else {})}
            body = self._call(client, "GET", path, what="semrush.list_prompts", params=params)
            for raw in _items(body, "semrush.list_prompts"):
                if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
                    raise http.PermanentError("semrush.list_prompts: prompt without an id")
                prompts.append({key: raw.get(key) for key in keys})
            cursor = body.get("nextCursor")
            if not cursor:
                return prompts
        raise http.PermanentError("semrush.list_prompts: too many pages")

    def write_prompts(
        self, *, project_id: str | None, prompts: list[dict], user_id: str, at: datetime | None = None
    ) -> list[str]:
        """Create `prompts` ([{"text", "tagIds"}]) in the project, in batches of PROMPT_BATCH_SIZE, each
        stamped createdBy/updatedBy = `user_id` and createdAt/updatedAt = `at` (default: now, UTC).
        Returns the created ids in input order.

        Each batch carries an Idempotency-Key derived from (project, user, texts, tag ids): re-sending
        the same batch, after a lost answer or a job retry, returns the first write's ids instead of
        writing duplicates. The caller drops empty and duplicate texts (nothing is filtered here)."""
        path = f"/v1/ai-projects/{_segment(project_id, 'project_id')}/prompts"
        _segment(user_id, "user_id")
        if not all(_is_prompt(p) for p in prompts):
            raise http.PermanentError("semrush.write_prompts: each prompt needs a text and a tagIds list")
        at = at or datetime.now(UTC)
        stamp = (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()
        created: list[str] = []
        client = self._http()
        for start in range(0, len(prompts), PROMPT_BATCH_SIZE):
            batch = [
                {
                    "text": p["text"],
                    "tagIds": list(p["tagIds"]),
                    "createdBy": user_id,
                    "createdAt": stamp,
                    "updatedBy": user_id,
                    "updatedAt": stamp,
                }
                for p in prompts[start : start + PROMPT_BATCH_SIZE]
            ]
            body = self._call(
                client,
                "POST",
                path,
                what="semrush.write_prompts",
                json={"prompts": batch},
                headers={"Idempotency-Key": _batch_key(str(project_id), user_id, batch)},
            )
            items = _items(body, "semrush.write_prompts")
            ids = [item.get("id") if isinstance(item, dict) else None for item in items]
            if len(ids) != len(batch) or not all(isinstance(i, str) and i for i in ids):
                raise http.PermanentError("semrush.write_prompts: response does not list one id per prompt")
            created += [i for i in ids if isinstance(i, str)]  # all of them, as checked above
        return created

    # -- publish ----------------------------------------------------------------------------------

    def publish(self, *, project_id: str) -> dict:
        """Publish the project's current prompts. Returns {"published": True, "publishedAt": str}.
        Idempotent: publishing a published project is harmless."""
        path = f"/v1/ai-projects/{_segment(project_id, 'project_id')}/publish"
        client = self._http()
        body = self._call(client, "POST", path, what="semrush.publish", json={})
        if body.get("published") is not True:
            raise http.PermanentError("semrush.publish: the project was not published")
        return {"published": True, "publishedAt": body.get("publishedAt")}

    def publish_status(self, *, project_id: str) -> str:
        """ "published" when the project's prompts are all published, "draft" when it has unpublished
        changes (or was never published). Read-only."""
        path = f"/v1/ai-projects/{_segment(project_id, 'project_id')}"
        client = self._http()
        body = self._call(client, "GET", path, what="semrush.publish_status")
        status = body.get("status")
        if status not in ("published", "draft"):
            raise http.PermanentError("semrush.publish_status: unknown project status")
        return status


def _is_prompt(prompt) -> bool:
    if not isinstance(prompt, dict) or not isinstance(prompt.get("text"), str):
        return False
    tag_ids = prompt.get("tagIds")
    return isinstance(tag_ids, list) and all(isinstance(t, str) for t in tag_ids)


def _batch_key(project_id: str, user_id: str, batch: list[dict]) -> str:
    content = json.dumps([project_id, user_id, [[p["text"], p["tagIds"]] for p in batch]], separators=(",", ":"))
    return "prompts-" + hashlib.sha256(content.encode()).hexdigest()
