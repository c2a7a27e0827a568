"""Errors of the markets app that the API answers deliberately (problem details, SPEC §3): each declares its
status, code and title; serenity/problems.py maps the code to the original service's `error` token."""

from serenity.clients.http import ReauthRequired
from serenity.problems import Conflict, DomainError, Forbidden, InvalidInput, NotFound

# --- The caller's scope ---------------------------------------------------------------------------------------


class OrganizationNotFound(NotFound):
    code, title = "organization_not_found", "Organization not found"


class NoOrganizationAccess(Forbidden):
    code, title = "organization_access_denied", "User does not have access to this organization"


class BrandNotFound(NotFound):
    code, title = "brand_not_found", "Brand not found"


class SerenityInactiveForOrg(Forbidden):
    """Semrush work asked of an organization without Serenity (createBrand with a market or generation)."""

    code, title = "serenity_not_active", "Serenity is not active for this organization"


class SerenityInactiveForBrand(NotFound):
    """The Serenity routes of a brand whose organization has no Serenity: answered like absence, as the
    original does (its UI treats the 404 as "no Serenity here")."""

    code, title = "serenity_not_active_for_brand", "Serenity is not active for this brand"


class JobNotFound(NotFound):
    code, title = "job_not_found", "Job not found"


class SiteNotFound(NotFound):
    code, title = "site_not_found", "Site not found"


class MarketNotFound(NotFound):
    code, title = "market_not_found", "Market not found"


class MarketSliceNotFound(NotFound):
    """A slice (`…/markets/{geoTargetId}/{languageCode}`) of the caller's brand that has no market, as the original
    answers it (its `marketNotFound`)."""

    code, title = "market_slice_not_found", "No market for this brand and (geoTargetId, languageCode) slice"


# --- Requests ---------------------------------------------------------------------------------------------


class InvalidRequest(InvalidInput):
    """A body that breaks the original's rules: `detail` joins every failed rule's sentence, `errors` names
    each field (a JSON pointer)."""

    def __init__(self, errors: list[dict]):
        super().__init__("; ".join(e["message"] for e in errors), errors=errors)


class UnknownMarket(DomainError):
    status, code, title = 400, "unknown_market", "Unknown market"


class UnknownLanguage(DomainError):
    status, code, title = 400, "unknown_language", "Unknown language"


# --- State ------------------------------------------------------------------------------------------------


class BrandExists(Conflict):
    code, title = "brand_exists", "This site is already the primary URL for another brand"


class BrandDemotionRefused(Conflict):
    code, title = "brand_status_demotion_not_allowed", "An active brand cannot be made pending again"


class BrandNotActive(Conflict):
    code, title = "brand_not_active", "The brand has no Semrush workspace yet; activate it first"


class MarketExists(Conflict):
    code, title = "market_exists", "Brand already has a live market for this slice"


class GenerationDisabled(Conflict):
    code, title = "prompt_generation_disabled", "Asynchronous prompt generation is not enabled"


class NoCatalogueSeeds(Conflict):
    code, title = "no_catalogue_seeds", "The Semrush catalogue holds no seeds for this market"


# --- Others' trouble --------------------------------------------------------------------------------------


class SemrushUnavailable(DomainError):
    status, code, title = 502, "semrush_unavailable", "Upstream request failed"


class SemrushRefused(DomainError):
    """Semrush refused the credential the request acted with (its 401): the caller must authenticate again, as
    the original answers it. The sentence names nothing upstream."""

    status, code, title = 401, "semrush_authentication_failed", "Upstream authorization failed"


class SemrushForbidden(SemrushRefused):
    """Semrush would not let the request's credential do this (its 403), as the original answers it."""

    status, code, title = 403, "semrush_forbidden", "Upstream authorization failed"


def semrush_failed(exc: Exception, detail: str) -> DomainError:
    """What a Semrush failure inside a request is answered with: a refused credential as Semrush said it (401 or
    403, as the original), anything else a 502 saying `detail`."""
    if isinstance(exc, ReauthRequired):
        return SemrushForbidden() if exc.status == 403 else SemrushRefused()
    return SemrushUnavailable(detail)


class NotAttempted(DomainError):
    status, code, title = 503, "not_attempted", "Not attempted within the request's time budget"


class GenerationUnavailable(DomainError):
    status, code, title = 503, "prompt_generation_unavailable", "Prompt generation is not available right now"


class DeleteNotFinished(DomainError):
    """A market's delete that could not finish within the request's time budget (another delete of it still under
    way, or a prompt generation write to it still in flight): nothing was deleted, send it again."""

    status, code, title = 503, "delete_not_finished", "The market's delete could not finish in time; send it again"
