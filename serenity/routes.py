"""The classification of every dynamic path parameter in the URL configuration: a resource id or not.

A *resource* parameter names a stored record that belongs to a tenant (an organization, a brand, a job).
A view that takes one must resolve it through a caller-scoped selector (markets.selectors), and anything
the caller may not see answers exactly like absence. A *non-resource* parameter names no tenant data (a
version, a key id of a simulator's published key set, a format).

tests/serenity/test_routes.py walks the resolver and fails when a route introduces a parameter that is not
listed here, so a new id cannot reach production without someone deciding how it is scoped.
"""

from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

RESOURCE = "resource"
NON_RESOURCE = "non-resource"

PARAMETERS: dict[str, str] = {
    # Product API (/v2/): every id names a tenant's record and is read through markets.selectors.
    "orgId": RESOURCE,
    "brandId": RESOURCE,
    "jobId": RESOURCE,
    "marketId": RESOURCE,
    # A market's slice: with the brand (read through markets.selectors first) it names one market of that brand.
    "geoTargetId": RESOURCE,
    "languageCode": RESOURCE,
    # Semrush simulator (/sandbox/semrush/, local runs only): ids of the simulated Semrush, not our records.
    "semrushWorkspaceId": NON_RESOURCE,
    "semrushTagId": NON_RESOURCE,
    "semrushProjectId": NON_RESOURCE,
}

# URL namespaces not walked, with the reason. Django's admin builds its own routes (app labels, object
# ids, catch-alls) from the registered models; they are served only to staff sessions through the admin's
# own permission checks, never to API callers, and change with every registered model.
EXCLUDED_NAMESPACES = {
    "admin": "Django admin: staff-only, permission-checked by the admin, routes generated per model",
}


@dataclass(frozen=True)
class RouteParameter:
    route: str  # the whole pattern, e.g. "v2/orgs/<str:orgId>/brands/…"
    name: str


def classify(name: str) -> str | None:
    """RESOURCE, NON_RESOURCE, or None for a parameter nobody classified yet."""
    return PARAMETERS.get(name)


def _own_parameters(pattern) -> list[str]:
    if isinstance(pattern, RoutePattern):
        return list(pattern.converters)
    if isinstance(pattern, RegexPattern):
        regex = pattern.regex
        named = list(regex.groupindex)
        # An unnamed group is a positional argument: it has no name to classify, so it is reported as is.
        unnamed = [f"<unnamed group {i}>" for i in range(1, regex.groups + 1) if i not in regex.groupindex.values()]
        return named + unnamed
    return []


def route_parameters(urlconf=None) -> list[RouteParameter]:
    """Every dynamic path parameter of every route, outside the excluded namespaces."""
    found: list[RouteParameter] = []

    def walk(patterns, prefix: str, inherited: list[str]):
        for entry in patterns:
            route = prefix + str(entry.pattern)
            names = inherited + _own_parameters(entry.pattern)
            if isinstance(entry, URLResolver):
                if entry.namespace in EXCLUDED_NAMESPACES:
                    continue
                walk(entry.url_patterns, route, names)
            elif isinstance(entry, URLPattern):
                found.extend(RouteParameter(route=route, name=name) for name in names)

    walk(get_resolver(urlconf).url_patterns, "", [])
    return found


def unclassified_parameters(urlconf=None) -> list[RouteParameter]:
    """Parameters of the URL configuration that PARAMETERS does not classify (empty when all is well)."""
    return [p for p in route_parameters(urlconf) if classify(p.name) is None]
