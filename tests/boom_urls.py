"""A URL configuration for tests of the error pipeline: the product's routes plus views that fail."""

from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView

from serenity.urls import handler400, handler403, handler404, handler500  # noqa: F401
from serenity.urls import urlpatterns as product


def plain_boom(request):
    raise RuntimeError("database password is hunter2")


class ApiBoom(APIView):
    permission_classes = [AllowAny]
    authentication_classes = []

    def get(self, request):
        raise KeyError("internal detail: promise_token=abc123")


class ApiDatabaseCut(APIView):
    """A request whose database connection is cut under it, as a failover cuts it mid-request."""

    permission_classes = [AllowAny]
    authentication_classes = []

    def get(self, request):
        from django.db import connection

        from tests.failover import end_this_threads_backend

        end_this_threads_backend()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")


urlpatterns = [
    path("boom/plain", plain_boom),
    path("boom/api", ApiBoom.as_view()),
    path("boom/database", ApiDatabaseCut.as_view()),
    *product,
]
