"""GET …/generation/jobs/{jobId}?wait=N with If-None-Match: answers at once when the job differs from the ETag,
otherwise when it changes (woken by PostgreSQL's NOTIFY at the change's commit) or at the end of the wait (304,
the same ETag). Counts and order, never time."""

import json
import subprocess
import sys
import threading
import uuid

import pytest
from django.db import connection, connections
from django.test import Client

from jobs.job_changes import APPLICATION_NAME, listener
from markets.generation import apis, waiting
from tests.markets.generation.conftest import REQUESTER, Api, make_job
from tests.markets.generation.test_generation_scoping import missing_job_404

# Changes one job from another process, in a transaction that commits when told: `update` once the UPDATE ran
# (uncommitted), `committed` after COMMIT.
CHANGER = """
import sys, psycopg
conn = psycopg.connect(sys.argv[1])
conn.execute(
    "UPDATE async_jobs SET status = 'COMPLETED', phase = 'published', ended_at = now(), updated_at = now(), "
    "result = %s WHERE id = %s",
    ('{"promptCount": 3, "projectId": "p-1", "published": true, "verdict": "ship"}', sys.argv[2]),
)
print("updated", flush=True)
sys.stdin.readline()
conn.commit()
print("committed", flush=True)
"""


def dsn() -> str:
    params = connection.get_connection_params()
    return f"host={params['host']} port={params.get('port') or 5432} user={params['user']} dbname={params['dbname']}"


class Changer:
    """A job's change made by another process, committed when `commit()` is called."""

    def __init__(self, job_id):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHANGER, dsn(), str(job_id)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "updated"

    def commit(self) -> None:
        self.proc.stdin.write("commit\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "committed"
        assert self.proc.wait(timeout=30) == 0


class Waiter(threading.Thread):
    """One waiting poll in a thread of its own (its own database connection), as a gunicorn thread serves it."""

    def __init__(self, api: Api, tenants, job, *, wait: int, etag: str | None, events: list | None = None):
        super().__init__(daemon=True)
        self.args = (tenants.org.id, tenants.brand.id, job.id)
        self.api, self.wait, self.etag, self.events = Api(api.token, Client()), wait, etag, events
        self.response = None

    def run(self):
        try:
            headers = {"If-None-Match": self.etag} if self.etag else {}
            path = apis_path(*self.args) + f"?wait={self.wait}"
            self.response = self.api.client.get(path, headers={"Authorization": f"Bearer {self.api.token}", **headers})
            if self.events is not None:
                self.events.append("answered")
        finally:
            connections.close_all()


def apis_path(org_id, brand_id, job_id) -> str:
    from tests.markets.generation.conftest import job_path

    return job_path(org_id, brand_id, job_id)


def until(predicate, what: str) -> None:
    """Wait for another thread to reach a state (a synchronisation, not a time bound)."""
    event = threading.Event()
    for _ in range(600):
        if predicate():
            return
        event.wait(0.05)
    raise AssertionError(f"never: {what}")


@pytest.fixture
def looks(monkeypatch):
    """How many times waiting polls read the job."""
    count = []
    original = apis.job_get_for_caller

    def counted(**kwargs):
        count.append(kwargs["job_id"])
        return original(**kwargs)

    monkeypatch.setattr(apis, "job_get_for_caller", counted)
    return count


@pytest.fixture
def listening(transactional_db):
    """The process's listener, listening before the test's waiters start (so they never re-read at an interval)."""
    listener._start()
    until(listener.listening.is_set, "the listener listens")
    return listener


def wait_poll(api, tenants, job, *, wait, etag=None):
    headers = {"If-None-Match": etag} if etag else {}
    path = apis_path(tenants.org.id, tenants.brand.id, job.id) + f"?wait={wait}"
    return api.client.get(path, headers={"Authorization": f"Bearer {api.token}", **headers})


def test_a_wait_without_an_etag_answers_the_job_at_once(tenants, api, looks):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)

    response = wait_poll(api, tenants, job, wait=25)

    assert response.status_code == 200
    assert response.json()["status"] == "IN_PROGRESS"
    assert len(looks) == 1
    assert listener.connects == 0  # nothing waited, so nothing listened


def test_a_wait_with_an_older_etag_answers_the_new_body_at_once(tenants, api, looks):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    first = api.poll(tenants.org.id, tenants.brand.id, job.id)
    job.phase = "generating"
    job.status = "COMPLETED"
    job.result = {"promptCount": 1, "projectId": "p", "published": True, "verdict": "ship"}
    job.save()

    response = wait_poll(api, tenants, job, wait=25, etag=first["ETag"])

    assert response.status_code == 200
    assert response.json()["status"] == "COMPLETED"
    assert response["ETag"] != first["ETag"]
    assert len(looks) == 2  # the plain poll, and the waiting poll's one look


