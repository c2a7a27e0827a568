"""Routes of the local drs simulator."""
urlpatterns = []
