"""The product's routes, plus `/bench/bare` (the cheapest authenticated DRF view on the same settings) and
`/bench/bare-query` (the same with one `SELECT 1`)."""

from django.db import connection
from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from serenity.urls import urlpatterns as product_urlpatterns


class BareApi(APIView):
    """Same middleware, authentication (an IMS bearer), permission and renderer as the poll; no database."""

    def get(self, request):
        return Response({"ok": True})


class BareQueryApi(BareApi):
    """The bare view plus one trivial query: the floor of any endpoint that reads the database once."""

    def get(self, request):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return Response({"ok": True})


urlpatterns = [
    path("bench/bare", BareApi.as_view()),
    path("bench/bare-query", BareQueryApi.as_view()),
    *product_urlpatterns,
]
