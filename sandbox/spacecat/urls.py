"""Route of the local sign-in simulator, mounted at /sandbox/spacecat/."""

from django.urls import path

from sandbox.spacecat import views

app_name = "sandbox_spacecat"

urlpatterns = [path("auth/login", views.login, name="login")]
