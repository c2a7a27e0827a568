"""The soak's healing invariants (scripts/soak/invariants.py `healing`), read from a local SQS ledger written here: what
each receive of a job message became decides whether a fault cost a visibility timeout or a receive that ran
nothing, and which faults explain it."""

import base64
import json
import shutil
import time
import uuid
from datetime import UTC, datetime

import pytest
from django.conf import settings

from scripts.soak import Config, Soak, job_of

pytestmark = pytest.mark.solo  # the soak's whole stack under faults: run alone, after the parallel part (Makefile)

VISIBILITY = 60


@pytest.fixture
def soak():
    soak = Soak(
        Config(seed=1, jobs=0, minutes=0, fault_every=1, database_url="postgres://unused/x", visibility=VISIBILITY)
    )
    yield soak
    shutil.rmtree(soak.stack.var, ignore_errors=True)


def body(job_id: str) -> str:
    """A job message's body as kombu sends it: base64 JSON around the base64 Celery body."""
    inner = base64.b64encode(json.dumps([[], {"jobId": job_id, "type": "generateSemrushMarket"}, {}]).encode())
    return base64.b64encode(json.dumps({"body": inner.decode(), "headers": {}}).encode()).decode()


class Ledger:
    def __init__(self, soak: Soak):
        self.soak, self.lines, self.t0 = soak, [], time.time() - 600

    def receive(self, job_id: str, at: float, *, then: str | None = None, queue: str | None = None) -> str:
        receipt = uuid.uuid4().hex
        queue = queue or settings.MARKET_JOBS_QUEUE
        self.lines.append(
            {
                "t": self.t0 + at,
                "op": "receive",
                "queue": queue,
                "id": job_id,
                "receipt": receipt,
                "count": 1,
                "body": body(job_id),
            }
        )
        if then == "delete":
            self.lines.append({"t": self.t0 + at + 1, "op": "delete", "queue": queue, "receipt": receipt})
        elif then == "hand back":
            self.lines.append(
                {"t": self.t0 + at + 1, "op": "visibility", "queue": queue, "receipt": receipt, "timeout": 0}
            )
        return receipt

    def write(self) -> None:
        self.soak.ledger_path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))

    def at(self, seconds: float) -> float:
        return self.t0 + seconds


def counts(soak: Soak, events=None) -> dict[str, int]:
    invariants, _ = soak.healing(events or {})
    return {i.name: i.count for i in invariants}


def test_the_job_id_is_read_from_a_kombu_message_body():
    job_id = str(uuid.uuid4())
    assert job_of(body(job_id)) == job_id
    assert job_of("not base64 at all") == "?"


def test_receives_run_or_handed_back_after_a_database_fault_cost_nothing(soak):
    ledger = Ledger(soak)
    ledger.receive(a := str(uuid.uuid4()), 10, then="delete")
    ledger.receive(b := str(uuid.uuid4()), 20, then="hand back")
    ledger.receive(b, 21, then="delete")
    ledger.receive(str(uuid.uuid4()), 30, queue=settings.MAINTENANCE_QUEUE)  # not a job message
    ledger.write()
    soak.database_faults.append(ledger.at(15))

    found = counts(soak)

    assert found["receives that ran nothing"] == 0
    assert found["jobs delayed by a visibility timeout, not by a SIGKILL mid-delivery"] == 0
    assert found["deliveries that failed before their claim and waited a visibility timeout"] == 0
    assert a and b


def test_a_receive_left_alone_waited_its_visibility_timeout_unless_its_worker_was_killed(soak):
    ledger = Ledger(soak)
    ledger.receive(unclaimed := str(uuid.uuid4()), 10)  # nothing done with it, never claimed
    ledger.receive(claimed := str(uuid.uuid4()), 100)  # nothing done with it, but its job was claimed
    ledger.receive(str(uuid.uuid4()), 300)  # nothing done with it: its worker was SIGKILLed meanwhile
    ledger.receive(str(uuid.uuid4()), 401)  # brought by the long poll a worker SIGKILLed at 400 left in flight
    ledger.write()
    soak.worker_stops.append((ledger.at(305), "SIGKILL"))
    soak.worker_stops.append((ledger.at(400), "SIGKILL"))
    soak.worker_stops.append((ledger.at(12), "SIGTERM"))  # a warm stop explains nothing
    events = {claimed: [{"kind": "lease_claimed", "at": datetime.fromtimestamp(ledger.at(101), UTC)}]}

    found = counts(soak, events)

    assert found["deliveries that failed before their claim and waited a visibility timeout"] == 1
    assert found["jobs delayed by a visibility timeout, not by a SIGKILL mid-delivery"] == 2
    assert found["receives that ran nothing"] == 1
    invariants, explained = soak.healing(events)
    assert unclaimed in next(i.detail for i in invariants if i.name.startswith("deliveries that failed"))
    assert [line.split(": ", 1)[1] for line in explained] == [
        "waited its visibility timeout, its worker SIGKILLed holding it"
    ] * 2


def test_a_hand_back_without_a_claim_or_a_database_fault_ran_nothing(soak):
    ledger = Ledger(soak)
    ledger.receive(str(uuid.uuid4()), 10, then="hand back")  # released unrun, as a stopping worker's last poll was
    ledger.receive(str(uuid.uuid4()), 200, then="hand back")  # a database fault 20 s before: too long ago
    ledger.write()
    soak.database_faults.append(ledger.at(180))

    assert counts(soak)["receives that ran nothing"] == 2


def test_api_5xx_answers_count_unless_an_upstream_service_or_a_cut_connection_explains_them(soak):
    soak.answered(502, json.dumps({"code": "semrush_unavailable"}).encode(), "markets")
    soak.answered(500, json.dumps({"code": "internal_error"}).encode(), "markets")
    soak.answered(503, json.dumps({"code": "prompt_generation_unavailable"}).encode(), "markets")
    soak.answered(200, b"{}", "job")
    now = time.time()
    soak.server_errors.append((now - 200, 503, "database_unavailable", "activate"))  # no database fault near
    soak.server_errors.append((now, 503, "database_unavailable", "activate"))  # cut by terminated backends
    soak.database_faults.append(now - 1)
    Ledger(soak).write()

    assert counts(soak)["API 5xx answers (not an upstream service's)"] == 3
