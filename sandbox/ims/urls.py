"""Routes of the local IMS simulator, mounted at /sandbox/ims/ (IMS's own paths live under ims/)."""

from django.urls import path

from sandbox.ims import views

app_name = "sandbox_ims"

urlpatterns = [
    path("ims/keys", views.jwks, name="jwks"),
    path("ims/token/v4", views.token, name="token"),
    path("ims/validate_token/v1", views.validate, name="validate"),
    path("ims/invalidate_token/v2", views.invalidate, name="invalidate"),
    path("_users/token", views.user_token, name="user-token"),
    path("_control", views.control, name="control"),
    path("_ledger", views.ledger_view, name="ledger"),
]
