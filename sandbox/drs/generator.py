"""Deterministic DRS answers for the simulator: prompts built from the seeds and the brand, in the requested
language, with index-aligned language evidence and a consistent ship summary.

Pure functions of the request (no clock, no randomness, no database), so the same request always gets the
same answer. Shapes follow the pinned contract, tests/contracts/drs_semrush_market_generation.json.
"""

import hashlib

from django.utils.text import slugify

PRICED_MODELS = frozenset({"gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5-nano"})
MAX_PROMPTS = 500

# Per language: templates ({topic}, {brand}, {example}, {q}) and qualifiers ({q}). Every prompt is a template
# of the requested language; catalogue example prompts only fill {example}, as a real generator would use
# them as inspiration rather than copy them.
TEMPLATES = {
    "en": (
        [
            "What are the best options for {topic}{q}?",
            "How do I choose the right {topic}{q}?",
            "Which brands are recommended for {topic}{q}?",
            "Is {brand} a good choice for {topic}{q}?",
            "What should I look out for when buying {topic}{q}?",
            "How does {brand} compare with other brands for {topic}{q}?",
            "What do experts recommend for {example}{q}?",
            "Which {topic} offers the best value for money{q}?",
        ],
        [
            "",
            " for beginners",
            " on a budget",
            " for families",
            " for professionals",
            " this year",
            " for everyday use",
        ],
    ),
    "fr": (
        [
            "Quelles sont les meilleures options pour {topic}{q} ?",
            "Comment bien choisir {topic}{q} ?",
            "Quelles marques sont recommandées pour {topic}{q} ?",
            "{brand} est-il un bon choix pour {topic}{q} ?",
            "À quoi faut-il faire attention en achetant {topic}{q} ?",
            "Comment {brand} se compare-t-il aux autres marques pour {topic}{q} ?",
            "Que recommandent les experts pour {example}{q} ?",
            "Quelle offre de {topic} a le meilleur rapport qualité-prix{q} ?",
        ],
        [
            "",
            " pour les débutants",
            " avec un petit budget",
            " pour les familles",
            " pour les professionnels",
            " cette année",
            " pour un usage quotidien",
        ],
    ),
    "de": (
        [
            "Was sind die besten Optionen für {topic}{q}?",
            "Wie wähle ich das richtige Produkt für {topic}{q}?",
            "Welche Marken werden für {topic}{q} empfohlen?",
            "Ist {brand} eine gute Wahl für {topic}{q}?",
            "Worauf sollte man beim Kauf von {topic}{q} achten?",
            "Wie schneidet {brand} im Vergleich zu anderen Marken bei {topic}{q} ab?",
            "Was empfehlen Experten für {example}{q}?",
            "Welches Angebot für {topic} hat das beste Preis-Leistungs-Verhältnis{q}?",
        ],
        [
            "",
            " für Einsteiger",
            " mit kleinem Budget",
            " für Familien",
            " für Profis",
            " in diesem Jahr",
            " für den Alltag",
        ],
    ),
    "es": (
        [
            "¿Cuáles son las mejores opciones para {topic}{q}?",
            "¿Cómo elijo el producto adecuado para {topic}{q}?",
            "¿Qué marcas se recomiendan para {topic}{q}?",
            "¿Es {brand} una buena opción para {topic}{q}?",
            "¿Qué debo tener en cuenta al comprar {topic}{q}?",
            "¿Cómo se compara {brand} con otras marcas en {topic}{q}?",
            "¿Qué recomiendan los expertos para {example}{q}?",
            "¿Qué oferta de {topic} tiene la mejor relación calidad-precio{q}?",
        ],
        [
            "",
            " para principiantes",
            " con poco presupuesto",
            " para familias",
            " para profesionales",
            " este año",
            " para el uso diario",
        ],
    ),
    "it": (
        [
            "Quali sono le migliori opzioni per {topic}{q}?",
            "Come scelgo il prodotto giusto per {topic}{q}?",
            "Quali marchi sono consigliati per {topic}{q}?",
            "{brand} è una buona scelta per {topic}{q}?",
            "A cosa bisogna fare attenzione quando si acquista {topic}{q}?",
            "Come si confronta {brand} con altri marchi per {topic}{q}?",
            "Cosa consigliano gli esperti per {example}{q}?",
            "Quale offerta di {topic} ha il miglior rapporto qualità-prezzo{q}?",
        ],
        [
            "",
            " per principianti",
            " con un budget limitato",
            " per famiglie",
            " per professionisti",
            " quest'anno",
            " per l'uso quotidiano",
        ],
    ),
    "nl": (
        [
            "Wat zijn de beste opties voor {topic}{q}?",
            "Hoe kies ik het juiste product voor {topic}{q}?",
            "Welke merken worden aanbevolen voor {topic}{q}?",
            "Is {brand} een goede keuze voor {topic}{q}?",
            "Waar moet je op letten bij het kopen van {topic}{q}?",
            "Hoe verhoudt {brand} zich tot andere merken voor {topic}{q}?",
            "Wat raden experts aan voor {example}{q}?",
            "Welk aanbod voor {topic} heeft de beste prijs-kwaliteitverhouding{q}?",
        ],
        [
            "",
            " voor beginners",
            " met een klein budget",
            " voor gezinnen",
            " voor professionals",
            " dit jaar",
            " voor dagelijks gebruik",
        ],
    ),
    "pt": (
        [
            "Quais são as melhores opções para {topic}{q}?",
            "Como escolho o produto certo para {topic}{q}?",
            "Que marcas são recomendadas para {topic}{q}?",
            "A {brand} é uma boa escolha para {topic}{q}?",
            "Em que devo prestar atenção ao comprar {topic}{q}?",
            "Como a {brand} se compara com outras marcas em {topic}{q}?",
            "O que os especialistas recomendam para {example}{q}?",
            "Qual oferta de {topic} tem a melhor relação custo-benefício{q}?",
        ],
        [
            "",
            " para iniciantes",
            " com pouco orçamento",
            " para famílias",
            " para profissionais",
            " este ano",
            " para o dia a dia",
        ],
    ),
    "ja": (
        [
            "{q}{topic}のおすすめは何ですか？",
            "{q}{topic}はどのように選べばよいですか？",
            "{q}{topic}でおすすめのブランドはどこですか？",
            "{q}{topic}に{brand}は良い選択ですか？",
            "{q}{topic}を購入するときの注意点は何ですか？",
            "{q}{topic}について、{brand}は他のブランドと比べてどうですか？",
            "{q}「{example}」について専門家は何をすすめていますか？",
            "{q}コストパフォーマンスが最も良い{topic}はどれですか？",
        ],
        ["", "初心者向けに", "予算を抑えて", "家族向けに", "プロ向けに", "今年", "普段使いで"],
    ),
}
FALLBACK_LANGUAGE = "en"