def test_a_wait_that_ends_unchanged_answers_304_with_the_same_etag_and_retry_after(tenants, api, looks, listening):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    first = api.poll(tenants.org.id, tenants.brand.id, job.id)

    response = wait_poll(api, tenants, job, wait=1, etag=first["ETag"])

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == first["ETag"]
    assert response["Retry-After"] == "15"
    assert response["Cache-Control"] == "private, no-cache"
    assert len(looks) == 3  # the plain poll; the wait's first look, and its last when the wait ended


def test_a_caller_who_may_not_see_the_job_gets_the_same_404_at_once_without_waiting(tenants, api, bearer, looks):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    stranger = Api(bearer(user_id="stranger", org_ids=["OTHER00000000000000000@AdobeOrg"]))
    absent = type("Absent", (), {"id": uuid.uuid4()})
    looks.clear()

    foreign = wait_poll(stranger, tenants, job, wait=25, etag=etag)
    missing = wait_poll(api, tenants, absent, wait=25, etag=etag)

    assert foreign.status_code == missing.status_code == 404
    assert foreign.content == missing.content == missing_job_404(api, tenants)
    assert len(looks) == 3  # one look each, then the answer: no wait, no re-read
    assert listener.waiters() == 0


@pytest.mark.parametrize("wait", ["26", "-1", "1.5", "soon", "²", "1" + "0" * 4400])
def test_a_wait_out_of_range_is_a_400_naming_the_parameter(tenants, api, wait):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)

    response = api.client.get(
        apis_path(tenants.org.id, tenants.brand.id, job.id) + f"?wait={wait}",
        headers={"Authorization": f"Bearer {api.token}"},
    )

    assert response.status_code == 400
    body = response.json()
    assert body["errors"] == [
        {
            "parameter": "wait",
            "code": "invalid_wait",
            "message": "wait must be a whole number of seconds from 0 to 25.",
        }
    ]


def test_without_a_listener_a_waiting_poll_re_reads_at_an_interval_and_sees_the_change(
    tenants, api, settings, monkeypatch
):
    # What `make run` does on SQLite: nothing notifies, the wait re-reads every POLL_WAIT_INTERVAL_SECONDS.
    monkeypatch.setattr(type(listener), "enabled", property(lambda self: False))
    settings.POLL_WAIT_INTERVAL_SECONDS = 0.05
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiter = Waiter(api, tenants, job, wait=25, etag=etag)
    waiter.start()
    until(lambda: listener.waiters() == 1, "the poll waits")

    Changer(job.id).commit()
    waiter.join(timeout=60)

    assert waiter.response.status_code == 200
    assert waiter.response.json()["status"] == "COMPLETED"
    assert listener.connects == 0


def test_a_waiter_is_woken_by_a_change_another_process_commits_and_never_before_the_commit(
    tenants, api, looks, listening
):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    events: list[str] = []
    waiter = Waiter(api, tenants, job, wait=25, etag=etag, events=events)
    waiter.start()
    until(lambda: listener.waiters() == 1 and len(looks) == 2, "the poll waits")
    notified = listener.notifications

    changer = Changer(job.id)  # updated, not committed
    events.append("updated")
    threading.Event().wait(0.5)  # a chance to answer early, which it must not take
    assert listener.notifications == notified  # an uncommitted change notifies nobody
    events.append("committing")
    changer.commit()
    waiter.join(timeout=60)

    assert events == ["updated", "committing", "answered"]
    assert waiter.response.status_code == 200
    body = json.loads(waiter.response.content)
    assert body["status"] == "COMPLETED"
    assert body["result"] == {"promptCount": 3, "projectId": "p-1", "published": True, "verdict": "ship"}
    assert waiter.response["ETag"] != etag
    # The plain poll, the wait's first look, and one re-read when the commit's NOTIFY woke it: no interval reads.
    assert len(looks) == 3
    assert listener.notifications == notified + 1


def test_many_waiters_on_one_job_are_all_woken_by_one_commit(tenants, api, looks, listening):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiters = [Waiter(api, tenants, job, wait=25, etag=etag) for _ in range(5)]
    for waiter in waiters:
        waiter.start()
    until(lambda: listener.waiters() == 5 and len(looks) == 6, "the polls wait")

    Changer(job.id).commit()
    for waiter in waiters:
        waiter.join(timeout=60)

    assert [w.response.status_code for w in waiters] == [200] * 5
    assert {w.response["ETag"] for w in waiters} != {etag}
    assert len(looks) == 11


