"""Reads shared by the APIs, the admin and the runbooks, always scoped to the caller."""
from markets.models import Brand, Organization
from serenity.auth import Caller
from serenity.problems import Forbidden, NotFound


class OrganizationNotFound(NotFound):
    code, title = "organization_not_found", "Organization not found"


class BrandNotFound(NotFound):
    code, title = "brand_not_found", "Brand not found"


class NoOrganizationAccess(Forbidden):
    code, title = "organization_access_denied", "No access to this organization"


def org_get_for_caller(caller: Caller, org_id) -> Organization:
    """The organization, when the caller's token lists it. Missing -> 404; not a member -> 403."""
    org = Organization.objects.filter(id=org_id).first()
    if org is None:
        raise OrganizationNotFound()
    if not caller.can_access_org(org.ims_org_id):
        raise NoOrganizationAccess()
    return org


def brand_get_for_caller(caller: Caller, org_id, brand_id) -> Brand:
    """The brand of an organization the caller belongs to. Missing or of another org -> 404."""
    org = org_get_for_caller(caller, org_id)
    brand = Brand.objects.select_related("organization", "base_site").filter(id=brand_id, organization=org).first()
    if brand is None:
        raise BrandNotFound()
    return brand
