"""Reads shared by the APIs, the admin and the runbooks, always scoped to the caller."""
from django.db.models import Exists, OuterRef, Q

from jobs.models import AsyncJob
from markets.models import Brand, Organization, Site
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


class JobNotFound(NotFound):
    code, title = "job_not_found", "Job not found"


def job_get_for_caller(*, caller: Caller, org_id, brand_id, job_id, allowed_types) -> AsyncJob:
    """The job, when every rule of job access holds; otherwise JobNotFound, always with the same body.

    The job must exist, be of one of `allowed_types`, belong to `brand_id` of `org_id`; that brand must
    belong to that org, the caller's token must list the org, and where the job names a site, the site
    must exist in an organization the caller may access. A job without a site (its brand had no base site
    when the job was made) is decided by org + brand ownership alone. A site that no longer exists denies.

    Every denial raises the same JobNotFound (no ids, no reason), so cross-tenant access cannot be told
    from absence. One SQL query: the rules are EXISTS clauses on the job's own row.
    """
    member_orgs = Organization.objects.filter(ims_org_id__in=sorted(caller.org_ids))
    job = (
        AsyncJob.objects.filter(id=job_id, organization_id=org_id, brand_id=brand_id, job_type__in=list(allowed_types))
        .filter(
            Exists(member_orgs.filter(id=OuterRef("organization_id"))),
            Exists(Brand.objects.filter(id=OuterRef("brand_id"), organization_id=OuterRef("organization_id"))),
        )
        .filter(
            Q(site_id__isnull=True)
            | Exists(Site.objects.filter(id=OuterRef("site_id"), organization__in=member_orgs))
        )
        .first()
    )
    if job is None:
        raise JobNotFound()
    return job
