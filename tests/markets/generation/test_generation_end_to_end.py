"""End to end through the public API and a real worker on the local SQS: a job that loses its credential
is re-authorised by its requester and the same job id runs to COMPLETED."""

import time

import pytest
from django.test import Client

from markets.models import Market
from sandbox.semrush import state as semrush
from tests.markets.generation.conftest import CALLER_ORG, REQUESTER, Api, make_brand, make_org


def poll_until(api: Api, org_id, brand_id, job_id, *, status: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        body = api.poll(org_id, brand_id, job_id).json()
        if body["status"] == status or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


@pytest.mark.worker
def test_a_job_needing_reauth_completes_under_the_same_id_after_the_requester_reauthorises(
    sims, bearer, ims, celery_worker, settings
):
    from sandbox.ims import controls

    settings.SERENITY_ASYNC_PROMPT_GEN = "true"
    token = bearer(user_id=REQUESTER, org_ids=[CALLER_ORG])
    org = make_org(CALLER_ORG)
    brand = make_brand(org, "Nordlicht", workspace_token=token)
    api = Api(token)
    controls.fail_next_exchanges(1, 401)  # the worker's first exchange is refused: NEEDS_REAUTH

    created = Client().post(
        f"/v2/orgs/{org.id}/brands/{brand.id}/serenity/markets",
        {
            "market": "FR",
            "languageCode": "fr",
            "generatePrompts": True,
            "brandDomain": brand.domain,
            "brandNames": [brand.name],
        },
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "x-promise-audience": "semrush"},
    )
    assert created.status_code == 201, created.content
    job_id = created.json()["promptGeneration"]["jobId"]

    failed = poll_until(api, org.id, brand.id, job_id, status="FAILED")
    assert failed["error"] == {
        "code": "NEEDS_REAUTH",
        "message": "Authorisation to write to Semrush has expired. Re-authorise to continue.",
        "retryable": False,
        "needsReauth": True,
    }

    accepted = api.reauth(org.id, brand.id, job_id)
    assert accepted.status_code == 202
    assert accepted.json() == {"jobId": job_id, "jobType": "generateSemrushMarket", "status": "IN_PROGRESS"}

    done = poll_until(api, org.id, brand.id, job_id, status="COMPLETED")
    market = Market.objects.get(brand=brand, country="FR", language_code="fr")
    assert done["jobId"] == job_id
    assert done["error"] is None
    assert done["result"] == {
        "promptCount": done["result"]["promptCount"],
        "projectId": market.semrush_project_id,
        "published": True,
        "verdict": "ship",
    }
    assert done["result"]["promptCount"] > 0
    assert len(semrush.prompts(market.semrush_project_id)) >= done["result"]["promptCount"]
    # One mint at creation, one at re-authorisation; the refused exchange, then a good one.
    assert ims.count("minted") == 2
    assert ims.count("exchanged") == 1
