"""Request limits (serenity/limits.py): charged only once the caller may act on what it names, atomic across
concurrent requests, an organization's budget counted in markets and refused whole."""

import threading
import uuid

import httpx
import pytest
from django.db import connections

from jobs.models import JobStatus
from markets.models import Market
from serenity import limits
from serenity.models import RateLimit
from tests.markets.factories import BrandFactory, OrganizationFactory

USER = "user-1"


@pytest.fixture
def tenant(sims, bearer, throttle_rates):
    """An organization with an active brand (and its Semrush workspace), a member and a stranger."""
    from markets.clients.semrush import SemrushClient

    org = OrganizationFactory()
    member = bearer(user_id=USER, org_ids=[org.ims_org_id])
    brand = BrandFactory(
        organization=org,
        semrush_workspace_id=SemrushClient(member).create_workspace(name="Tenant", parent_id="serenity"),
    )
    return {
        "org": org,
        "brand": brand,
        "member": member,
        "sims": sims,
        "bearer": bearer,
        "stranger": bearer(user_id="stranger", org_ids=["F00D0000000000000000F00D@AdobeOrg"]),
        "nobody": bearer(user_id="nobody", org_ids=[]),
        "rates": throttle_rates,
    }


def markets_url(t) -> str:
    return f"{t['sims'].url}/v2/orgs/{t['org'].id}/brands/{t['brand'].id}/serenity/markets"


def market_body(t, market="DE", language="de") -> dict:
    return {
        "market": market,
        "languageCode": language,
        "brandDomain": t["brand"].domain,
        "brandNames": [t["brand"].name],
    }


def post(url, token, body=None, **headers):
    return httpx.post(url, json=body or {}, headers={"Authorization": f"Bearer {token}", **headers}, timeout=60)


# Requests in flight at once: each holds a database connection in the served API, and PostgreSQL's default
# cap is 100 for every process of the suite; the rest wait for a free slot, so the counter still sees
# IN_FLIGHT racing charges at every moment of the run.
IN_FLIGHT = 30


def concurrently(count: int, call) -> list[int]:
    """`call()` from `count` threads released at once (at most IN_FLIGHT on the wire); the statuses."""
    start, statuses, lock = threading.Barrier(count, timeout=60), [], threading.Lock()
    slots = threading.BoundedSemaphore(IN_FLIGHT)

    def run():
        try:
            start.wait()
            with slots:
                status = call()
            with lock:
                statuses.append(status)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(statuses) == count
    return statuses


def test_a_stranger_never_spends_an_organizations_budget(tenant):
    tenant["rates"](org_markets="3/hour")

    refused = [
        post(markets_url(tenant), token, market_body(tenant)).status_code
        for token in [tenant["stranger"]] * 5 + [tenant["nobody"]] * 5
    ]
    created = [
        post(markets_url(tenant), tenant["member"], market_body(tenant, m)).status_code
        for m in ("DE", "AT", "CH", "LU")
    ]

    assert refused == [403] * 10
    assert created == [201, 201, 201, 429]


@pytest.mark.parametrize(("requests", "limit"), [(30, 10), (90, 60), (30, 60), (90, 10)])
def test_concurrent_calls_past_a_users_limit_get_exactly_the_excess_refused(tenant, requests, limit):
    from tests.markets.generation.conftest import make_job

    tenant["rates"](reauth=f"{limit}/day")
    job = make_job(
        org=tenant["org"],
        brand=tenant["brand"],
        site=tenant["brand"].base_site,
        status=JobStatus.COMPLETED,
        user_id=USER,
    )
    url = f"{markets_url(tenant)}/generation/jobs/{job.id}/reauth"

    statuses = concurrently(
        requests, lambda: post(url, tenant["member"], **{"x-promise-audience": "semrush"}).status_code
    )

    assert statuses.count(429) == max(0, requests - limit)
    assert statuses.count(409) == min(requests, limit)  # charged, then "not awaiting re-authorisation"


@pytest.mark.parametrize(("requests", "limit"), [(30, 10), (90, 60), (30, 60), (90, 10)])
def test_concurrent_markets_past_an_organizations_budget_get_exactly_the_excess_refused(tenant, requests, limit):
    tenant["rates"](org_markets=f"{limit}/day")
    assert post(markets_url(tenant), tenant["member"], market_body(tenant)).status_code == 201
    RateLimit.objects.all().delete()  # the budget full again; the slice now exists: each call is a cheap 409

    statuses = concurrently(
        requests, lambda: post(markets_url(tenant), tenant["member"], market_body(tenant)).status_code
    )

    assert statuses.count(429) == max(0, requests - limit)
    assert statuses.count(409) == min(requests, limit)


