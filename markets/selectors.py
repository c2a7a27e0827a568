"""The organization and brand a request names, read for its caller: shared by every route of the API. Jobs are read
through markets/generation/selectors.py."""

from markets.exceptions import (
    BrandNotFound,
    NoOrganizationAccess,
    OrganizationNotFound,
    SerenityInactiveForBrand,
)
from markets.models import Brand, Organization
from serenity.auth import Caller


def org_get_for_caller(caller: Caller, org_id, *, write: bool = True) -> Organization:
    """The organization, when the caller may act on it (its token lists it, or it is an admin), or only read it
    (`write` False: a read-only admin may too). Missing -> 404; not a member -> 403 (the entry points' answers, as
    the original's)."""
    org = Organization.objects.filter(id=org_id).first()
    if org is None:
        raise OrganizationNotFound(f"Organization not found: {org_id}")
    if not caller.can_access_org(org.ims_org_id, write=write):
        raise NoOrganizationAccess()
    return org


def brand_get_for_caller(caller: Caller, org_id, brand_id, *, write: bool = True) -> Brand:
    """The brand of an organization the caller may act on (or only read, `write` False). Missing or of another
    org -> 404."""
    org = org_get_for_caller(caller, org_id, write=write)
    brand = Brand.objects.select_related("organization", "base_site").filter(id=brand_id, organization=org).first()
    if brand is None:
        raise BrandNotFound(f"Brand not found for organization: {brand_id}")
    return brand


def serenity_brand_get_for_caller(caller: Caller, org_id, brand_id, *, write: bool = True) -> Brand:
    """brand_get_for_caller for the Serenity routes of a brand: also 404 when Serenity is not active for it
    (as the original answers; its UI reads that 404 as "no Serenity here")."""
    brand = brand_get_for_caller(caller, org_id, brand_id, write=write)
    if not brand.organization.is_serenity_active:
        raise SerenityInactiveForBrand()
    return brand
