"""The original's callers (SPEC §3 "Who may call", §11): a SpaceCat session token as the bearer, and the promise
token it forwards in `x-promise-token` whenever the request itself reaches Semrush. Over the real queue, a real
worker and the simulators."""

import logging
from urllib.parse import quote, unquote

import pytest
from django.db import connection
from rest_framework.test import APIClient

from jobs.models import AsyncJob
from markets.models import Brand, Market
from sandbox.ims import ledger
from sandbox.ims.sessions import issue_session_token
from sandbox.semrush import state as semrush
from tests.markets.factories import MarketFactory
from tests.waits import wait_terminal
from tokens.clients import ims as ims_client
from tokens.pairs import get_pair
from tokens.services import grant_load

SEMRUSH = {"x-promise-audience": "semrush"}


@pytest.fixture
def session(world):
    """The world's user, signed in the way the original's UI is: a session token instead of the IMS bearer."""
    token = issue_session_token(user_id=world.user_id, org_ids=[world.org.ims_org_id])
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return token


@pytest.fixture
def promise(world):
    """A fresh promise token of the world's user for the Semrush pair, URL-encoded as the UI sends it."""

    def make(user_token: str | None = None) -> str:
        return quote(ims_client.mint(bearer=user_token or world.token, pair=get_pair("semrush")).promise_token, safe="")

    return make