def test_a_dropped_listener_connection_loses_no_wake_up(tenants, api, settings, looks, monkeypatch, listening):
    # No interval re-read to fall back on: only the reconnect's wake-up can deliver the change.
    settings.POLL_WAIT_INTERVAL_SECONDS = 600
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiter = Waiter(api, tenants, job, wait=25, etag=etag)
    waiter.start()
    until(lambda: listener.waiters() == 1 and len(looks) == 2, "the poll waits")
    reconnecting, release = threading.Event(), threading.Event()
    connect = listener._connect

    def held_connect():
        reconnecting.set()
        release.wait(60)
        return connect()

    monkeypatch.setattr(listener, "_connect", held_connect)
    notified = listener.notifications

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s AND datname = %s",
            [APPLICATION_NAME, connection.settings_dict["NAME"]],
        )
        assert cursor.fetchall() == [(True,)]
    until(reconnecting.is_set, "the listener reconnects")
    Changer(job.id).commit()  # committed while nobody listens: its NOTIFY reaches no one
    release.set()
    waiter.join(timeout=60)

    assert waiter.response.status_code == 200
    assert waiter.response.json()["status"] == "COMPLETED"
    assert listener.connects == 2
    assert listener.notifications == notified  # the change's NOTIFY was lost; the reconnect's re-read found it


def phase_change(job_id, phase: str) -> None:
    """A progress-only change, committed by another process."""
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        conn.execute("UPDATE async_jobs SET phase = %s, updated_at = now() WHERE id = %s", (phase, str(job_id)))


def test_a_change_of_progress_alone_answers_after_the_settle_with_the_new_phase(tenants, api, settings, listening):
    settings.POLL_WAIT_SETTLE_SECONDS = 0.05
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="queued")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiter = Waiter(api, tenants, job, wait=25, etag=etag)
    waiter.start()
    until(lambda: listener.waiters() == 1, "the poll waits")

    phase_change(job.id, "generating")
    waiter.join(timeout=60)

    assert waiter.response.status_code == 200
    body = json.loads(waiter.response.content)
    assert (body["status"], body["progress"]["phase"]) == ("IN_PROGRESS", "generating")


def test_the_last_phases_and_the_end_reach_a_waiting_poll_as_one_answer(tenants, api, settings, looks, listening):
    # However long the settle, the end answers at once: the phases before it ride in the same answer.
    settings.POLL_WAIT_SETTLE_SECONDS = 600
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generated")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiter = Waiter(api, tenants, job, wait=25, etag=etag)
    waiter.start()
    until(lambda: listener.waiters() == 1 and len(looks) == 2, "the poll waits")

    phase_change(job.id, "written")
    until(lambda: len(looks) == 3, "the poll re-read the new phase")
    assert waiter.is_alive()  # progress alone: still settling
    Changer(job.id).commit()
    waiter.join(timeout=60)

    assert waiter.response.status_code == 200
    assert json.loads(waiter.response.content)["status"] == "COMPLETED"
    assert len(looks) == 4


def test_each_api_process_has_a_thread_for_every_waiter_it_may_hold_beside_the_ordinary_ones(settings):
    from gunicorn.util import load_class
    from gunicorn.workers.gthread import ThreadWorker

    from serenity import gunicorn

    assert issubclass(load_class(gunicorn.worker_class), ThreadWorker)
    assert gunicorn.threads == 8 + settings.POLL_WAIT_MAX_WAITERS
    assert gunicorn.workers * settings.POLL_WAIT_MAX_WAITERS >= 1000


def test_a_waiter_beyond_the_process_s_share_answers_at_once(tenants, api, settings, looks):
    settings.POLL_WAIT_MAX_WAITERS = 0
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]

    response = wait_poll(api, tenants, job, wait=25, etag=etag)

    assert response.status_code == 304
    assert response["Retry-After"] == "15"
    assert len(looks) == 2
    assert listener.connects == 0


def test_a_waiting_poll_holds_no_database_connection_while_it_sleeps(tenants, api, settings, monkeypatch, listening):
    from jobs.job_changes import Watch

    held: list[bool] = []
    sleep = Watch.wait

    def observed(self, timeout):
        held.append(connections["default"].connection is not None)  # this thread's connection, if it kept one
        return sleep(self, timeout)

    monkeypatch.setattr(Watch, "wait", observed)
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site)
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiter = Waiter(api, tenants, job, wait=25, etag=etag)
    waiter.start()
    until(lambda: len(held) == 1, "the poll sleeps")

    Changer(job.id).commit()
    waiter.join(timeout=60)

    assert waiter.response.status_code == 200
    assert held == [False]


@pytest.fixture
def stopped():
    """The process told to stop (a gunicorn worker's SIGTERM), running again after the test."""
    from serenity import stopping

    yield stopping.begin
    stopping.reset()


