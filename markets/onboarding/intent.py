"""Prompt tagging for the old synchronous path: branded / non-branded, and a search intent.

The intent classifier is deterministic and keyword-based, behind a small interface so a better one can
replace it without touching the path. Rules, first match wins (case-insensitive, whole words):
transactional (buy, price, order, discount…), navigational (login, website, official, near me…),
commercial (best, vs, review, compare, top…); otherwise informational. Keywords cover en, fr, de, es, it.
"""

import re
from typing import Protocol

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