@pytest.fixture
def all_logs(caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("sandbox", "serenity", "tokens", "markets", "jobs", "django", "httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def every_table_as_text() -> str:
    """Every row of every table, as text: what someone reading the database would see."""
    with connection.cursor() as cursor:
        rows = []
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')  # table names from the database itself
            rows.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(rows)


def assert_no_token_anywhere(responses, caplog, *tokens, pages=()):
    tables = every_table_as_text()
    for token in tokens:
        plain = unquote(token)
        for response in [*responses, *pages]:
            sent = "\n".join(f"{k}: {v}" for k, v in response.items()).encode() + response.content
            assert plain.encode() not in sent, f"a token left in a {response.status_code} answer"
        assert plain not in caplog.text
        assert all(plain not in repr(vars(record)) for record in caplog.records)
        assert plain not in tables


@pytest.mark.worker
def test_a_session_caller_creates_a_brand_a_market_and_three_markets_all_completed(
    world, session, promise, async_on, celery_worker, all_logs, admin_client
):
    forwarded = [promise() for _ in range(3)]
    brand = world.post(
        f"/v2/orgs/{world.org.id}/brands",
        {
            "name": "Fjell",
            "urls": ["https://fjell.example"],
            "semrushModelIds": ["gpt-5-mini"],
            "semrushMarket": {"market": "no", "languageCode": "no"},
            "generatePrompts": True,
        },
        **SEMRUSH,
        **{"x-promise-token": forwarded[0]},
    )
    fjell = Brand.objects.get(name="Fjell")
    market = world.post(
        f"/v2/orgs/{world.org.id}/brands/{fjell.id}/serenity/markets",
        {
            "market": "SE",
            "languageCode": "sv",
            "brandDomain": "fjell.example",
            "brandNames": ["Fjell"],
            "generatePrompts": True,
        },
        **SEMRUSH,
        **{"x-promise-token": forwarded[1]},
    )
    activation = world.post(
        f"/v2/orgs/{world.org.id}/brands/{fjell.id}/serenity/activate",
        {
            "brandDomain": "fjell.example",
            "brandNames": ["Fjell"],
            "generatePrompts": True,
            "markets": [{"market": m, "languageCode": lang} for m, lang in (("DK", "da"), ("FI", "fi"), ("DE", "de"))],
        },
        **SEMRUSH,
        **{"x-promise-token": forwarded[2]},
    )

    assert (brand.status_code, market.status_code, activation.status_code) == (201, 201, 200), (
        brand.content,
        market.content,
        activation.content,
    )
    job_ids = [
        brand.json()["promptGeneration"]["jobId"],
        market.json()["promptGeneration"]["jobId"],
        *[e["body"]["promptGeneration"]["jobId"] for e in activation.json()["markets"]],
    ]
    jobs = [wait_terminal(AsyncJob.objects.get(id=job_id), timeout=60) for job_id in job_ids]
    assert [job.status for job in jobs] == ["COMPLETED"] * 5, [job.error for job in jobs]
    assert {job.user_id for job in jobs} == {world.user_id}  # the session token's `sub`
    for job in jobs:
        assert len(semrush.prompts(job.result["projectId"])) == 50
    # Each request exchanged its forwarded token once; the activation's other two markets minted theirs. Every
    # job exchanged a token of its own: eight exchanges, of eight different tokens, none refused.
    assert ledger.count(ledger.MINTED) == 3 + 2 and ledger.count(ledger.REFUSED) == 0
    exchanged = [e["fingerprint"] for e in ledger.events("exchanged")]
    assert len(exchanged) == len(set(exchanged)) == 3 + 5
    pages = [admin_client.get(f"/admin/jobs/asyncjob/{job_id}/change/") for job_id in job_ids]
    assert {page.status_code for page in pages} == {200}
    assert_no_token_anywhere([brand, market, activation], all_logs, session, *forwarded, pages=pages)


@pytest.mark.parametrize("call", ["create_brand", "create_market", "activate", "regenerate"])
def test_a_session_caller_without_a_promise_token_gets_401_naming_the_header(world, session, async_on, call):
    existing = MarketFactory(brand=world.brand, country="AT", language_code="de", geo_target_id=2040)
    path, body = {
        "create_brand": (f"/v2/orgs/{world.org.id}/brands", {"name": "Fjell", "urls": ["fjell.example"]}),
        "create_market": (world.url("markets"), {**world.brand_fields, "market": "FR", "languageCode": "fr"}),
        "activate": (world.url("activate"), {**world.brand_fields}),
        "regenerate": (world.url(f"markets/{existing.id}/generation"), {}),
    }[call]

    response = world.post(path, body, **SEMRUSH)

    assert response.status_code == 401, response.content
    assert (response.json()["code"], response.json()["error"]) == ("PROMISE_TOKEN_REQUIRED", "promiseTokenRequired")
    assert "x-promise-token" in response.json()["message"]
    assert Market.objects.count() == 1 and not Brand.objects.filter(name="Fjell").exists()
    assert ledger.count(ledger.MINTED) == 0


def test_a_session_caller_may_create_a_brand_without_semrush_work_and_poll_without_a_promise_token(world, session):
    type(world.org).objects.filter(id=world.org.id).update(is_serenity_active=False)
    flat = world.post(f"/v2/orgs/{world.org.id}/brands", {"name": "Flat", "urls": ["flat.example"]})
    poll = world.client.get(world.url("markets/generation/jobs/8c24224f-d559-478d-a546-9b3f04cc3f78"))

    assert flat.status_code == 201
    assert poll.status_code == 404  # not a 401: a poll reaches no Semrush, it needs no promise token


@pytest.mark.parametrize("header", ["not-a-live-token", "%E0%A4%A"])
def test_a_promise_token_ims_will_not_exchange_is_a_401_and_nothing_is_created(world, session, header):
    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr"},
        **SEMRUSH,
        **{"x-promise-token": header},
    )

    assert response.status_code == 401
    assert (response.json()["error"], response.json()["message"]) == (
        "authenticationRequired",
        "Invalid or expired promise token",
    )
    assert Market.objects.count() == 0


def test_a_promise_token_of_another_user_is_a_401_and_is_left_with_no_live_successor(world, session, bearer, promise):
    someone_else = bearer(user_id="someone-else", org_ids=[world.org.ims_org_id])

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr"},
        **SEMRUSH,
        **{"x-promise-token": promise(someone_else)},
    )

    assert response.status_code == 401 and response.json()["message"] == "Invalid or expired promise token"
    assert Market.objects.count() == 0 and ledger.live_tokens() == 0


def test_a_promise_token_no_job_took_is_invalidated_when_the_request_ends(world, session, promise, async_on, gate):
    gate("false")  # no consumer: the market is made, no job takes the request's rotated token

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr", "generatePrompts": True},
        **SEMRUSH,
        **{"x-promise-token": promise()},
    )

    assert response.status_code == 201 and "promptGeneration" not in response.json()
    assert ledger.count(ledger.EXCHANGED) == 1 and ledger.count(ledger.INVALIDATED) == 1
    assert ledger.live_tokens() == 0