def test_a_waiting_poll_answers_what_it_last_read_when_the_process_is_told_to_stop(
    tenants, api, looks, listening, stopped
):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    waiter = Waiter(api, tenants, job, wait=25, etag=etag)
    waiter.start()
    until(lambda: listener.waiters() == 1 and len(looks) == 2, "the poll waits")

    stopped()
    waiter.join(timeout=60)

    assert not waiter.is_alive()
    assert waiter.response.status_code == 304
    assert waiter.response["ETag"] == etag and waiter.response["Retry-After"] == "15"
    assert len(looks) == 3  # the plain poll; the wait's first look, and the look it was woken to
    assert listener.waiters() == 0


def test_a_waiting_poll_that_arrives_while_the_process_stops_answers_at_once_as_a_plain_poll(
    tenants, api, looks, stopped
):
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    stopped()

    response = wait_poll(api, tenants, job, wait=25, etag=etag)

    assert response.status_code == 304 and response["ETag"] == etag
    assert len(looks) == 2  # one look each: it never waited
    assert listener.connects == 0


class Poll(threading.Thread):
    """One waiting poll of any caller on any job, in a thread of its own; `done` once it has answered."""

    def __init__(self, token: str, job, *, etag: str, wait: int = 25):
        super().__init__(daemon=True)
        self.token, self.path, self.etag = token, apis_path(job.organization_id, job.brand_id, job.id), etag
        self.wait, self.response = wait, None

    def run(self):
        try:
            self.response = Client().get(
                self.path + f"?wait={self.wait}",
                headers={"Authorization": f"Bearer {self.token}", "If-None-Match": self.etag},
            )
        finally:
            connections.close_all()


def start_polls(token, job, etag, count) -> list[Poll]:
    polls = [Poll(token, job, etag=etag) for _ in range(count)]
    for poll in polls:
        poll.start()
    return polls


def answered(polls) -> list[Poll]:
    return [poll for poll in polls if poll.response is not None]


def test_callers_over_their_share_of_waits_cannot_make_another_tenants_wait_answer_early(
    tenants, api, bearer, settings, listening
):
    # A process of 4 waits; a user may hold 2 of them, an organization 3.
    settings.POLL_WAIT_MAX_WAITERS = 4
    settings.POLL_WAIT_MAX_WAITERS_PER_USER = 2
    settings.POLL_WAIT_MAX_WAITERS_PER_ORG = 3
    job = make_job(org=tenants.org, brand=tenants.brand, site=tenants.site, phase="generating")
    etag = api.poll(tenants.org.id, tenants.brand.id, job.id)["ETag"]
    colleague = bearer(user_id="colleague-user-id", org_ids=[tenants.org.ims_org_id])
    other_token = bearer(user_id="other-user-id", org_ids=[tenants.other_org.ims_org_id])
    other_job = make_job(org=tenants.other_org, brand=tenants.other_brand, site=None, user_id="other-user-id")
    other_etag = Api(other_token).poll(tenants.other_org.id, tenants.other_brand.id, other_job.id)["ETag"]

    # One user asks for 6 waits, then a colleague of the same organization for 6: all that fits the process (4).
    flood = start_polls(api.token, job, etag, 6)
    until(lambda: len(answered(flood)) + listener.waiters() == 6, "the user's polls wait or answer")
    flood += start_polls(colleague, job, etag, 6)
    until(lambda: len(answered(flood)) + listener.waiters() == 12, "the colleague's polls wait or answer")
    held = listener.waiters()
    # Another tenant's own wait, while the first organization's users keep asking.
    other = Poll(other_token, other_job, etag=other_etag)
    other.start()
    until(lambda: other.response is not None or listener.waiters() == held + 1, "the other tenant's poll")
    Changer(other_job.id).commit()
    other.join(timeout=60)

    # It waited and was woken by its job's change: the flood did not turn it into a plain poll.
    assert other.response.status_code == 200, other.response.status_code
    assert json.loads(other.response.content)["status"] == "COMPLETED"
    # The first organization holds its share (the user 2, the colleague the organization's third); every wait
    # beyond it answered at once as a plain poll, 304 with the same ETag.
    assert held == 3
    early = answered(flood)
    assert len(early) == 9 and {(p.response.status_code, p.response["ETag"]) for p in early} == {(304, etag)}
    assert waiting.shares.held("user", REQUESTER) == 2
    assert waiting.shares.held("user", "colleague-user-id") == 1
    assert waiting.shares.held("org", str(tenants.org.id)) == 3
    listener.wake_all()  # the held waits re-read (nothing changed) and go on to their end; none is left behind
    Changer(job.id).commit()
    for poll in flood:
        poll.join(timeout=60)
    assert [p.response.status_code for p in flood].count(200) == 3
    assert waiting.shares.held("org", str(tenants.org.id)) == 0 and waiting.shares.held("user", REQUESTER) == 0
