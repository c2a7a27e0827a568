"""The old synchronous prompt path (SPEC §8): catalogue prompts copied verbatim into a new market's project,
tagged, inside the request, under one write deadline shared by every market of the request.

Each prompt is tagged branded / non-branded, and with a search intent. The intent classifier is deterministic
and keyword-based, behind a small interface so a better one can replace it without touching the path. Rules,
first match wins (case-insensitive, whole words): transactional (buy, price, order, discount…), navigational
(login, website, official, near me…), commercial (best, vs, review, compare, top…); otherwise informational.
Keywords cover en, fr, de, es, it.
"""

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings

from markets.catalogue import example_prompts, rank_topics
from markets.clients.semrush import SemrushClient
from markets.models import Brand, Market
from serenity.auth import Caller
from serenity.clients.http import ClientError, TransientError

log = logging.getLogger(__name__)

# --- Tagging -----------------------------------------------------------------------------------------------------

INTENTS = ("transactional", "navigational", "commercial", "informational")

_KEYWORDS = {
    "transactional": "buy purchase order price prices pricing cost cheap discount deal deals coupon sale shop "
    "acheter prix commander kaufen preis bestellen günstig comprar precio oferta comprare prezzo",
    "navigational": "login log sign website site official app download contact near store stores "
    "connexion officiel anmelden offizielle iniciar oficial accedi ufficiale",
    "commercial": "best top vs versus review reviews compare comparison alternative alternatives rating "
    "meilleur meilleure meilleurs comparatif avis beste bester vergleich test mejor mejores "
    "comparativa migliore migliori confronto recensioni",
}
_PATTERNS = {
    intent: re.compile(r"\b(" + "|".join(map(re.escape, words.split())) + r")\b", re.IGNORECASE)
    for intent, words in _KEYWORDS.items()
}


class IntentClassifier(Protocol):
    def classify(self, text: str) -> str: ...


class KeywordIntentClassifier:
    def classify(self, text: str) -> str:
        for intent in ("transactional", "navigational", "commercial"):
            if _PATTERNS[intent].search(text):
                return intent
        return "informational"


def brand_needles(name: str, aliases: list[str]) -> list[re.Pattern]:
    words = {w.strip() for w in [name, *aliases] if isinstance(w, str) and w.strip()}
    ordered = sorted(words, key=len, reverse=True)
    return [re.compile(r"(?<!\w)" + re.escape(w) + r"(?!\w)", re.IGNORECASE) for w in ordered]


def prompt_type(text: str, needles: list[re.Pattern]) -> str:
    return "branded" if any(n.search(text) for n in needles) else "non-branded"


# --- Writing -----------------------------------------------------------------------------------------------------


@dataclass
class SyncBudget:
    """The old path's single write deadline, shared by every market of one request."""

    deadline: float = field(default_factory=lambda: time.monotonic() + settings.SYNC_WRITE_DEADLINE_SECONDS)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def sync_prompts_write(
    *,
    caller: Caller,
    brand: Brand,
    market: Market,
    semrush_bearer: str,
    budget: SyncBudget,
    classifier: IntentClassifier | None = None,
) -> dict:
    """Copy the catalogue's verbatim example prompts into the market's project, tagged, within the
    request's shared deadline. Returns `{status, written, topics}`: `status` is `written` (all of them),
    `partial` (the deadline or Semrush cut it short), `skipped` (no time left before starting), `empty` (no
    catalogue prompts) or `failed` (Semrush refused); `topics` counts the catalogue topics the prompts came
    from. Branded prompts are those naming one of the market's brand names or the brand's aliases."""
    if budget.remaining() <= 0:
        return {"status": "skipped", "written": 0, "topics": 0}
    client = SemrushClient(semrush_bearer, deadline=budget.deadline)
    classifier = classifier or KeywordIntentClassifier()
    try:
        items = client.brand_topics(
            workspace_id=brand.semrush_workspace_id, domain=market.domain or brand.domain, country=market.country
        )
    except ClientError as exc:
        log.warning("catalogue unreadable; market left without prompts", extra={"reason": type(exc).__name__})
        return {"status": "failed", "written": 0, "topics": 0}
    texts = example_prompts(items, settings.SYNC_TOP_TOPICS)
    if not texts:
        return {"status": "empty", "written": 0, "topics": 0}
    topics = len(rank_topics(items, settings.SYNC_TOP_TOPICS))
    needles = brand_needles(brand.name, [*(market.brand_names or []), *brand.aliases])
    labelled = [(t, prompt_type(t, needles), classifier.classify(t)) for t in texts]
    written = 0
    try:
        tags = client.ensure_tags(
            workspace_id=brand.semrush_workspace_id,
            wanted={
                "source": ["semrush"],
                "type": sorted({kind for _, kind, _ in labelled}),
                "intent": sorted({intent for _, _, intent in labelled}),
            },
        )
        batch = 100
        for start in range(0, len(labelled), batch):
            if budget.remaining() <= 0:
                break
            chunk = labelled[start : start + batch]
            client.write_prompts(
                project_id=market.semrush_project_id,
                user_id=caller.user_id,
                prompts=[
                    {"text": t, "tagIds": [tags[("source", "semrush")], tags[("type", kind)], tags[("intent", intent)]]}
                    for t, kind, intent in chunk
                ],
            )
            written += len(chunk)
    except TransientError as exc:
        log.warning("old-path prompt write cut short", extra={"reason": type(exc).__name__, "written": written})
    except ClientError as exc:
        log.warning("old-path prompt write refused", extra={"reason": type(exc).__name__, "written": written})
        return {"status": "partial" if written else "failed", "written": written, "topics": topics}
    return {"status": _sync_status(written, len(labelled)), "written": written, "topics": topics}


def _sync_status(written: int, total: int) -> str:
    if written == total:
        return "written"
    return "partial" if written else "skipped"
