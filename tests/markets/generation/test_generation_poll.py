"""GET …/serenity/markets/generation/jobs/{jobId}: the token-safe DTO, Retry-After, ETag and 304."""

import json
import uuid

import pytest
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from markets.generation.jobtype import PROMPT_GENERATION_HELD
from markets.paths import ID_MESSAGES
from tests.markets.generation.conftest import SECRET, job_path, make_job, needs_reauth_fields


def iso(dt) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def test_an_in_progress_job_is_shown_without_result_or_error(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="queued")

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "jobId": str(job.id),
        "jobType": "generateSemrushMarket",
        "status": "IN_PROGRESS",
        "result": None,
        "error": None,
        "createdAt": iso(job.created_at),
        "updatedAt": iso(job.updated_at),
        "progress": {"phase": "queued", "step": 1, "steps": 6, "attempt": 0},
    }
    assert response["Cache-Control"] == "private, no-cache"


def test_a_completed_job_shows_only_the_allow_listed_result(tenants, api):
    job = make_job(
        org=tenants.org,
        brand=tenants.brand,
        site=tenants.site,
        status=JobStatus.COMPLETED,
        phase="published",
        result={"promptCount": 42, "projectId": "p-1", "published": True, "verdict": "ship", "internal": SECRET},
    )

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    assert response.json() == {
        "jobId": str(job.id),
        "jobType": "generateSemrushMarket",
        "status": "COMPLETED",
        "result": {"promptCount": 42, "projectId": "p-1", "published": True, "verdict": "ship"},
        "error": None,
        "createdAt": iso(job.created_at),
        "updatedAt": iso(job.updated_at),
        "progress": {"phase": "published", "step": 6, "steps": 6, "attempt": 0},
    }
    assert "Retry-After" not in response


def test_a_job_awaiting_reauthorisation_shows_needs_reauth_with_the_public_message(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, **needs_reauth_fields())

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    assert response.json() == {
        "jobId": str(job.id),
        "jobType": "generateSemrushMarket",
        "status": "FAILED",
        "result": None,
        "error": {
            "code": "NEEDS_REAUTH",
            "message": "Authorisation to write to Semrush has expired. Re-authorise to continue.",
            "retryable": False,
            "needsReauth": True,
        },
        "createdAt": iso(job.created_at),
        "updatedAt": iso(job.updated_at),
        "progress": {"phase": "generated", "step": 3, "steps": 6, "attempt": 0},
    }
    assert "Retry-After" not in response


def test_a_held_job_shows_its_code_with_the_public_message_not_the_internal_one(tenants, api):
    job = make_job(
        org=tenants.org,
        brand=tenants.brand,
        site=tenants.site,
        status=JobStatus.FAILED,
        error_code=PROMPT_GENERATION_HELD,
        error={
            "code": PROMPT_GENERATION_HELD,
            "message": f"held: language gate {SECRET}",
            "retryable": False,
            "needsReauth": False,
        },
    )

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.json()["error"] == {
        "code": "PROMPT_GENERATION_HELD",
        "message": "The generated prompts did not pass the quality checks and were held back.",
        "retryable": False,
        "needsReauth": False,
    }


def test_an_error_code_without_its_own_sentence_gets_the_generic_public_message(tenants, api):
    job = make_job(
        org=tenants.org,
        brand=tenants.brand,
        site=tenants.site,
        status=JobStatus.FAILED,
        error_code="CUSTOM_OPERATOR_CODE",
        error={
            "code": "CUSTOM_OPERATOR_CODE",
            "message": f"exchange refused: {SECRET}",
            "retryable": True,
            "needsReauth": False,
        },
    )

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.json()["error"] == {
        "code": "CUSTOM_OPERATOR_CODE",
        "message": "Prompt generation failed.",
        "retryable": True,
        "needsReauth": False,
    }


@pytest.mark.parametrize(
    ("phase", "seconds"),
    [
        ("queued", "10"),
        ("generating", "15"),
        ("generated", "5"),
        ("writing", "3"),
        ("written", "2"),
    ],
)
def test_retry_after_is_longer_while_generating_than_while_writing(tenants, api, phase, seconds):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase=phase)

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    assert response["Retry-After"] == seconds


