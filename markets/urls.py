"""Routes of the product API under /v2/. Dynamic parameters are classified in serenity/routes.py."""
urlpatterns = []
