"""Routes of the local ims simulator."""
urlpatterns = []