def test_an_activation_spends_one_per_market_and_one_that_would_overspend_is_refused_whole(tenant):
    tenant["rates"](org_markets="3/day")
    activate = markets_url(tenant).replace("/markets", "/activate")
    fields = {"brandDomain": tenant["brand"].domain, "brandNames": [tenant["brand"].name]}

    first = post(
        activate,
        tenant["member"],
        {**fields, "markets": [{"market": "DE", "languageCode": "de"}, {"market": "AT", "languageCode": "de"}]},
    )
    second = post(
        activate,
        tenant["member"],
        {**fields, "markets": [{"market": "CH", "languageCode": "de"}, {"market": "LU", "languageCode": "de"}]},
    )
    third = post(markets_url(tenant), tenant["member"], market_body(tenant, "CH"))

    assert (first.status_code, second.status_code, third.status_code) == (200, 429, 201)
    assert int(second.headers["Retry-After"]) > 0 and second.json()["error"] == "tooManyRequests"
    assert sorted(Market.objects.values_list("country", flat=True)) == ["AT", "CH", "DE"]


def reauth_job(tenant):
    from tests.markets.generation.conftest import make_job

    job = make_job(
        org=tenant["org"],
        brand=tenant["brand"],
        site=tenant["brand"].base_site,
        status=JobStatus.COMPLETED,
        user_id=USER,
    )
    return f"{markets_url(tenant)}/generation/jobs/{job.id}/reauth"


def reauth(url, token, **headers) -> int:
    return post(url, token, **{"x-promise-audience": "semrush", **headers}).status_code


def promise_of(ims_bearer: str) -> dict:
    """A fresh promise token of the bearer's user, as a session-token caller forwards it."""
    from urllib.parse import quote

    from tokens.clients import ims as ims_client
    from tokens.pairs import get_pair

    token = ims_client.mint(bearer=ims_bearer, pair=get_pair("semrush")).promise_token
    return {"x-promise-token": quote(token, safe="")}


def test_re_authorisations_are_limited_per_organization_too(tenant):
    """The requester spends the organization's budget: their third call is refused whatever the job's state."""
    tenant["rates"](org_reauth="2/day")
    url = reauth_job(tenant)

    assert [reauth(url, tenant["member"]) for _ in range(3)] == [409, 409, 429]


def test_a_caller_who_may_read_but_not_act_spends_no_organization_budget(tenant):
    """A read-only admin and another user of the organization see the job but may not re-authorise it (403):
    their calls leave the organization's budget whole for its requester."""
    from sandbox.ims.sessions import issue_session_token

    tenant["rates"](org_reauth="2/day")
    url = reauth_job(tenant)
    read_only_admin = issue_session_token(user_id="auditor", org_ids=[], is_read_only_admin=True)
    colleagues = [tenant["bearer"](user_id=f"colleague-{i}", org_ids=[tenant["org"].ims_org_id]) for i in range(3)]

    auditor_ims = tenant["bearer"](user_id="auditor", org_ids=[])

    refused = [reauth(url, read_only_admin, **promise_of(auditor_ims)) for _ in range(3)]
    refused += [reauth(url, token) for token in colleagues]

    assert refused == [403] * 6
    assert limits.budgets(str(tenant["org"].id)) == []
    assert [reauth(url, tenant["member"]) for _ in range(3)] == [409, 409, 429]


def test_a_caller_who_may_not_act_still_spends_their_own_budget(tenant):
    tenant["rates"](reauth="2/day")
    url = reauth_job(tenant)
    colleague = tenant["bearer"](user_id="colleague", org_ids=[tenant["org"].ims_org_id])

    assert [reauth(url, colleague) for _ in range(3)] == [403, 403, 429]


def test_an_override_gives_one_organization_its_own_rate_and_a_reset_its_budget_back(tenant, settings):
    tenant["rates"](org_markets="1/day")
    settings.THROTTLE_OVERRIDES = {f"org_markets:{tenant['org'].id}": "2/day"}

    answers = [
        post(markets_url(tenant), tenant["member"], market_body(tenant, m)).status_code for m in ("DE", "AT", "CH")
    ]
    assert limits.reset(limits.ORG_MARKETS, str(tenant["org"].id)) == 1
    after_reset = post(markets_url(tenant), tenant["member"], market_body(tenant, "CH")).status_code

    assert answers == [201, 201, 429] and after_reset == 201


def test_no_users_id_is_kept_in_clear(tenant):
    tenant["rates"](onboarding="5/day")

    post(markets_url(tenant), tenant["member"], market_body(tenant))

    keys = list(RateLimit.objects.values_list("key", flat=True))
    assert keys and all(USER not in key for key in keys)


@pytest.mark.parametrize("text", ["10/min", "500/hour", "1/day", "2/s"])
def test_rates_are_read_as_drf_writes_them(text):
    rate = limits.Rate.parse(text)
    assert rate.limit == int(text.split("/")[0]) and rate.period in (1, 60, 3600, 86400)


@pytest.mark.parametrize("text", ["0/min", "ten/min", "10/fortnight"])
def test_a_rate_that_is_none_is_refused(text):
    with pytest.raises((ValueError, KeyError)):
        limits.Rate.parse(text)


def test_a_weight_the_budget_could_never_hold_is_refused(db, settings):
    settings.THROTTLE_RATES = {**settings.THROTTLE_RATES, "org_markets": "5/hour"}

    with pytest.raises(limits.Throttled):
        limits.charge_org(limits.ORG_MARKETS, uuid.uuid4(), weight=6)
