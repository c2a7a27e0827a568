"""The simulator's brand-topic catalogue: deterministic per (domain, country), in the country's main language.

About sixty topics with numeric volumes plus a few deliberately messy items (no topic, a non-numeric
volume, empty example strings), shuffled rather than ranked, so the product's own filtering and sorting
are exercised. A CatalogueOverride row replaces the generated catalogue for its (domain, country).
"""

import hashlib
import random

TOPIC_COUNT = 60

# The main language of a country, for the languages the phrase banks cover; anything else is English.
LANGUAGE_BY_COUNTRY = {
    "FR": "fr",
    "BE": "nl",
    "LU": "fr",
    "MC": "fr",
    "DE": "de",
    "AT": "de",
    "CH": "de",
    "LI": "de",
    "ES": "es",
    "MX": "es",
    "AR": "es",
    "CO": "es",
    "CL": "es",
    "PE": "es",
    "IT": "it",
    "SM": "it",
    "NL": "nl",
    "PT": "pt",
    "BR": "pt",
    "JP": "ja",
}

# Per language: subjects (what people ask about), topic forms, and example-prompt templates.
# `{brand}` is the brand name derived from the domain, `{subject}` one subject.
BANKS = {
    "en": {
        "subjects": [
            "pricing",
            "customer support",
            "delivery times",
            "alternatives",
            "reviews",
            "sustainability",
            "return policy",
            "loyalty program",
            "mobile app",
            "gift cards",
            "discount codes",
            "store locations",
            "product quality",
            "warranty",
            "shipping costs",
            "payment options",
            "size guide",
            "new collection",
            "opening hours",
            "student discount",
            "subscription plans",
            "data privacy",
        ],
        "topics": ["{subject}", "{brand} {subject}", "best {subject}"],
        "prompts": [
            "What is the best option for {subject} right now?",
            "How does {brand} compare to its competitors on {subject}?",
            "Is {brand} worth it for {subject}?",
            "Which brands are known for good {subject}?",
            "What do customers say about {brand} {subject}?",
            "Where can I find honest information about {subject}?",
            "What should I look for when comparing {subject}?",
            "Can you recommend a company with reliable {subject}?",
        ],
    },
    "fr": {
        "subjects": [
            "les prix",
            "le service client",
            "les délais de livraison",
            "les alternatives",
            "les avis",
            "la durabilité",
            "la politique de retour",
            "le programme de fidélité",
            "l'application mobile",
            "les cartes cadeaux",
            "les codes promo",
            "les magasins",
            "la qualité des produits",
            "la garantie",
            "les frais de livraison",
            "les moyens de paiement",
            "le guide des tailles",
            "la nouvelle collection",
            "les horaires d'ouverture",
            "la réduction étudiante",
            "les abonnements",
            "la confidentialité des données",
        ],
        "topics": ["{subject}", "{brand} : {subject}", "meilleur choix pour {subject}"],
        "prompts": [
            "Quelle marque est la meilleure pour {subject} en ce moment ?",
            "Comment {brand} se compare-t-il à ses concurrents pour {subject} ?",
            "Est-ce que {brand} vaut le coup pour {subject} ?",
            "Quelles marques sont réputées pour {subject} ?",
            "Que disent les clients de {brand} sur {subject} ?",
            "Où trouver des informations fiables sur {subject} ?",
            "Que faut-il vérifier quand on compare {subject} ?",
            "Peux-tu me recommander une entreprise sérieuse pour {subject} ?",
        ],
    },
    "de": {
        "subjects": [
            "Preise",
            "Kundenservice",
            "Lieferzeiten",
            "Alternativen",
            "Bewertungen",
            "Nachhaltigkeit",
            "Rückgaberecht",
            "Treueprogramm",
            "die mobile App",
            "Geschenkkarten",
            "Rabattcodes",
            "Filialen",
            "Produktqualität",
            "Garantie",
            "Versandkosten",
            "Zahlungsmethoden",
            "Größentabelle",
            "die neue Kollektion",
            "Öffnungszeiten",
            "Studentenrabatt",
            "Abo-Modelle",
            "Datenschutz",
        ],
        "topics": ["{subject}", "{brand} {subject}", "beste Wahl für {subject}"],
        "prompts": [
            "Welche Marke ist aktuell am besten bei {subject}?",
            "Wie schneidet {brand} bei {subject} im Vergleich zur Konkurrenz ab?",
            "Lohnt sich {brand} in Sachen {subject}?",
            "Welche Anbieter sind für {subject} bekannt?",
            "Was sagen Kunden über {brand} und {subject}?",
            "Wo finde ich verlässliche Informationen zu {subject}?",
            "Worauf sollte ich beim Vergleich von {subject} achten?",
            "Kannst du mir ein Unternehmen mit guten {subject} empfehlen?",
        ],
    },
    "es": {
        "subjects": [
            "los precios",
            "la atención al cliente",
            "los plazos de entrega",
            "las alternativas",
            "las opiniones",
            "la sostenibilidad",
            "la política de devoluciones",
            "el programa de fidelidad",
            "la aplicación móvil",
            "las tarjetas regalo",
            "los códigos de descuento",
            "las tiendas",
            "la calidad del producto",
            "la garantía",
            "los gastos de envío",
            "los métodos de pago",
            "la guía de tallas",
            "la nueva colección",
            "los horarios",
            "el descuento para estudiantes",
            "las suscripciones",
            "la privacidad de los datos",
        ],
        "topics": ["{subject}", "{brand}: {subject}", "mejor opción para {subject}"],
        "prompts": [
            "¿Qué marca es la mejor en {subject} ahora mismo?",
            "¿Cómo se compara {brand} con la competencia en {subject}?",
            "¿Vale la pena {brand} por {subject}?",
            "¿Qué marcas destacan por {subject}?",
            "¿Qué opinan los clientes de {brand} sobre {subject}?",
            "¿Dónde encuentro información fiable sobre {subject}?",
            "¿Qué debo tener en cuenta al comparar {subject}?",
            "¿Me recomiendas una empresa fiable en cuanto a {subject}?",
        ],
    },
    "it": {
        "subjects": [
            "i prezzi",
            "l'assistenza clienti",
            "i tempi di consegna",
            "le alternative",
            "le recensioni",
            "la sostenibilità",
            "la politica di reso",
            "il programma fedeltà",
            "l'app mobile",
            "le carte regalo",
            "i codici sconto",
            "i negozi",
            "la qualità dei prodotti",
            "la garanzia",
            "le spese di spedizione",
            "i metodi di pagamento",
            "la guida alle taglie",
            "la nuova collezione",
            "gli orari di apertura",
            "lo sconto studenti",
            "gli abbonamenti",
            "la privacy dei dati",
        ],
        "topics": ["{subject}", "{brand}: {subject}", "scelta migliore per {subject}"],
        "prompts": [
            "Qual è il marchio migliore per {subject} in questo momento?",
            "Come si confronta {brand} con i concorrenti per {subject}?",
            "Conviene scegliere {brand} per {subject}?",
            "Quali marchi sono noti per {subject}?",
            "Cosa dicono i clienti di {brand} riguardo a {subject}?",
            "Dove trovo informazioni affidabili su {subject}?",
            "A cosa devo fare attenzione quando confronto {subject}?",
            "Mi consigli un'azienda affidabile per {subject}?",
        ],
    },
    "nl": {
        "subjects": [
            "prijzen",
            "klantenservice",
            "levertijden",
            "alternatieven",
            "reviews",
            "duurzaamheid",
            "retourbeleid",
            "spaarprogramma",
            "de mobiele app",
            "cadeaukaarten",
            "kortingscodes",
            "winkels",
            "productkwaliteit",
            "garantie",
            "verzendkosten",
            "betaalmethoden",
            "maattabel",
            "de nieuwe collectie",
            "openingstijden",
            "studentenkorting",
            "abonnementen",
            "privacy",
        ],
        "topics": ["{subject}", "{brand} {subject}", "beste keuze voor {subject}"],
        "prompts": [
            "Welk merk is op dit moment het beste in {subject}?",
            "Hoe verhoudt {brand} zich tot de concurrentie op het gebied van {subject}?",
            "Is {brand} de moeite waard voor {subject}?",
            "Welke merken staan bekend om goede {subject}?",
            "Wat zeggen klanten over {brand} en {subject}?",
            "Waar vind ik betrouwbare informatie over {subject}?",
            "Waar moet ik op letten bij het vergelijken van {subject}?",
            "Kun je een betrouwbaar bedrijf aanraden voor {subject}?",
        ],
    },
    "pt": {
        "subjects": [
            "os preços",
            "o atendimento ao cliente",
            "os prazos de entrega",
            "as alternativas",
            "as avaliações",
            "a sustentabilidade",
            "a política de devolução",
            "o programa de fidelidade",
            "o aplicativo",
            "os cartões-presente",
            "os cupons de desconto",
            "as lojas",
            "a qualidade dos produtos",
            "a garantia",
            "o frete",
            "as formas de pagamento",
            "a tabela de tamanhos",
            "a nova coleção",
            "o horário de funcionamento",
            "o desconto para estudantes",
            "as assinaturas",
            "a privacidade dos dados",
        ],
        "topics": ["{subject}", "{brand}: {subject}", "melhor opção para {subject}"],
        "prompts": [
            "Qual é a melhor marca em {subject} neste momento?",
            "Como a {brand} se compara aos concorrentes em {subject}?",
            "Vale a pena escolher a {brand} por {subject}?",
            "Quais marcas são conhecidas por {subject}?",
            "O que os clientes dizem da {brand} sobre {subject}?",
            "Onde encontro informações confiáveis sobre {subject}?",
            "O que devo observar ao comparar {subject}?",
            "Pode me recomendar uma empresa confiável em {subject}?",
        ],
    },
    "ja": {
        "subjects": [
            "価格",
            "カスタマーサポート",
            "配送日数",
            "代替サービス",
            "口コミ",
            "サステナビリティ",
            "返品ポリシー",
            "ポイントプログラム",
            "モバイルアプリ",
            "ギフトカード",
            "クーポン",
            "店舗",
            "品質",
            "保証",
            "送料",
            "支払い方法",
            "サイズガイド",
            "新作コレクション",
            "営業時間",
            "学割",
            "サブスクリプション",
            "個人情報保護",
        ],
        "topics": ["{subject}", "{brand} {subject}", "{subject} おすすめ"],
        "prompts": [
            "今いちばん{subject}が良いブランドはどこですか？",
            "{brand}の{subject}は競合と比べてどうですか？",
            "{subject}の点で{brand}を選ぶ価値はありますか？",
            "{subject}で評判の良いブランドを教えてください。",
            "{brand}の{subject}について利用者の評価はどうですか？",
            "{subject}について信頼できる情報はどこで見つかりますか？",
            "{subject}を比較するときに注意すべき点は何ですか？",
            "{subject}が信頼できる会社をおすすめしてください。",
        ],
    },
}


