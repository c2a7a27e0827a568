"""Reads of generation jobs. A job by its id is always read scoped to the caller: the one rule of job access
(SPEC §7), shared by the poll and re-authorisation; any job the caller may not see reads exactly like one that
does not exist. A market's job is read by its deterministic id (`market_generation_job`), for a brand the caller
was already scoped to (an entry point's 409)."""

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.db.models.fields.json import KT

from jobs.models import AsyncJob
from markets.exceptions import JobNotFound
from markets.generation.jobtype import MARKET_GENERATION_JOB_TYPE, generation_job_id
from markets.models import Brand, Market, Organization, Site
from serenity.auth import Caller


def _scoped_jobs(*, org_ids, org_id, brand_id, job_id, allowed_types):
    """The jobs matching every rule of job access (see job_get_for_caller): one query, the rules EXISTS
    clauses on the job's own row. `org_ids` None: a caller who reads every organization (an admin)."""
    member_orgs = Organization.objects.all() if org_ids is None else Organization.objects.filter(ims_org_id__in=org_ids)
    return (
        AsyncJob.objects.filter(id=job_id, organization_id=org_id, brand_id=brand_id, job_type__in=allowed_types)
        .filter(
            Exists(member_orgs.filter(id=OuterRef("organization_id"))),
            Exists(Brand.objects.filter(id=OuterRef("brand_id"), organization_id=OuterRef("organization_id"))),
        )
        .filter(
            Q(site_id__isnull=True) | Exists(Site.objects.filter(id=OuterRef("site_id"), organization__in=member_orgs))
        )
    )


def job_get_for_caller(*, caller: Caller, org_id, brand_id, job_id, allowed_types, fields=None) -> AsyncJob:
    """The job, when every rule of job access holds; otherwise JobNotFound, always with the same body.

    The job must exist, be of one of `allowed_types`, belong to `brand_id` of `org_id`; that brand must
    belong to that org, the caller's token must list the org, and where the job names a site, the site
    must exist in an organization the caller may access. A job without a site (its brand had no base site
    when the job was made) is decided by org + brand ownership alone. A site that no longer exists denies. An
    admin's session token reaches every organization (the other rules still hold).

    Every denial raises the same JobNotFound (no ids, no reason), so cross-tenant access cannot be told
    from absence. One SQL query. With `fields`, only those columns are read (the others are deferred), and
    the query is the one compiled for this shape of request, reused (see PreparedScopedQuery).
    """
    org_ids, types = sorted(caller.org_ids), sorted(allowed_types)
    if caller.reads_every_org:
        jobs = _scoped_jobs(org_ids=None, org_id=org_id, brand_id=brand_id, job_id=job_id, allowed_types=types)
        job = (jobs.only(*fields) if fields else jobs).first()
    elif fields is None:
        job = _scoped_jobs(
            org_ids=org_ids, org_id=org_id, brand_id=brand_id, job_id=job_id, allowed_types=types
        ).first()
    elif not org_ids:
        job = None  # a caller of no organization sees no job
    else:
        job = _prepared(len(org_ids), len(types), tuple(fields)).get(
            org_ids=org_ids, org_id=org_id, brand_id=brand_id, job_id=job_id, allowed_types=types
        )
    if job is None:
        raise JobNotFound()
    return job


class PreparedScopedQuery:
    """`_scoped_jobs(...).only(*fields)` compiled once, then run with each request's values.

    Building and compiling that ORM expression costs several times the query itself, on the hottest path of
    the product (the UI polls every job every few seconds). The SQL depends only on the request's shape (how
    many organizations the caller has, how many job types are allowed, which columns), so it is compiled
    once per shape with marker values, and each request substitutes its own values for the markers. The
    rules stay written once, in the ORM, and the SQL is Django's own for the database in use.
    """

    def __init__(self, org_count: int, type_count: int, fields: tuple[str, ...]):
        markers = {
            "job_id": uuid.UUID(int=1),
            "org_id": uuid.UUID(int=2),
            "brand_id": uuid.UUID(int=3),
            "org_ids": [f"\x00org{i}" for i in range(org_count)],
            "allowed_types": [f"\x00type{i}" for i in range(type_count)],
        }
        queryset = _scoped_jobs(**markers).only(*fields)
        compiler = queryset.query.get_compiler(using=queryset.db)
        self.sql, compiled = compiler.as_sql()
        self.slots = [self._slot(value, markers) for value in compiled]
        # How a row comes back as a model instance: the selected columns' names and their converters (what
        # the ORM applies to any row: JSON decoding, SQLite's dates), taken from the same compiler.
        columns = [col for col, _sql, _alias in compiler.select]
        self.attnames = [col.target.attname for col in columns]
        self.converters = list(compiler.get_converters(columns).items())
        self.db = queryset.db

    @staticmethod
    def _slot(value, markers) -> tuple[str | None, object]:
        """What a compiled parameter stands for: (a request value's name, its index in a list or None), or
        (None, the value) for a constant of the query itself (the `1` of an EXISTS subquery)."""
        for name, marker in markers.items():
            if isinstance(marker, list) and value in marker:
                return name, marker.index(value)
            if not isinstance(marker, list) and value in (marker, marker.hex, str(marker)):
                return name, None
        return None, value

    def get(self, **values) -> AsyncJob | None:
        uuid_field = AsyncJob._meta.get_field("id")
        params: list[Any] = []
        for name, index in self.slots:
            if name is None:
                params.append(index)  # a constant
            elif index is None:
                params.append(uuid_field.get_db_prep_value(values[name], connection))
            else:
                params.append(values[name][index])
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        row = list(row)
        for index, (converters, expression) in self.converters:
            for convert in converters:
                row[index] = convert(row[index], expression, connection)
        return AsyncJob.from_db(self.db, self.attnames, row)


