"""Every dynamic path parameter of the URL configuration is classified in serenity/routes.py."""

from django.urls import include, path, re_path

from serenity import routes


def view(request, **kwargs):
    raise AssertionError("never called")


def test_every_route_parameter_is_classified_as_resource_or_not():
    unclassified = routes.unclassified_parameters()

    assert unclassified == [], (
        "Classify these path parameters in serenity/routes.py PARAMETERS (resource ids are read through a "
        "caller-scoped selector): " + ", ".join(f"{p.name} in {p.route!r}" for p in unclassified)
    )


def test_the_walk_sees_the_product_routes():
    found = {(p.route, p.name) for p in routes.route_parameters()}

    job = "v2/orgs/<str:orgId>/brands/<str:brandId>/serenity/markets/generation/jobs/<str:jobId>"
    assert {(job, "orgId"), (job, "brandId"), (job, "jobId"), (job + "/reauth", "jobId")} <= found
    market = "v2/orgs/<str:orgId>/brands/<str:brandId>/serenity/markets/<str:geoTargetId>/<str:languageCode>"
    assert {(market, "geoTargetId"), (market, "languageCode"), ("v2/orgs/<str:orgId>/serenity/languages", "orgId")} <= (
        found
    )
    assert (routes.classify("geoTargetId"), routes.classify("languageCode")) == (routes.RESOURCE, routes.RESOURCE)


def test_a_new_unclassified_parameter_is_reported_with_its_route(settings):
    settings.ROOT_URLCONF = __name__

    assert routes.unclassified_parameters() == [
        routes.RouteParameter(route="v2/orgs/<str:orgId>/widgets/<int:widgetId>", name="widgetId"),
        routes.RouteParameter(route="legacy/(?P<legacyKey>[a-z]+)/([0-9]+)", name="legacyKey"),
        routes.RouteParameter(route="legacy/(?P<legacyKey>[a-z]+)/([0-9]+)", name="<unnamed group 2>"),
    ]


def test_django_admin_routes_are_left_out_with_a_reason():
    assert set(routes.EXCLUDED_NAMESPACES) == {"admin"}
    assert not [p for p in routes.route_parameters() if p.route.startswith("admin/")]


# The URL configuration of test_a_new_unclassified_parameter_is_reported_with_its_route.
urlpatterns = [
    path("v2/orgs/<str:orgId>/", include([path("widgets/<int:widgetId>", view)])),
    re_path(r"legacy/(?P<legacyKey>[a-z]+)/([0-9]+)", view),
]