def market_awaiting_reauth(world, promise, queues):
    """A market created with generation by the session caller, its job ended FAILED awaiting re-authorisation."""
    from jobs.services import job_finish
    from markets.generation import jobtype

    created = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr", "generatePrompts": True},
        **SEMRUSH,
        **{"x-promise-token": promise()},
    )
    assert created.status_code == 201, created.content
    job = AsyncJob.objects.get(id=created.json()["promptGeneration"]["jobId"])
    job_finish(
        job.id,
        to="FAILED",
        event="failed",
        error={"code": jobtype.NEEDS_REAUTH, "message": "refused", "retryable": False, "needsReauth": True},
    )
    queues.drain()
    return job


def test_a_session_callers_job_is_reauthorised_by_the_same_user_with_a_promise_token(
    world, session, promise, async_on, queues
):
    job = market_awaiting_reauth(world, promise, queues)
    reauth = f"{world.url('markets')}/generation/jobs/{job.id}/reauth"
    stranger = issue_session_token(user_id="someone-else", org_ids=[world.org.ims_org_id])

    without_token = world.post(reauth, {}, **SEMRUSH)
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {stranger}")
    by_another = world.post(reauth, {}, **SEMRUSH, **{"x-promise-token": promise()})
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {session}")
    accepted = world.post(reauth, {}, **SEMRUSH, **{"x-promise-token": promise()})

    assert (without_token.status_code, without_token.json()["code"]) == (401, "PROMISE_TOKEN_REQUIRED")
    assert (by_another.status_code, by_another.json()["code"]) == (403, "not_job_requester")
    assert accepted.status_code == 202, accepted.content
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS" and grant_load(job.id) is not None
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == [str(job.id)]


def test_an_admin_session_reaches_an_organization_it_is_not_a_tenant_of(world, promise):
    admin = issue_session_token(user_id=world.user_id, org_ids=[], is_admin=True)
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {admin}")

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr"},
        **SEMRUSH,
        **{"x-promise-token": promise()},
    )

    assert response.status_code == 201, response.content


def test_a_read_only_admin_may_poll_but_not_create(world, promise):
    reader = issue_session_token(user_id=world.user_id, org_ids=[], is_read_only_admin=True)
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {reader}")

    created = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr"},
        **SEMRUSH,
        **{"x-promise-token": promise()},
    )
    poll = world.client.get(world.url("markets/generation/jobs/8c24224f-d559-478d-a546-9b3f04cc3f78"))

    assert created.status_code == 403 and created.json()["error"] == "forbidden"
    assert poll.status_code == 404 and poll.json()["code"] == "job_not_found"


