"""Token errors the rest of the product decides on."""

from serenity.clients.http import ReauthRequired
from serenity.problems import DomainError, UpstreamUnavailable


class NeedsReauth(ReauthRequired):
    """IMS refused the promise token (401/403 on exchange): the user must re-authorise the job."""


class PromisePairRequired(DomainError):
    status, code, title = 400, "PROMISE_PAIR_REQUIRED", "The Semrush client pair is required"


class InvalidAudience(DomainError):
    status, code, title = 400, "invalid_promise_audience", "Unknown x-promise-audience"


class InvalidForwardedToken(DomainError):
    status, code, title = 400, "invalid_promise_token", "x-promise-token is not a usable promise token"


class CredentialUnavailable(UpstreamUnavailable):
    code, title = "credential_unavailable", "IMS did not issue a credential"