_prepared_queries: dict[tuple, PreparedScopedQuery] = {}


def _prepared(org_count: int, type_count: int, fields: tuple[str, ...]) -> PreparedScopedQuery:
    key = (connection.vendor, org_count, type_count, fields)
    query = _prepared_queries.get(key)
    if query is None:
        query = _prepared_queries[key] = PreparedScopedQuery(org_count, type_count, fields)
    return query


def market_generation_job(*, brand: Brand, market: Market) -> dict | None:
    """The market's generation job as `{jobId, status}`, or None when it has none. `brand` is the caller's,
    already scoped (the 409 of an entry point shows it, so the UI can poll the job or offer a regeneration).

    The job under the slice's deterministic id is this market's only when it names the market: one an earlier
    market of the same slice left behind (that market deleted, the slice created again without a generation) is
    not, as in `markets_generation_jobs`."""
    job_id = generation_job_id(brand.id, market.geo_target_id, market.language_code)
    status = (
        AsyncJob.objects.filter(id=job_id, params__marketId=str(market.id)).values_list("status", flat=True).first()
    )
    if status is None:
        return None
    return {"jobId": str(job_id), "status": status}


# --- The generation of every market of a page (listMarkets, getMarket): the batch form of the market's job -------


def markets_generation_jobs(*, caller: Caller, brand: Brand, markets: Sequence[Market]) -> dict[uuid.UUID, AsyncJob]:
    """The latest generation job of each of `markets` (markets of `brand`, a brand the caller was scoped to), as
    `{market id: job}`; a market without one is absent. One query for the whole page, whatever its size.

    A market's job is the one under its slice's deterministic id (markets/generation/jobtype.py) that names the
    market in its parameters: a job an earlier market of the same slice left behind (that market deleted, the slice
    created again) is not this market's. The rules of job access hold as for the poll (`job_get_for_caller`): the
    job is of the generation type, belongs to the brand and its organization, the caller's token lists that
    organization (or reaches every one), and a job naming a site names one of an organization the caller may
    access. Only the columns the token-safe projection reads are loaded (never the parameters, which hold the
    seeds, or the checkpoints, which hold the batch)."""
    ids = {generation_job_id(brand.id, m.geo_target_id, m.language_code): m.id for m in markets}
    if not ids:
        return {}
    member_orgs = (
        Organization.objects.all()
        if caller.reads_every_org
        else Organization.objects.filter(ims_org_id__in=sorted(caller.org_ids))
    )
    jobs = (
        AsyncJob.objects.filter(
            id__in=list(ids),
            organization_id=brand.organization_id,
            brand_id=brand.id,
            job_type=MARKET_GENERATION_JOB_TYPE,
        )
        .filter(Exists(member_orgs.filter(id=OuterRef("organization_id"))))
        .filter(
            Q(site_id__isnull=True) | Exists(Site.objects.filter(id=OuterRef("site_id"), organization__in=member_orgs))
        )
        .only("id", "status", "error", "error_code")
        .annotate(market_id=KT("params__marketId"))
    )
    return {ids[job.id]: job for job in jobs if job.market_id == str(ids[job.id])}


def markets_not_enqueued() -> list:
    """Markets whose generation an entry point asked for and could not enqueue (`Market.generation_not_enqueued`,
    cleared once a job is enqueued for them), oldest first: the doctor's `not_enqueued`. A published market with no
    prompts, which nothing re-sends: there is no job, and an operator holds neither the user's credential nor fresh
    seeds, so the one recovery is the user's regeneration."""
    from jobs.handlers import Stranded

    out = []
    for market in (
        Market.objects.filter(generation_not_enqueued__isnull=False)
        .select_related("brand")
        .order_by("generation_not_enqueued_at", "id")[:1000]
    ):
        when = (
            market.generation_not_enqueued_at.strftime("%Y-%m-%dT%H:%M:%SZ")
            if market.generation_not_enqueued_at
            else "?"
        )
        out.append(
            Stranded(
                subject=f"market {market.id}",
                detail=(
                    f"{market.country}/{market.language_code} of brand {market.brand_id}: its prompt generation could "
                    f"not be enqueued ({market.generation_not_enqueued} at {when}); published with no generated "
                    "prompts, and no job exists to re-send"
                ),
                action=(
                    "none automatic: the market's user regenerates it (the UI's regenerate: POST "
                    f"/v2/orgs/{market.brand.organization_id}/brands/{market.brand_id}/serenity/markets/"
                    f"{market.id}/generation), which obtains a fresh credential and seeds; job_regenerate cannot "
                    "(no job, no credential)"
                ),
            )
        )
    return out