@pytest.mark.worker
def test_one_forwarded_token_sent_by_concurrent_requests_serves_exactly_one_of_them(
    world, session, promise, async_on, celery_worker, sims
):
    import threading

    import httpx
    from django.db import connections

    forwarded = promise()
    start, answers, lock = threading.Barrier(3, timeout=60), {}, threading.Lock()

    def create(country: str, language: str):
        try:
            start.wait()
            answer = httpx.post(
                f"{sims.url}{world.url('markets')}",
                timeout=60,
                json={**world.brand_fields, "market": country, "languageCode": language, "generatePrompts": True},
                headers={"Authorization": f"Bearer {session}", "x-promise-token": forwarded, **SEMRUSH},
            )
            with lock:
                answers[country] = answer
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=slice_) for slice_ in (("DE", "de"), ("AT", "de"), ("CH", "de"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    won = [country for country, answer in answers.items() if answer.status_code == 201]
    lost = [answer for answer in answers.values() if answer.status_code != 201]
    assert len(won) == 1 and len(lost) == 2, {c: (a.status_code, a.text) for c, a in answers.items()}
    assert {(a.status_code, a.json()["message"]) for a in lost} == {(401, "Invalid or expired promise token")}
    assert list(Market.objects.values_list("country", flat=True)) == won  # the losers created nothing
    job = wait_terminal(AsyncJob.objects.get(id=answers[won[0]].json()["promptGeneration"]["jobId"]), timeout=60)
    assert job.status == "COMPLETED", job.error
    assert AsyncJob.objects.count() == 1 and ledger.count(ledger.REFUSED) == 2  # IMS refused the token twice


ORG_B = "0B1B2C3D4E5F60718293A4B5@AdobeOrg"


@pytest.mark.parametrize("minted_for", [[ORG_B], []], ids=["another-org", "no-org"])
@pytest.mark.parametrize("caller_kind", ["session", "ims", "admin"])
def test_a_promise_token_minted_for_other_organizations_cannot_act_for_this_one(
    world, bearer, promise, async_on, gate, minted_for, caller_kind
):
    # The caller may act on the world's organization (a tenant of it, or an admin); the token it forwards was
    # minted by the same user from a bearer that named only org B, or no organization at all.
    callers = {
        "session": issue_session_token(user_id=world.user_id, org_ids=[world.org.ims_org_id, ORG_B]),
        "ims": bearer(user_id=world.user_id, org_ids=[world.org.ims_org_id, ORG_B]),
        "admin": issue_session_token(user_id=world.user_id, org_ids=[], is_admin=True),
    }
    world.client.credentials(HTTP_AUTHORIZATION=f"Bearer {callers[caller_kind]}")
    forwarded = promise(bearer(user_id=world.user_id, org_ids=minted_for))
    stranger = type(world.org).objects.create(name="Elsewhere", ims_org_id="0C1B2C3D4E5F60718293A4B5@AdobeOrg")
    not_a_member = APIClient()
    not_a_member.credentials(HTTP_AUTHORIZATION=f"Bearer {callers['session']}")
    ownership_refusal = not_a_member.post(
        f"/v2/orgs/{stranger.id}/brands", {"name": "Fjell", "urls": ["fjell.example"]}, format="json"
    )

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr", "generatePrompts": True},
        **SEMRUSH,
        **{"x-promise-token": forwarded},
    )

    assert ownership_refusal.status_code == 403
    assert response.status_code == 403, response.content
    assert response.json() == ownership_refusal.json()
    assert response["x-error"] == ownership_refusal["x-error"]
    assert Market.objects.count() == 0 and AsyncJob.objects.count() == 0
    assert ledger.live_tokens() == 0  # the token IMS rotated for the refused one was invalidated


def test_a_promise_token_acts_for_an_organization_its_bearer_named_among_others(world, session, bearer, promise):
    forwarded = promise(bearer(user_id=world.user_id, org_ids=[ORG_B, world.org.ims_org_id]))

    response = world.post(
        world.url("markets"),
        {**world.brand_fields, "market": "FR", "languageCode": "fr"},
        **SEMRUSH,
        **{"x-promise-token": forwarded},
    )

    assert response.status_code == 201, response.content


@pytest.mark.parametrize("route", ["delete", "languages", "reauth", "regenerate"])
def test_every_route_that_forwards_a_promise_token_binds_it_to_the_organization(
    world, session, bearer, promise, async_on, queues, route
):
    job = market_awaiting_reauth(world, promise, queues)
    market = Market.objects.get()
    forwarded = {"x-promise-token": promise(bearer(user_id=world.user_id, org_ids=[ORG_B])), **SEMRUSH}
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in forwarded.items()}

    response = {
        "delete": lambda: world.client.delete(world.url(f"markets/{market.geo_target_id}/fr"), **headers),
        "languages": lambda: world.client.get(f"/v2/orgs/{world.org.id}/serenity/languages", **headers),
        "reauth": lambda: world.post(world.url(f"markets/generation/jobs/{job.id}/reauth"), {}, **forwarded),
        "regenerate": lambda: world.post(world.url(f"markets/{market.id}/generation"), {}, **forwarded),
    }[route]()

    assert response.status_code == 403, response.content
    assert (response.json()["code"], response.json()["error"]) == ("organization_access_denied", "forbidden")
    assert Market.objects.filter(id=market.id).exists() and queues.drain() == []
    job.refresh_from_db()
    assert job.status == "FAILED" and ledger.live_tokens() == 0
