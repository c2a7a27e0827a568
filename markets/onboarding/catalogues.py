"""The add-brand wizard's catalogues (SPEC §3.1): the languages and the AI models Semrush supports, read from Semrush
with the request's credential and answered as the original does, with its fallbacks: an endpoint Semrush does not
serve (404 or 405) is an empty list, so the wizard offers no filter rather than an error."""

from markets.clients.semrush import SemrushClient
from markets.deadlines import request_deadline
from markets.exceptions import semrush_failed
from markets.onboarding.inputs import is_text
from serenity.clients.http import ClientError, PermanentError

# What Semrush answers for an endpoint it does not serve.
UNSERVED = (404, 405)


def _unserved(exc: ClientError) -> bool:
    return isinstance(exc, PermanentError) and exc.status in UNSERVED


def languages_catalogue(*, semrush_bearer: str) -> list[dict]:
    """`[{id, name, code}]`: every language of Semrush's catalogue that has a name, sorted by name (`id` and `code`
    null when Semrush gives none). Read once an hour per process (the catalogue createMarket's check reads).
    Semrush not serving it -> []; refusing the credential -> SemrushRefused (401) or SemrushForbidden (403); any
    other failure -> SemrushUnavailable (502)."""
    try:
        items = SemrushClient(semrush_bearer, deadline=request_deadline()).language_catalogue()
    except ClientError as exc:
        if _unserved(exc):
            return []
        raise semrush_failed(exc, "Semrush's language catalogue could not be read; retry later.") from None
    languages = [
        {
            "id": str(item["id"]) if is_text(item.get("id")) else None,
            "name": item["name"],
            "code": item["code"] if is_text(item.get("code")) else None,
        }
        for item in items
        if is_text(item.get("name"))
    ]
    return sorted(languages, key=lambda language: (language["name"].casefold(), language["name"]))


def models_catalogue(*, semrush_bearer: str) -> list[dict]:
    """`[{id, key, name, icon}]`: Semrush's global AI-model catalogue (not a workspace's: the wizard reads it before
    the brand has one), in Semrush's order. An entry may come wrapped (`{model: {...}}`); one without an `id` and a
    `key` is left out. Semrush not serving it -> []; otherwise as `languages_catalogue`."""
    try:
        items = SemrushClient(semrush_bearer, deadline=request_deadline()).ai_models()
    except ClientError as exc:
        if _unserved(exc):
            return []
        raise semrush_failed(exc, "Semrush's AI-model catalogue could not be read; retry later.") from None
    models = [item["model"] if isinstance(item.get("model"), dict) else item for item in items]
    return [
        {
            "id": model["id"],
            "key": model["key"],
            "name": model["name"] if isinstance(model.get("name"), str) else None,
            "icon": model["icon"] if isinstance(model.get("icon"), str) else None,
        }
        for model in models
        if is_text(model.get("id")) and is_text(model.get("key"))
    ]