# Canned reasons the switches answer with (shaped like the real service's).
HELD_REASON = "language_gate"
GATE_RETRYABLE_REASON = "llm_throttled"
GATE_TERMINAL_REASON = "guardrail_config_invalid"


def base_language(code) -> str:
    """`pt-BR`, `de_DE`, `FR` -> `pt`, `de`, `fr`."""
    return str(code or "").replace("_", "-").split("-")[0].strip().lower()


def template_language(code) -> str:
    """The language whose templates are used: the requested one, or English when there are none."""
    language = base_language(code)
    return language if language in TEMPLATES else FALLBACK_LANGUAGE


def summary(
    *,
    generated: int,
    hard_validated: int,
    final_count: int,
    verdict: str,
    reason: str,
    guardrail_dropped: int = 0,
    language_rejected: int = 0,
    error_category: str | None = None,
) -> dict:
    return {
        "generated": generated,
        "hard_validated": hard_validated,
        "guardrail_dropped": guardrail_dropped,
        "language_rejected": language_rejected,
        "quality_downranked": 0,
        "final_count": final_count,
        "verdict": verdict,
        "error_category": error_category,
        "reason": reason,
    }


def answer(prompts: list[dict], evidence: list[dict], ship_summary: dict) -> dict:
    return {"prompts": prompts, "language_evidence": evidence, "ship_summary": ship_summary}