def language_for(country: str) -> str:
    return LANGUAGE_BY_COUNTRY.get(country.upper(), "en")


def brand_name(domain: str) -> str:
    """`acme-coffee.example.com` -> `Acme Coffee`: the name a catalogue's branded prompts mention."""
    host = domain.lower().strip().removeprefix("www.")
    label = host.split(".", 1)[0] or host
    return " ".join(part.capitalize() for part in label.replace("_", "-").split("-") if part) or domain


def normalise(domain: str, country: str) -> tuple[str, str]:
    return domain.lower().strip().removeprefix("www."), country.upper().strip()


def generate(domain: str, country: str) -> list[dict]:
    """The generated catalogue for (domain, country): same input, same list, every time."""
    domain, country = normalise(domain, country)
    rng = random.Random(hashlib.sha256(f"{domain}|{country}".encode()).digest())  # repeatable, not secret
    bank = BANKS[language_for(country)]
    brand = brand_name(domain)
    combos = [(form, subject) for form in bank["topics"] for subject in bank["subjects"]]
    rng.shuffle(combos)
    items = []
    seen = set()
    for form, subject in combos:
        topic = form.format(brand=brand, subject=subject)
        if topic in seen:
            continue
        seen.add(topic)
        # Search volumes are long-tailed: a few big topics, many small ones.
        volume = int(10 ** rng.uniform(1.3, 4.8))
        templates = rng.sample(bank["prompts"], rng.randint(3, 6))
        items.append(
            {
                "topic": topic,
                "volume": volume,
                "examplePrompts": [t.format(brand=brand, subject=subject) for t in templates],
            }
        )
        if len(items) == TOPIC_COUNT:
            break
    for messy in _messy_items(rng, bank, brand):
        items.insert(rng.randrange(len(items) + 1), messy)
    return items


def _messy_items(rng: random.Random, bank: dict, brand: str) -> list[dict]:
    """What real catalogues contain and the product must tolerate."""
    subject = rng.choice(bank["subjects"])
    prompt = rng.choice(bank["prompts"]).format(brand=brand, subject=subject)
    return [
        {"topic": None, "volume": 9100, "examplePrompts": [prompt]},  # no topic: must be dropped
        {"topic": "", "volume": 8800, "examplePrompts": [prompt]},  # empty topic: must be dropped
        {"topic": f"{subject} ?", "volume": "n/a", "examplePrompts": [prompt, "", None]},  # volume counts as 0
        {"topic": f"{brand} {subject} 2", "volume": None, "examplePrompts": ["", "   ", None]},  # no usable prompt
        {"topic": f"{brand} {subject} 3", "volume": 40, "examplePrompts": []},
    ]
