"""No client makes a network call while a database transaction is open (serenity/clients/guard.py).

The suite runs with NETWORK_CALL_IN_TRANSACTION=raise, so any code path the tests exercise that calls a
client inside `atomic()` fails there; these tests prove each kind of client is guarded.
"""

import httpx
import pytest
from django.db import transaction

from jobs.clients import sqs, ssm
from jobs.services import producer
from markets.clients import drs
from serenity.clients import http
from serenity.clients.guard import NetworkCallInTransaction, outside_transaction


def test_an_http_client_call_inside_a_transaction_is_refused_before_anything_is_sent(transactional_db):
    sent = []
    client = httpx.Client(transport=httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200)))

    refused = pytest.raises(NetworkCallInTransaction, match=r"probe\.call: network call inside a database transaction")
    with refused, transaction.atomic():
        http.request(client, "GET", "http://ims.example/", what="probe.call")

    assert sent == []
    assert http.request(client, "GET", "http://ims.example/", what="probe.call").status_code == 200
    assert len(sent) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda: sqs.queue_reachable(),
        lambda: ssm.get_parameter("/anything"),
        lambda: producer._send("00000000-0000-4000-8000-000000000000", "testEcho"),
        lambda: drs._invoke_http("arn:aws:lambda:us-east-1:123456789012:function:f", b"{}", 5.0),
    ],
    ids=["sqs (boto3)", "ssm (boto3)", "job message (kombu)", "drs (http)"],
)
def test_every_kind_of_client_refuses_to_call_out_inside_a_transaction(transactional_db, moto_server, call):
    with pytest.raises(NetworkCallInTransaction), transaction.atomic():
        call()


def test_the_transaction_a_test_case_wraps_around_each_test_is_not_mistaken_for_one(db):
    outside_transaction("probe")  # the `db` fixture's own atomic block

    with pytest.raises(NetworkCallInTransaction), transaction.atomic():
        outside_transaction("probe")


def test_deployments_log_the_mistake_instead_of_failing(transactional_db, settings, caplog):
    settings.NETWORK_CALL_IN_TRANSACTION = "log"

    with transaction.atomic():
        outside_transaction("probe.call")

    assert [(r.levelname, r.getMessage(), r.call) for r in caplog.records if r.name == "serenity.clients.guard"] == [
        ("ERROR", "network call inside a database transaction", "probe.call")
    ]


def test_enqueueing_inside_a_callers_transaction_is_refused_before_anything_is_written_or_sent(
    transactional_db, queues
):
    from jobs.models import AsyncJob
    from jobs.services import job_enqueue
    from tokens.pairs import get_pair

    obtained = []
    with pytest.raises(NetworkCallInTransaction, match="job_enqueue: must not run inside"), transaction.atomic():
        job_enqueue(
            job_id="00000000-0000-4000-8000-000000000001",
            job_type="testEcho",
            organization_id="00000000-0000-4000-8000-000000000002",
            brand_id=None,
            site_id=None,
            user_id="u1",
            params={},
            pair=get_pair("semrush"),
            obtain_token=lambda: obtained.append(1),
        )

    assert obtained == [] and not AsyncJob.objects.exists() and queues.drain() == []


def test_enqueue_reports_the_message_it_sent(transactional_db, queues):
    from jobs.services import job_enqueue
    from tokens.pairs import get_pair
    from tokens.types import PromiseToken

    token = PromiseToken(promise_token="value-1", token_type="promise_token", expires_in=60)
    enqueued = job_enqueue(
        job_id="00000000-0000-4000-8000-000000000001",
        job_type="testEcho",
        organization_id="00000000-0000-4000-8000-000000000002",
        brand_id=None,
        site_id=None,
        user_id="u1",
        params={},
        pair=get_pair("semrush"),
        obtain_token=lambda: token,
    )

    assert (enqueued.reused, enqueued.sent) == (False, True)
    assert [m["kwargs"]["jobId"] for m in queues.drain()] == ["00000000-0000-4000-8000-000000000001"]
