"""The poll's fast path (SPEC §7): the DTO's columns alone, in one query compiled once per request shape, the
same answer as the documented serializer and the same access rules as every other read of a job."""

import itertools
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from markets.exceptions import JobNotFound
from markets.generation.dto import JOB_DTO_FIELDS, GenerationJobSerializer, job_dto
from markets.generation.selectors import job_get_for_caller
from serenity.auth import Caller
from tests.markets.generation.conftest import CALLER_ORG, OTHER_ORG, REQUESTER, THIRD_ORG, make_job, needs_reauth_fields
from tests.markets.generation.test_generation_scoping import MATRIX, place_job


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {
            "status": "COMPLETED",
            "phase": "published",
            "result": {"promptCount": 50, "projectId": "p1", "published": True, "verdict": "ship", "extra": "hidden"},
        },
        needs_reauth_fields(),
        {"status": "FAILED", "error_code": "PROMPT_GENERATION_HELD", "error": {"code": "PROMPT_GENERATION_HELD"}},
    ],
    ids=["in progress", "completed", "needs reauth", "held"],
)
def test_the_hand_built_dto_is_the_documented_serializer_s_output(tenants, fields):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **fields)
    job.refresh_from_db()

    assert job_dto(job) == GenerationJobSerializer(job).data


def test_a_poll_reads_the_dto_columns_alone_in_one_query(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    api.poll(tenants.org.id, tenants.brand.id, job.id)  # the bearer's key set is fetched and cached

    with CaptureQueriesContext(connection) as queries:
        response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    (query,) = queries.captured_queries
    selected = query["sql"].split(" FROM ", 1)[0]
    assert all(f'"{name}"' in selected for name in JOB_DTO_FIELDS)
    assert not any(f'"{name}"' in selected for name in ("params", "checkpoints", "lease_token", "user_id"))


def test_the_etag_is_the_hash_of_the_bytes_served(tenants, api):
    import hashlib

    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response["ETag"] == '"' + hashlib.sha256(response.content).hexdigest()[:32] + '"'


CALLERS = {
    "member of the org": frozenset({CALLER_ORG}),
    "member of every org": frozenset({CALLER_ORG, OTHER_ORG, THIRD_ORG}),
    "member of another org only": frozenset({OTHER_ORG}),
    "member of no org": frozenset(),
}


@pytest.mark.parametrize(
    ("cell", "caller"),
    list(itertools.product(MATRIX, CALLERS)),
    ids=[" / ".join((*cell, who)) for cell, who in itertools.product(MATRIX, CALLERS)],
)
def test_the_prepared_query_decides_exactly_as_the_orm_query(tenants, cell, caller):
    org_case, brand_case, site_case, type_case, id_case = cell
    job = place_job(tenants, org_case, brand_case, site_case, type_case)
    job_id = job.id if id_case == "existing id" else uuid.uuid4()
    who = Caller(user_id=REQUESTER, org_ids=CALLERS[caller], bearer="unused")

    def read(fields):
        try:
            found = job_get_for_caller(
                caller=who,
                org_id=tenants.org.id,
                brand_id=tenants.brand.id,
                job_id=job_id,
                allowed_types=("generateSemrushMarket",),
                fields=fields,
            )
        except JobNotFound:
            return None
        return job_dto(found)

    assert read(JOB_DTO_FIELDS) == read(None)
