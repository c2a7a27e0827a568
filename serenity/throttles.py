"""Request throttles (DRF), counted in the shared cache so a limit holds across every API process.

Callers are keyed by their IMS `user_id` (the stable claim), hashed so the cache never holds it in clear.
Rates are settings (THROTTLE_*_RATE); a throttled request answers 429 problem+json with `Retry-After`.
"""
import hashlib

from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class CallerRateThrottle(SimpleRateThrottle):
    """One bucket per authenticated caller and scope."""

    def get_rate(self):
        # Read at each request (DRF binds the rates at import), so a changed setting takes effect.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view):
        user_id = getattr(request.user, "user_id", None)
        if not user_id:
            return None  # unauthenticated: the permission check answers 401 first anyway
        ident = hashlib.sha256(user_id.encode()).hexdigest()[:32]
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ReauthRateThrottle(CallerRateThrottle):
    """Re-authorisations per user: each one that wins a claim mints a promise token at IMS."""

    scope = "reauth"
