"""The local simulators, each under its own prefix: /sandbox/ims/, /sandbox/semrush/, /sandbox/drs/, and the
original service's sign-in, /sandbox/spacecat/."""

from django.urls import include, path

urlpatterns = [
    path("ims/", include("sandbox.ims.urls")),
    path("semrush/", include("sandbox.semrush.urls")),
    path("drs/", include("sandbox.drs.urls")),
    path("spacecat/", include("sandbox.spacecat.urls")),
]
