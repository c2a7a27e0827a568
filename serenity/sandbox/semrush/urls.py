"""Routes of the local semrush simulator."""
urlpatterns = []
