"""Routes of the local drs simulator."""

from django.urls import path

from sandbox.drs import views

urlpatterns = [
    path("invoke", views.invoke, name="sandbox-drs-invoke"),
    path("_control", views.control, name="sandbox-drs-control"),
    path("_calls", views.calls, name="sandbox-drs-calls"),
]
