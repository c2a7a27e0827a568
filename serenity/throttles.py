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


class OnboardingRateThrottle(CallerRateThrottle):
    """Entry-point calls per user: each may create brands and markets in Semrush and mint tokens."""

    scope = "onboarding"


class OrgMarketsRateThrottle(SimpleRateThrottle):
    """Markets requested per organization (the `orgId` of the path), counted one per market of the body:
    an activation of 50 markets counts 50. Protects Semrush and DRS from one tenant's bulk onboarding."""

    scope = "org_markets"

    def get_rate(self):
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request, view):
        org_id = view.kwargs.get("orgId")
        if not org_id:
            return None
        return self.cache_format % {"scope": self.scope, "ident": str(org_id)[:64]}

    @staticmethod
    def markets_requested(request) -> int:
        """How many markets the body asks for (0 when it asks for none, or is not what we expect: the
        serializer answers that with a 400)."""
        data = request.data if isinstance(request.data, dict) else {}
        if isinstance(data.get("markets"), list):
            return len(data["markets"])
        return 1 if ("market" in data or "semrushMarket" in data) else 0

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        weight = self.markets_requested(request)
        if self.key is None or weight == 0:
            return True
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) + weight > self.num_requests:
            return self.throttle_failure()
        self.history[:0] = [self.now] * weight
        self.cache.set(self.key, self.history, self.duration)
        return True