def held(num_prompts: int) -> dict:
    """Everything generated was rejected by the language gate (the contract's held shape)."""
    return answer(
        [],
        [],
        summary(
            generated=num_prompts,
            hard_validated=num_prompts,
            language_rejected=num_prompts,
            final_count=0,
            verdict="held",
            reason=HELD_REASON,
        ),
    )


def gate_error(category: str, reason: str) -> dict:
    return answer(
        [],
        [],
        summary(
            generated=0, hard_validated=0, final_count=0, verdict="gate_error", error_category=category, reason=reason
        ),
    )


def validation_error(request: dict) -> str | None:
    """The real service's terminal gate reason for a request it would refuse, or None when it is acceptable."""
    for field, kind in (
        ("brand", str),
        ("language_code", str),
        ("market_country", str),
        ("num_prompts", int),
        ("catalogue_seeds", list),
        ("model", str),
    ):
        value = request.get(field)
        if not isinstance(value, kind) or isinstance(value, bool) or value in ("", None):
            return f"invalid_request:{field}"
    if not 1 <= request["num_prompts"] <= MAX_PROMPTS:
        return "invalid_request:num_prompts"
    if "subpath" in request:
        return "invalid_request:subpath"
    if request["model"] not in PRICED_MODELS:
        return f"invalid_model:{request['model'][:40]}"
    return None


def _seeds(request: dict) -> list[tuple[str, list[str]]]:
    seeds = []
    for seed in request.get("catalogue_seeds") or []:
        if not isinstance(seed, dict) or not str(seed.get("topic") or "").strip():
            continue
        examples = [str(e).strip() for e in seed.get("example_prompts") or [] if str(e).strip()]
        seeds.append((str(seed["topic"]).strip(), examples))
    # An empty catalogue still gets prompts: about the brand itself.
    return seeds or [(str(request["brand"]).strip(), [])]


def category(topic: str) -> str:
    return slugify(topic, allow_unicode=True)[:50] or "general"


def _evidence(prompt: str, language: str) -> dict:
    # A stable, plausible confidence derived from the text itself.
    digest = int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:4], 16)
    return {
        "detected_language": language,
        "language_confidence": round(0.75 + digest / 0xFFFF * 0.24, 4),
        "language_validation_passed": True,
    }


def prompts_for(request: dict) -> list[dict]:
    """Up to `num_prompts` distinct prompts, the most general first, cycling through the seeds in order."""
    language = template_language(request["language_code"])
    templates, qualifiers = TEMPLATES[language]
    brand = str(request["brand"]).strip()
    out, seen = [], set()
    for qi, qualifier in enumerate(qualifiers):
        for template in templates:
            for topic, examples in _seeds(request):
                example = examples[qi % len(examples)] if examples else topic
                text = template.format(topic=topic, brand=brand, example=example, q=qualifier)
                if text in seen:
                    continue
                seen.add(text)
                out.append({"prompt": text, "category": category(topic)})
                if len(out) == request["num_prompts"]:
                    return out
    return out


def ship(request: dict, *, zero: bool = False, duplicates: bool = False) -> dict:
    """A `ship` answer. `zero`: no prompts at all. `duplicates`: the prompts plus a repeat, a copy with
    surrounding whitespace and two blank ones, to exercise the caller's trimming and dedupe."""
    language = template_language(request.get("language_code"))
    prompts = [] if zero else prompts_for(request)
    evidence = [_evidence(p["prompt"], language) for p in prompts]
    if duplicates and prompts:
        first = prompts[0]
        extra = [
            {"prompt": first["prompt"], "category": first["category"]},
            {"prompt": f"  {first['prompt']}  ", "category": first["category"]},
            {"prompt": "", "category": first["category"]},
            {"prompt": "   ", "category": first["category"]},
        ]
        prompts = prompts + extra
        evidence = (
            evidence
            + [_evidence(first["prompt"], language)] * 2
            + [{"detected_language": None, "language_confidence": 0.0, "language_validation_passed": False}] * 2
        )
    count = len(prompts)
    return answer(
        prompts,
        evidence,
        summary(generated=count, hard_validated=count, final_count=count, verdict="ship", reason="ok"),
    )
