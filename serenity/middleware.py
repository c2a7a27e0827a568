"""Request id middleware: accept a sane X-Request-Id or mint one, expose it on the response and in logs."""
import re
import uuid

from serenity import context

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{8,64}$")


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-Id", "")
        rid = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = rid
        token = context.request_id.set(rid)
        try:
            response = self.get_response(request)
        finally:
            context.request_id.reset(token)
        response["X-Request-Id"] = rid
        return response
