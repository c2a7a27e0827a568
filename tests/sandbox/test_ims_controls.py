"""The IMS simulator's JSON controls and walkthrough endpoints: /_control, /_ledger, /_users/token."""

import httpx
import pytest
from django.conf import settings

from sandbox.ims import controls, ledger
from serenity.auth import verify_bearer
from tokens.clients import ims
from tokens.pairs import get_pair


def control(body):
    return httpx.post(f"{settings.IMS_HOST}/_control", json=body, timeout=10)


def test_arming_exchange_failures_over_http_reports_the_switch(sims):
    response = control({"action": "fail_next_exchanges", "count": 2, "status": 403})

    assert (response.status_code, response.json()) == (200, {"switches": {"exchange": {"remaining": 2, "status": 403}}})
    assert controls.state() == {"exchange": {"remaining": 2, "status": 403}}


def test_arming_mint_failures_defaults_to_one_503(sims):
    response = control({"action": "fail_next_mints"})

    assert response.json() == {"switches": {"mint": {"remaining": 1, "status": 503}}}


def test_reset_disarms_every_switch(sims):
    controls.fail_next_mints(3)
    controls.fail_next_exchanges(3)

    response = control({"action": "reset"})

    assert response.json() == {"switches": {}}
    assert httpx.get(f"{settings.IMS_HOST}/_control").json() == {"switches": {}}


@pytest.mark.parametrize(
    "body",
    [
        {"action": "explode"},
        {"action": "fail_next_exchanges", "status": 200},
        {"action": "fail_next_mints", "count": -1},
    ],
)
def test_a_bad_control_request_is_400_and_changes_nothing(sims, body):
    response = control(body)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_request"
    assert controls.state() == {}


def test_arming_from_python_refuses_a_success_status(db):
    with pytest.raises(ValueError):
        controls.fail_next_exchanges(1, status=200)


def test_the_ledger_view_lists_events_and_live_tokens(sims, bearer):
    minted = ims.mint(bearer=bearer(), pair=get_pair("semrush"))

    response = httpx.get(f"{settings.IMS_HOST}/_ledger")

    event = ledger.events()[0]
    assert response.json() == {
        "events": [
            {
                "kind": "minted",
                "operation": "mint",
                "fingerprint": ledger.fingerprint(minted.promise_token),
                "replaces": "",
                "pair": "semrush",
                "user_id": "user-1",
                "status": None,
                "reason": "",
                "at": event["at"].isoformat(),
            }
        ],
        "live_tokens": 1,
    }


def test_clear_ledger_forgets_events_and_tokens(sims, bearer):
    ims.mint(bearer=bearer(), pair=get_pair("semrush"))

    control({"action": "clear_ledger"})

    assert (ledger.events(), ledger.live_tokens()) == ([], 0)


def test_the_user_token_endpoint_issues_a_bearer_the_api_accepts(sims):
    response = httpx.post(
        f"{settings.IMS_HOST}/_users/token", json={"userId": "walker", "orgIds": ["W@AdobeOrg"], "ttl": 900}
    )

    body = response.json()
    assert body == {"access_token": body["access_token"], "token_type": "bearer", "expires_in": 900}
    caller = verify_bearer(body["access_token"])
    assert (caller.user_id, caller.org_ids) == ("walker", frozenset({"W@AdobeOrg"}))


@pytest.mark.parametrize(
    "body", [{"orgIds": []}, {"userId": "u", "orgIds": "X@AdobeOrg"}, {"userId": "u", "ttl": "1h"}]
)
def test_the_user_token_endpoint_refuses_bad_input(sims, body):
    response = httpx.post(f"{settings.IMS_HOST}/_users/token", json=body)

    assert response.status_code == 400
    assert "access_token" not in response.text
