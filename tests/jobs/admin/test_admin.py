"""The jobs admin: the list with each filter and search, the read-only detail, the actions (the same
services as the runbooks), and no token anywhere in its HTML."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from jobs.models import AsyncJob, JobEvent
from tests.jobs.conftest import KNOWN_TOKEN, ago, leased, snapshot, store_grant, to_dlq, waiting
from tokens.models import PromiseGrant

pytestmark = pytest.mark.django_db

LIST = reverse("admin:jobs_asyncjob_changelist")
BRAND = uuid.uuid4()
JWT_SHAPED = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEifQ.c2lnbmF0dXJlLXZhbHVl"


def detail(job):
    return reverse("admin:jobs_asyncjob_change", args=[job.id])


@pytest.fixture
def zoo():
    """Four jobs that each filter tells apart."""
    return {
        "running": leased(
            expires_in=timedelta(minutes=10),
            created_at=ago(minutes=5),
            brand_id=BRAND,
            params={"market": "FR", "languageCode": "fr", "brand": "Acme"},
        ),
        "abandoned": leased(expires_in=-timedelta(minutes=10), created_at=ago(hours=2)),
        "reauth": waiting(
            status="FAILED", error_code="NEEDS_REAUTH", job_type="otherType", attempts=3, created_at=ago(days=2)
        ),
        "done": waiting(
            status="COMPLETED",
            created_at=ago(minutes=30),
            params={"market": "DE", "languageCode": "de", "brand": "Beta"},
        ),
    }


def listed(client, query: dict) -> set:
    response = client.get(LIST, query)
    assert response.status_code == 200, response.status_code
    return {job.id for job in response.context["cl"].result_list}


def names(zoo, *keys) -> set:
    return {zoo[k].id for k in keys}


def test_job_list_shows_status_type_code_attempts_lease_age_brand_and_market(admin_client, zoo):
    response = admin_client.get(LIST)

    assert response.status_code == 200
    cl = response.context["cl"]
    assert cl.list_display == [
        "action_checkbox",
        "id",
        "job_type",
        "status",
        "error_code",
        "attempts",
        "lease",
        "last_activity",
        "message_sent",
        "dlq",
        "age",
        "brand",
        "market",
    ]
    assert {job.id for job in cl.result_list} == names(zoo, "running", "abandoned", "reauth", "done")
    html = response.content.decode()
    assert '<td class="field-lease">held</td>' in html
    assert '<td class="field-lease">expired</td>' in html
    assert '<td class="field-brand">Acme</td>' in html
    assert '<td class="field-market">FR/fr</td>' in html
    assert '<td class="field-age">2h ago</td>' in html
    assert '<td class="field-last_activity">3h ago</td>' in html
    assert '<td class="field-message_sent">3h ago</td>' in html


def test_job_list_shows_which_jobs_have_a_message_in_the_dlq_and_filters_those_needing_attention(
    admin_client, queues, settings
):
    settings.JOB_HEARTBEAT_SECONDS = 10
    busy = leased(expires_in=timedelta(minutes=5), quiet=timedelta(seconds=5))
    silent = leased(expires_in=timedelta(minutes=5), quiet=timedelta(seconds=31))
    stuck = waiting(quiet=timedelta(seconds=settings.JOB_STUCK_AFTER_SECONDS + 5))
    fresh = waiting(quiet=timedelta(seconds=60))
    dead_lettered = waiting(quiet=timedelta(seconds=60))
    to_dlq(dead_lettered.id)

    response = admin_client.get(LIST)
    html = response.content.decode()
    assert html.count('<td class="field-dlq">in DLQ</td>') == 1
    assert html.count('<td class="field-dlq">-</td>') == 4
    assert listed(admin_client, {"attention": "stuck"}) == {stuck.id}
    assert listed(admin_client, {"attention": "dead"}) == {silent.id}
    assert listed(admin_client, {"attention": "dlq"}) == {dead_lettered.id}
    assert listed(admin_client, {"attention": "any"}) == {stuck.id, silent.id, dead_lettered.id}
    assert busy.id not in listed(admin_client, {"attention": "any"}) and fresh.id in listed(admin_client, {})


def test_the_dlq_column_says_unknown_when_the_dlq_cannot_be_read(admin_client, zoo, settings):
    settings.MARKET_JOBS_DLQ_URL = settings.MARKET_JOBS_DLQ_URL + "-missing"

    response = admin_client.get(LIST)

    assert response.status_code == 200
    assert response.content.decode().count('<td class="field-dlq">unknown</td>') == 4


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"status__exact": "FAILED"}, {"reauth"}),
        ({"status__exact": "IN_PROGRESS"}, {"running", "abandoned"}),
        ({"job_type": "otherType"}, {"reauth"}),
        ({"error_code": "NEEDS_REAUTH"}, {"reauth"}),
        ({"attempts": "3"}, {"reauth"}),
        ({"lease": "held"}, {"running"}),
        ({"lease": "expired"}, {"abandoned"}),
        ({"lease": "none"}, {"reauth", "done"}),
        ({"age": "lt15m"}, {"running"}),
        ({"age": "15m-1h"}, {"done"}),
        ({"age": "1h-1d"}, {"abandoned"}),
        ({"age": "gt1d"}, {"reauth"}),
        ({"brand_id": str(BRAND)}, {"running"}),
        ({"market": "DE/de"}, {"done"}),
    ],
)
def test_each_filter_narrows_the_job_list(admin_client, zoo, query, expected):
    assert listed(admin_client, query) == names(zoo, *expected)


def test_jobs_are_found_by_job_id_whole_or_in_part_and_by_brand_id(admin_client, zoo):
    running = zoo["running"]

    assert listed(admin_client, {"q": str(running.id)}) == {running.id}
    assert listed(admin_client, {"q": str(running.id)[:13]}) == {running.id}
    assert listed(admin_client, {"q": str(BRAND)}) == {running.id}


def test_job_detail_shows_parameters_checkpoints_lease_and_history_read_only(admin_client):
    job = leased(
        expires_in=-timedelta(minutes=3),
        phase="writing",
        params={
            "market": "FR",
            "languageCode": "fr",
            "brand": "Acme",
            "x-promise-token": KNOWN_TOKEN,
            "note": f"Bearer {JWT_SHAPED}",
        },
        checkpoints={
            "batch": {"prompts": [{"prompt": "a"}, {"prompt": "b"}], "summary": {}},
            "batchSize": 2,
            "projectId": "proj-7",
            "written": 2,
        },
    )
    JobEvent.objects.create(job_id=job.id, kind="lease_claimed", actor="worker-9", detail="claimed")
    JobEvent.objects.create(job_id=job.id, kind="checkpoint", actor="worker-9", detail=f"token={JWT_SHAPED}")

    response = admin_client.get(detail(job))

    assert response.status_code == 200
    html = response.content.decode()
    assert (
        "&quot;market&quot;: &quot;FR&quot;" in html and "&quot;x-promise-token&quot;: &quot;[REDACTED]&quot;" in html
    )
    assert "<th>batch</th><td>2 prompts</td>" in html
    assert "<th>batchSize</th><td>2</td>" in html and "<th>projectId</th><td>proj-7</td>" in html
    assert "<th>written</th><td>2</td>" in html
    assert "expired, expires" in html
    assert "lease_claimed" in html and "worker-9" in html
    assert 'name="_save"' not in html  # read-only: no form to save
    assert KNOWN_TOKEN not in html and JWT_SHAPED not in html


def test_the_history_button_of_a_job_opens_the_admin_history_page(admin_client):
    job = leased(expires_in=timedelta(minutes=3))

    response = admin_client.get(reverse("admin:jobs_asyncjob_history", args=[job.id]))

    assert response.status_code == 200
    assert response.context["object"].pk == job.id


def act(client, action: str, jobs, confirmed: bool = True, **fields):
    """Choose `action` for `jobs` in the list, then (when `confirmed`) press "Yes" on its confirmation page."""
    data = {"action": action, "_selected_action": [str(j.id) for j in jobs], **fields}
    if confirmed:
        data["confirmed"] = "yes"
    else:
        data["index"] = "0"
    return client.post(LIST, data, follow=True)


@pytest.mark.parametrize("action", ["release_stale_lease", "requeue", "rerun", "mark_failed"])
def test_every_action_asks_for_confirmation_first_and_changes_nothing_until_then(admin_client, zoo, queues, action):
    before = snapshot()

    response = act(admin_client, action, [zoo["abandoned"], zoo["running"]], confirmed=False)

    assert response.status_code == 200
    assert response.templates[0].name == "admin/jobs/asyncjob/confirm_action.html"
    html = response.content.decode()
    assert "2 job(s) selected." in html and str(zoo["abandoned"].id) in html
    assert 'name="confirmed" value="yes"' in html and f'name="action" value="{action}"' in html
    assert snapshot() == before and queues.drain() == []
    assert not JobEvent.objects.exists()


def test_release_stale_lease_action_releases_only_expired_leases(admin_client, zoo):
    response = act(admin_client, "release_stale_lease", [zoo["running"], zoo["abandoned"]])

    assert [str(m) for m in response.context["messages"]] == [
        "Released the stale lease of 1 of 2 job(s). Skipped 1: not IN_PROGRESS, or the lease is live or absent."
    ]
    zoo["abandoned"].refresh_from_db()
    zoo["running"].refresh_from_db()
    assert zoo["abandoned"].lease_token is None and zoo["running"].lease_token is not None
    (event,) = JobEvent.objects.filter(job_id=zoo["abandoned"].id, kind="lease_released")
    assert event.actor == "admin:admin"


def test_requeue_action_sends_a_fresh_message_for_jobs_without_a_live_lease(admin_client, zoo, queues):
    response = act(admin_client, "requeue", [zoo["abandoned"], zoo["running"], zoo["done"]])

    assert [str(m) for m in response.context["messages"]] == [
        "Re-enqueued 1 of 3 job(s). Skipped 2: not IN_PROGRESS, a live lease, or the send failed."
    ]
    assert [m["kwargs"] for m in queues.drain()] == [{"jobId": str(zoo["abandoned"].id), "type": "testEcho"}]
    assert JobEvent.objects.get(job_id=zoo["abandoned"].id, kind="requeued").actor == "admin:admin"


def test_mark_failed_asks_for_its_code_and_reason_on_the_confirmation_page(admin_client, zoo):
    response = act(admin_client, "mark_failed", [zoo["abandoned"]], confirmed=False)

    html = response.content.decode()
    assert 'name="code"' in html and 'value="OPERATOR_FAILED"' in html and 'name="reason"' in html


def test_mark_failed_action_fails_the_job_with_the_code_and_reason_and_ends_its_grant(
    admin_client, zoo, ims_invalidations
):
    store_grant(zoo["abandoned"])

    response = act(
        admin_client, "mark_failed", [zoo["abandoned"]], code="MARKET_REMOVED", reason="market deleted by the brand"
    )

    assert [str(m) for m in response.context["messages"]] == ["Marked FAILED MARKET_REMOVED: 1 of 1 job(s)."]
    job = AsyncJob.objects.get(id=zoo["abandoned"].id)
    assert (job.status, job.error_code, job.error["message"]) == (
        "FAILED",
        "MARKET_REMOVED",
        "market deleted by the brand",
    )
    assert not PromiseGrant.objects.filter(job_id=job.id).exists()
    assert ims_invalidations == [("semrush", KNOWN_TOKEN)]


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        ("OPERATOR_FAILED", " ", "This field is required."),
        ("not a code", "why", "An error code is upper case, like OPERATOR_FAILED."),
        ("OPERATOR_FAILED", "x" * 301, "Ensure this value has at most 300 characters"),
    ],
)
def test_mark_failed_with_a_bad_code_or_reason_shows_the_page_again_and_changes_nothing(
    admin_client, zoo, code, reason, error
):
    response = act(admin_client, "mark_failed", [zoo["abandoned"]], code=code, reason=reason)

    assert response.templates[0].name == "admin/jobs/asyncjob/confirm_action.html"
    assert error in response.content.decode()
    assert AsyncJob.objects.get(id=zoo["abandoned"].id).status == "IN_PROGRESS"


def test_a_viewer_without_change_permission_sees_jobs_but_cannot_act(client, zoo):
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_asyncjob"))
    client.force_login(viewer)

    response = client.get(LIST)
    assert response.status_code == 200
    assert "action_checkbox" not in response.context["cl"].list_display
    act(client, "release_stale_lease", [zoo["abandoned"]])
    assert AsyncJob.objects.get(id=zoo["abandoned"].id).lease_token is not None


def test_no_admin_page_shows_a_token_value_or_its_ciphertext(admin_client, zoo):
    job = zoo["abandoned"]
    grant = store_grant(job)
    JobEvent.objects.create(job_id=job.id, kind="note", detail=f"promise_token={KNOWN_TOKEN}")
    AsyncJob.objects.filter(id=job.id).update(error={"code": "X", "message": f"Bearer {JWT_SHAPED}"})
    pages = [
        LIST,
        detail(job),
        f"{LIST}?q={job.id}",
        reverse("admin:tokens_promisegrant_changelist"),
        reverse("admin:tokens_promisegrant_change", args=[grant.pk]),
        reverse("admin:tokens_promisegrant_changelist") + f"?q={job.id}",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        assert KNOWN_TOKEN.encode() not in response.content, page
        assert grant.ciphertext.encode() not in response.content, page
        assert grant.ciphertext[:40].encode() not in response.content, page
        assert JWT_SHAPED.encode() not in response.content, page


def test_the_grant_page_shows_only_its_job_pair_and_expiry(admin_client, zoo):
    grant = store_grant(zoo["abandoned"])

    response = admin_client.get(reverse("admin:tokens_promisegrant_change", args=[grant.pk]))

    html = response.content.decode()
    assert str(zoo["abandoned"].id) in html and "semrush" in html
    assert response.context["adminform"].form.fields == {}
    assert list(response.context["adminform"].readonly_fields) == [
        "job_id",
        "pair",
        "expires_at",
        "rotations",
        "created_at",
        "updated_at",
    ]
    assert "ciphertext" not in html.lower()