@pytest.mark.parametrize("status", [JobStatus.IN_PROGRESS, JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED])
def test_every_poll_answer_carries_a_quoted_etag(tenants, api, status):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, status=status)

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200
    assert response["ETag"].startswith('"') and response["ETag"].endswith('"') and len(response["ETag"]) == 34


def test_if_none_match_with_the_current_etag_answers_304_without_a_body(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]

    response = api.poll(tenants.org.id, tenants.brand.id, job.id, **{"If-None-Match": etag})

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == etag
    assert response["Retry-After"] == "15"


@pytest.mark.parametrize("header", ['"other", {etag}', "W/{etag}", "*"])
def test_if_none_match_uses_weak_comparison_over_a_list(tenants, api, header):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]

    response = api.poll(tenants.org.id, tenants.brand.id, job.id, **{"If-None-Match": header.format(etag=etag)})

    assert response.status_code == 304


def test_a_changed_job_answers_200_with_a_new_etag_despite_the_old_one(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    old = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    AsyncJob.objects.filter(id=job.id).update(phase="writing", updated_at=timezone.now())

    response = api.poll(tenants.org.id, tenants.brand.id, job.id, **{"If-None-Match": old})

    assert response.status_code == 200
    assert response["ETag"] != old
    assert response["Retry-After"] == "3"


def test_a_poll_costs_one_sql_query(tenants, api, django_assert_max_num_queries):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    api.poll(tenants.org.id, tenants.brand.id, job.id)  # the bearer's key set is fetched and cached

    with django_assert_max_num_queries(1):
        response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.status_code == 200


@pytest.mark.parametrize("which", ["orgId", "brandId", "jobId"])
def test_a_non_uuid_id_answers_400(tenants, api, which):
    ids = {"orgId": tenants.org.id, "brandId": tenants.brand.id, "jobId": uuid.uuid4()}
    ids[which] = "not-a-uuid"

    response = api.poll(ids["orgId"], ids["brandId"], ids["jobId"])

    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    message = ID_MESSAGES[which]
    assert response.json() == {
        "type": "https://errors.serenity.example/invalid",
        "title": "Invalid request",
        "status": 400,
        "detail": message,
        "code": "invalid",
        "error": "invalidRequest",
        "message": message,
        "errors": [{"parameter": which, "code": "invalid_uuid", "message": message}],
    }


def test_a_poll_without_a_bearer_answers_401(tenants, client):
    response = client.get(job_path(tenants.org.id, tenants.brand.id, uuid.uuid4()))

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["code"] == "not_authenticated"


def test_every_error_code_the_product_sets_has_its_own_public_sentence():
    from jobs import codes as job_codes
    from markets.generation import jobtype

    product_codes = {v for k, v in vars(jobtype).items() if k.isupper() and isinstance(v, str) and k == v}
    product_codes |= {v for k, v in vars(job_codes).items() if k.isupper() and isinstance(v, str) and k == v}
    retryable_only = {
        jobtype.DRS_TRANSIENT,
        jobtype.PROMPT_GENERATION_GATE_RETRYABLE,
        jobtype.IMS_UNAVAILABLE,
        jobtype.SEMRUSH_UNAVAILABLE,
        jobtype.SEMRUSH_PROJECT_MISSING,
        jobtype.SEMRUSH_PUBLISH_FAILED,
        jobtype.DRS_THROTTLED,  # back-pressure: in the history only, never a job's final code
        jobtype.SEMRUSH_THROTTLED,
        jobtype.IMS_THROTTLED,
    }

    assert product_codes - retryable_only - set(jobtype.PUBLIC_MESSAGES) == set()


def test_progress_shows_the_phase_its_place_and_the_deliveries_so_far(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="writing", attempts=2)

    response = api.poll(tenants.org.id, tenants.brand.id, job.id)

    assert response.json()["progress"] == {"phase": "writing", "step": 4, "steps": 6, "attempt": 2}


def test_a_new_phase_changes_the_etag(tenants, api):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    before = api.poll(tenants.org.id, tenants.brand.id, job.id)
    AsyncJob.objects.filter(id=job.id).update(phase="generated")

    after = api.poll(tenants.org.id, tenants.brand.id, job.id, **{"If-None-Match": before["ETag"]})

    assert after.status_code == 200
    assert after.json()["progress"]["phase"] == "generated"
    assert after["ETag"] != before["ETag"]
