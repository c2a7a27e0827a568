"""No token value leaves the IMS simulator except in its own token answers: not its ledger, logs or admin."""

import logging

import httpx
import pytest
from django.conf import settings

from sandbox.ims import ledger
from sandbox.ims.models import PromiseRecord
from tokens.clients import ims
from tokens.exceptions import NeedsReauth
from tokens.pairs import get_pair


def live_a_token_life(bearer) -> list[str]:
    """Cause every kind of event; return every token value that went by: bearer, minted, access, rotated."""
    semrush = get_pair("semrush")
    user_token = bearer()
    minted = ims.mint(bearer=user_token, pair=semrush)
    exchanged = ims.exchange(promise=minted, pair=semrush)
    with pytest.raises(NeedsReauth):
        ims.exchange(promise=minted, pair=semrush)
    ims.invalidate(promise=exchanged.rotated, pair=semrush)
    return [user_token, minted.promise_token, exchanged.access.access_token, exchanged.rotated.promise_token]


@pytest.fixture
def token_life(sims, bearer):
    return live_a_token_life(bearer)


@pytest.fixture
def all_logs(caplog):
    caplog.set_level(logging.DEBUG)
    for name in ("sandbox", "serenity", "tokens", "django", "httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def test_the_ledger_view_names_tokens_by_fingerprint_only(token_life):
    response = httpx.get(f"{settings.IMS_HOST}/_ledger")

    assert [e["kind"] for e in response.json()["events"]] == [
        "minted",
        "exchanged",
        "rotated_to",
        "refused",
        "invalidated",
    ]
    assert {e["fingerprint"] for e in response.json()["events"]} == {
        ledger.fingerprint(token_life[1]),
        ledger.fingerprint(token_life[3]),
    }
    assert [value for value in token_life if value in response.text] == []


def test_no_token_value_reaches_a_log_record(sims, bearer, all_logs):
    token_life = live_a_token_life(bearer)

    records = all_logs.records
    assert any(r.name == "sandbox.ims" for r in records)
    rendered = all_logs.text + "\n".join(repr(vars(r)) for r in records)
    assert [value for value in token_life if value in rendered] == []


def test_the_admin_shows_fingerprints_but_no_token_value(token_life, admin_client):
    pages = [
        admin_client.get("/admin/sandbox_ims/ledgerevent/"),
        admin_client.get("/admin/sandbox_ims/promiserecord/"),
        admin_client.get(f"/admin/sandbox_ims/promiserecord/{PromiseRecord.objects.first().pk}/change/"),
    ]

    assert [p.status_code for p in pages] == [200, 200, 200]
    html = "".join(p.content.decode() for p in pages)
    assert ledger.fingerprint(token_life[1]) in html
    assert [value for value in token_life if value in html] == []
    assert [digest for digest in PromiseRecord.objects.values_list("digest", flat=True) if digest in html] == []


def test_the_signing_key_is_not_in_the_admin(sims, admin_client):
    response = admin_client.get("/admin/sandbox_ims/signingkey/")

    assert response.status_code == 404
