"""The onboarding request bodies, read the way the original service reads them (SPEC §3).

Unknown fields are ignored; codes are normalised (`us` -> `US`, `IT` -> `it`); `generatePrompts` counts only
when it is JSON `true`. A body that breaks a rule raises InvalidRequest whose detail joins the original's
sentence for every rule broken, in the original's order; the `errors` list names each field.
"""

import re
from dataclasses import dataclass, field
from typing import TypeGuard
from urllib.parse import urlsplit

from markets import geo
from markets.exceptions import InvalidRequest, UnknownLanguage, UnknownMarket

MAX_ACTIVATE_MARKETS = 50
# Fields of the original's brand that this service keeps and returns but does not act on (docs/api.md).
PROFILE_FIELDS = (
    "description",
    "brandContext",
    "mentionSentimentGuidance",
    "vertical",
    "region",
    "origin",
    "competitors",
    "socialAccounts",
    "earnedContent",
    "brandClaimsEnabled",
)
BRAND_STATUSES = ("active", "pending")
# The brand's guidance for generation, as the original checks it: a text (or null) of at most this many
# characters once trimmed (what the original stores).
GUIDANCE_FIELDS = ("brandContext", "mentionSentimentGuidance")
GUIDANCE_MAX_LENGTH = 4000
# A host name: labels of letters, digits and hyphens, a top-level label of letters.
HOST = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}"
# What a brand domain or URL may be: a host, or an http(s) URL whose host is one (the host is what is used).
# Plain ASCII classes only: the API schema carries the same expression (ECMA 262, as JSON Schema reads it).
DOMAIN_OR_URL = rf"^[ \t]*(?:[Hh][Tt][Tt][Pp][Ss]?://)?{HOST}\.?(?::[0-9]{{1,5}})?(?:[/?#][!-~]*)?[ \t]*$"
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


# White space as str.strip() sees it. A text holds some other character, and no NUL (which no database column
# can store); the schema carries the same expression. (An unpaired surrogate never gets past the JSON parser.)
WHITE_SPACE = r"\x09-\x0d\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
TEXT = rf"^[^\x00]*[^{WHITE_SPACE}\x00][^\x00]*$"
_TEXT = re.compile(TEXT)
# At most GUIDANCE_MAX_LENGTH characters between the white space at either end (the schema carries it too).
GUIDANCE = rf"^[{WHITE_SPACE}]*[\s\S]{{0,{GUIDANCE_MAX_LENGTH}}}[{WHITE_SPACE}]*$"


def is_text(value: object) -> TypeGuard[str]:
    """The original's `hasText` (a string with something besides white space), and storable."""
    return isinstance(value, str) and _TEXT.fullmatch(value) is not None


def storable(value):
    """A JSON value kept as given but for what no database can store: NUL characters are dropped (fields
    accepted and returned, not used)."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, list):
        return [storable(v) for v in value]
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    return value


def host_of(value) -> str | None:
    """The host of a domain or URL, lower-cased (`https://WWW.Example.com/x` -> `www.example.com`), or None."""
    if not is_text(value) or not re.fullmatch(DOMAIN_OR_URL, value):
        return None
    text = value.strip()
    try:
        host = urlsplit(text if "://" in text else f"https://{text}").hostname or ""
    except ValueError:
        return None
    return host.rstrip(".").lower() or None


def url_of(value) -> str | None:
    """An http(s) URL for a brand URL given as a URL or a bare host (`acme.com/p` -> `https://acme.com/p`)."""
    if host_of(value) is None:
        return None
    text = value.strip()
    return text if "://" in text else f"https://{text}"


def _error(name: str, message: str) -> dict:
    return {"pointer": f"/{name}" if name else "", "code": "invalid", "message": message}


@dataclass(frozen=True)
class MarketRequest:
    """One market to provision, normalised. `market` and `language` are what the caller sent (an activation
    answers each entry under the values it was asked with)."""

    country: str
    language_code: str
    brand_names: list[str]
    domain: str | None
    site_id: str | None = None
    name: str = ""
    display_name: str = ""
    model_ids: list[str] = field(default_factory=list)
    market: object = None
    language: object = None
    # createMarket's `generatePrompts`, JSON `true` alone (an activation's entries take the activation's).
    generate_prompts: bool = False


def _strings(value) -> list[str]:
    return [v.strip() for v in value if is_text(v)] if isinstance(value, list) else []


def market_request(body: dict) -> MarketRequest:
    """A createMarket body (or one market of an activation, with the activation's brand fields merged in).

    Rules, in the original's order: `name` when present is text; `market` is two letters; `languageCode`
    lower-cased is a BCP-47 tag; `brandDomain` or `siteId` is given; `brandNames` is a non-empty list of
    texts; and ours: `brandDomain` names a host. Then the country must exist (UnknownMarket). Raises
    InvalidRequest listing every rule broken.
    """
    errors = []
    if "name" in body and not is_text(body["name"]):
        errors.append(_error("name", "name, when provided, must be a non-empty string"))
    market = body.get("market")
    if not (isinstance(market, str) and re.fullmatch(geo.ALPHA2, market)):
        errors.append(_error("market", "market must be an ISO-2 country code"))
    language_code = geo.language_tag(body.get("languageCode"))
    if language_code is None:
        errors.append(_error("languageCode", f"languageCode must match {geo.LANGUAGE_TAG}"))
    domain_given, site_given = is_text(body.get("brandDomain")), is_text(body.get("siteId"))
    if not (domain_given or site_given):
        errors.append(_error("brandDomain", "brandDomain or siteId is required"))
    names = body.get("brandNames")
    if not (isinstance(names, list) and names and all(is_text(n) for n in names)):
        errors.append(_error("brandNames", "brandNames must be a non-empty array of strings"))
    domain = host_of(body.get("brandDomain")) if domain_given else None
    if domain_given and domain is None:
        errors.append(_error("brandDomain", "brandDomain must be a domain name or URL, e.g. example.com"))
    if site_given and not UUID.fullmatch(body["siteId"].strip()):
        errors.append(_error("siteId", "siteId did not resolve to a site domain"))
    if errors or language_code is None:  # a missing language code is among the errors
        raise InvalidRequest(errors)
    country = geo.country_code(market)
    if country is None:
        raise UnknownMarket(f"Unknown market '{market}'")
    names = _strings(names)
    return MarketRequest(
        country=country,
        language_code=language_code,
        brand_names=names,
        domain=domain,
        site_id=body["siteId"].strip() if site_given else None,
        name=body["name"].strip() if is_text(body.get("name")) else f"{country}-{language_code}",
        display_name=body["brandDisplayName"].strip() if is_text(body.get("brandDisplayName")) else names[0],
        model_ids=_strings(body.get("modelIds")),
        market=market,
        language=body.get("languageCode"),
        generate_prompts=body.get("generatePrompts") is True,
    )


@dataclass(frozen=True)
class ActivateRequest:
    """An activation body: every field optional. `markets` is None when the body lists none (absent, not an
    array, or empty); each listed entry is kept as sent, to be read with market_request."""

    generate_prompts: bool
    domain_given: bool
    markets: list | None
    shared: dict


def activate_request(body: dict) -> ActivateRequest:
    """Raises InvalidRequest only for more than MAX_ACTIVATE_MARKETS markets; everything else is read per
    market (a market that breaks a rule is answered in its own entry)."""
    markets = body.get("markets")
    if isinstance(markets, list) and len(markets) > MAX_ACTIVATE_MARKETS:
        raise InvalidRequest([_error("markets", f"markets must not exceed {MAX_ACTIVATE_MARKETS} entries")])
    shared = {key: body[key] for key in ("brandDomain", "brandNames", "brandDisplayName") if key in body}
    return ActivateRequest(
        generate_prompts=body.get("generatePrompts") is True,
        domain_given=is_text(body.get("brandDomain")),
        markets=markets if isinstance(markets, list) and markets else None,
        shared=shared,
    )


def activation_market_body(entry, shared: dict) -> dict:
    """One activation entry as a createMarket body: the entry's own fields over the activation's brand fields
    (an entry that is not an object has none of its own)."""
    own = entry if isinstance(entry, dict) else {}
    body = {**shared, **{k: own[k] for k in ("market", "languageCode", "name", "modelIds") if k in own}}
    if not isinstance(entry, dict):
        body.pop("market", None)
    return body


@dataclass(frozen=True)
class BrandRequest:
    name: str
    status: str
    urls: list[str]
    primary_url: str | None
    domain: str | None
    market: dict | None
    generate_prompts: bool
    model_ids: list[str]
    models_given: bool
    aliases: list[dict]
    base_site_id: str | None
    profile: dict


def semrush_work_errors(request: BrandRequest) -> None:
    """The original's rules for the Semrush work a createBrand asks for: generation needs a market; an active
    brand's market needs a primary URL, and its generation at least one AI model. Raises InvalidRequest."""
    if request.generate_prompts and request.market is None:
        message = ("semrushMarket", "market and languageCode are required when generatePrompts is true")
    elif request.status != "active":
        return
    elif request.market is not None and request.primary_url is None:
        message = ("urls", "A primary URL is required to provision a Semrush brand")
    elif request.generate_prompts and not request.models_given:
        message = ("semrushModelIds", "semrushModelIds must list at least one AI model to track")
    else:
        return
    raise InvalidRequest([_error(*message)])


def brand_aliases(value) -> list[dict]:
    """`brandAliases` as the original normalises them: a string is `{name, regions: []}`, an object keeps its
    `name` and `regions` (a list of strings; anything else is `[]`); entries without a name are dropped, and of two
    with one name the first stays (the original's `brand_aliases` rows are unique by name)."""
    entries: dict[str, dict] = {}
    for alias in value if isinstance(value, list) else []:
        name, regions = (alias.get("name"), alias.get("regions")) if isinstance(alias, dict) else (alias, [])
        if is_text(name) and name not in entries:
            regions = [r for r in regions if isinstance(r, str)] if isinstance(regions, list) else []
            entries[name] = {"name": storable(name), "regions": storable(regions)}
    return list(entries.values())


def competitors(value) -> list[dict]:
    """`competitors` as the original normalises them: a string is the competitor's name, an object keeps `name`,
    `url` (or null), `aliases` and `regions`; entries without a name are dropped, the first of one name stays."""
    entries: dict[str, dict] = {}
    for entry in value if isinstance(value, list) else []:
        fields = entry if isinstance(entry, dict) else {"name": entry}
        name = fields.get("name")
        if is_text(name) and name not in entries:
            entries[name] = storable(
                {
                    "name": name,
                    "url": fields.get("url") if is_text(fields.get("url")) else None,
                    "aliases": [a for a in _list(fields.get("aliases")) if isinstance(a, str)],
                    "regions": [r for r in _list(fields.get("regions")) if isinstance(r, str)],
                }
            )
    return list(entries.values())


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _guidance(value):
    """A guidance field as the original stores it: trimmed, and a blank one is null."""
    return (value.strip() or None) if isinstance(value, str) else value


def _brand_urls(body: dict, errors: list) -> list[str]:
    """The brand's URLs: `urls` entries (strings, or `{value}` objects), else our older `primaryUrl` or
    `domain`. Each must name a host."""
    urls = []
    if "urls" in body:
        if not isinstance(body["urls"], list):
            errors.append(_error("urls", "urls must be an array"))
            return []
        for index, entry in enumerate(body["urls"]):
            value = entry.get("value") if isinstance(entry, dict) else entry
            if host_of(value) is None:
                errors.append(_error(f"urls/{index}", "urls must hold domain names or http(s) URLs"))
            else:
                urls.append(str(value).strip())  # a string: it names a host
    for legacy in ("primaryUrl", "domain"):
        if legacy in body:
            if host_of(body[legacy]) is None:
                errors.append(_error(legacy, f"{legacy} must be a domain name or an http(s) URL"))
            elif not urls:
                urls = [body[legacy].strip()]
    return urls


def brand_request(body) -> BrandRequest:
    """A createBrand body. Raises InvalidRequest (the original's sentences) for a missing name, guidance that
    is no text or too long, an unknown status, a brand URL that is not one, a `baseSiteId` that is not a UUID,
    or a `semrushMarket` without both its fields (or with codes that are none). What Semrush work needs
    (semrush_work_errors) is checked once the organization is known to have Serenity."""
    if not isinstance(body, dict) or not body:
        raise InvalidRequest([_error("", "Brand data is required")])
    errors = []
    if not is_text(body.get("name")):
        errors.append(_error("name", "Brand name is required"))
    for name in GUIDANCE_FIELDS:
        value = body.get(name)
        if value is not None and not isinstance(value, str):
            errors.append(_error(name, f"{name} must be a string or null"))
        elif value is not None and len(value.strip()) > GUIDANCE_MAX_LENGTH:
            errors.append(_error(name, f"{name} must be at most {GUIDANCE_MAX_LENGTH} characters"))
    status = body.get("status", "active")
    if status not in BRAND_STATUSES:
        errors.append(_error("status", "status must be active or pending"))
    urls = _brand_urls(body, errors)
    market = body.get("semrushMarket")
    market = market if isinstance(market, dict) and market else None
    if market is not None:
        if not (is_text(market.get("market")) and is_text(market.get("languageCode"))):
            errors.append(_error("semrushMarket", "semrushMarket requires market and languageCode"))
        else:
            if not re.fullmatch(geo.ALPHA2, market["market"]):
                errors.append(_error("semrushMarket/market", "market must be an ISO-2 country code"))
            if geo.language_tag(market["languageCode"]) is None:
                errors.append(_error("semrushMarket/languageCode", f"languageCode must match {geo.LANGUAGE_TAG}"))
    base_site_id = body.get("baseSiteId")
    if "baseSiteId" in body and not (isinstance(base_site_id, str) and UUID.fullmatch(base_site_id)):
        errors.append(_error("baseSiteId", "baseSiteId must be a valid UUID"))
    if errors:
        raise InvalidRequest(errors)
    if market is not None:
        # Checked now even for a brand that stays pending: its market is provisioned later, on activation, and
        # must be one that can be. The languages are those of the catalogue as it stood (markets/data).
        if geo.country_code(market["market"]) is None:
            raise UnknownMarket(f"Unknown market '{market['market']}'")
        tag = geo.language_tag(market["languageCode"])
        if tag is None or geo.language_in(list(geo.known_languages()), tag) is None:
            raise UnknownLanguage(f"Language '{market['languageCode'].lower()}' not found")
    model_ids = body.get("semrushModelIds")
    primary = url_of(urls[0]) if urls else None
    return BrandRequest(
        name=body["name"].strip(),
        status=status,
        urls=urls,
        primary_url=primary,
        domain=host_of(primary) if primary else None,
        market=market,
        generate_prompts=body.get("generatePrompts") is True,
        model_ids=_strings(model_ids),
        models_given=isinstance(model_ids, list) and bool(model_ids) and all(is_text(m) for m in model_ids),
        base_site_id=base_site_id,
        aliases=brand_aliases(body.get("brandAliases")) or brand_aliases(body.get("aliases")),
        profile={
            key: competitors(body[key])
            if key == "competitors"
            else storable(_guidance(body[key]) if key in GUIDANCE_FIELDS else body[key])
            for key in PROFILE_FIELDS
            if key in body
        },
    )
