"""Statements compiled once per shape (serenity/compiled.py): every call sends what the ORM would have sent for its
own values, a shape it cannot prove is left to the ORM, and a statement reused across calls changes the rows the
call names and no other."""

import threading
import uuid
from datetime import timedelta

from django.db import connection
from django.db.models import F
from django.utils import timezone

from jobs import states
from jobs.models import AsyncJob, JobEvent, JobStatus
from serenity.compiled import Compiled, CompiledRead, delete_sql, insert_sql, update_sql
from tests.jobs.factories import AsyncJobFactory
from tokens.models import PromiseGrant


def _lease_update(job_id, token, now, phase):
    return update_sql(
        AsyncJob.objects.filter(id=job_id, lease_token=token, lease_expires_at__gt=now),
        phase=phase,
        updated_at=now,
        attempts=F("attempts") + 1,
    )


def test_each_call_sends_what_the_orm_would_send_for_its_own_values(db):
    statement = Compiled(_lease_update)
    calls = [
        {"job_id": uuid.uuid4(), "token": uuid.uuid4(), "now": timezone.now() + timedelta(seconds=i), "phase": f"p{i}"}
        for i in range(3)
    ]
    calls.append({**calls[0], "token": None})  # a None is a shape of its own: `IS NULL`
    for values in calls:
        assert statement.statement(**values) == (lambda sql, params: (sql, list(params)))(*_lease_update(**values))
    assert len(statement._templates) == 2
    assert all(template is not None for template in statement._templates.values()) or connection.vendor != "postgresql"


def test_a_parameter_it_cannot_prove_leaves_the_shape_to_the_orm(db):
    # A job id given as text is converted by the ORM (to a UUID on PostgreSQL): the parameter is not the value, so
    # substituting the next call's text would send the wrong thing. That shape compiles on every call.
    statement = Compiled(_lease_update)
    now = timezone.now()
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    statement.statement(job_id=first, token=uuid.uuid4(), now=now, phase="a")
    assert list(statement._templates.values()) == [None]
    token = uuid.uuid4()
    sql, params = statement.statement(job_id=second, token=token, now=now, phase="a")
    expected_sql, expected_params = _lease_update(job_id=second, token=token, now=now, phase="a")
    assert (sql, params) == (expected_sql, list(expected_params)) and uuid.UUID(first) not in params


def test_a_reused_statement_changes_the_rows_its_call_names_and_no_other(db):
    now = timezone.now()
    jobs = [AsyncJobFactory(lease_token=uuid.uuid4(), lease_expires_at=now + timedelta(minutes=5)) for _ in range(4)]
    statement = Compiled(_lease_update)

    changed = [
        statement.execute(job_id=job.id, token=job.lease_token, now=now, phase=f"phase-{i}")
        for i, job in enumerate(jobs[:3])
    ]
    wrong_token = statement.execute(job_id=jobs[3].id, token=uuid.uuid4(), now=now, phase="never")

    assert changed == [1, 1, 1] and wrong_token == 0
    phases = {job.id: job.phase for job in AsyncJob.objects.filter(id__in=[j.id for j in jobs])}
    assert [phases[job.id] for job in jobs] == ["phase-0", "phase-1", "phase-2", jobs[3].phase]


def test_an_insert_writes_each_calls_row(db):
    job = AsyncJobFactory()
    statement = Compiled(lambda **values: insert_sql(JobEvent, **values))
    at = timezone.now()
    for i in range(3):
        statement.execute(job_id=job.id, kind="checkpoint", actor=f"w{i}", detail=f"d{i}", trace_id="", at=at)
    rows = list(JobEvent.objects.filter(job_id=job.id).order_by("actor").values_list("actor", "detail", "at"))
    assert rows == [(f"w{i}", f"d{i}", at) for i in range(3)]


def test_threads_learning_the_same_shape_at_once_each_send_their_own_values(transactional_db):
    now = timezone.now()
    jobs = [AsyncJobFactory(lease_token=uuid.uuid4(), lease_expires_at=now + timedelta(minutes=5)) for _ in range(8)]
    statement = Compiled(_lease_update)
    start, changed = threading.Barrier(len(jobs)), []

    def run(i, job):
        start.wait()
        try:
            changed.append(statement.execute(job_id=job.id, token=job.lease_token, now=now, phase=f"t{i}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert changed == [1] * len(jobs)
    phases = dict(AsyncJob.objects.values_list("id", "phase"))
    assert [phases[job.id] for job in jobs] == [f"t{i}" for i in range(len(jobs))]


def test_a_compiled_read_answers_what_the_querysets_first_row_would_be(db):
    jobs = [AsyncJobFactory(params={"marketId": str(uuid.uuid4()), "n": i}, checkpoints={"phase": i}) for i in range(3)]
    read = CompiledRead(lambda job_id: AsyncJob.objects.filter(id=job_id)[:1])
    columns = CompiledRead(lambda job_id: AsyncJob.objects.filter(id=job_id).values_list("status", "params")[:1])

    for job in jobs:
        got, expected = read.first(job_id=job.id), AsyncJob.objects.get(id=job.id)
        assert {f.attname: getattr(got, f.attname) for f in AsyncJob._meta.concrete_fields} == {
            f.attname: getattr(expected, f.attname) for f in AsyncJob._meta.concrete_fields
        }
        assert columns.first(job_id=job.id) == (expected.status, expected.params)
    assert read.first(job_id=uuid.uuid4()) is None and columns.first(job_id=uuid.uuid4()) is None


def _sent(sql, params):
    """A statement as sent, JSON parameters as what they wrap and how (psycopg's wrappers compare by identity)."""
    return sql, [(type(p), p.obj, p.dumps) if hasattr(p, "obj") and hasattr(p, "dumps") else p for p in params]


def _ending(job_id, token, now, result, error):
    return update_sql(
        AsyncJob.objects.filter(id=job_id, status__in=("IN_PROGRESS",), lease_token=token),
        status="COMPLETED",
        updated_at=now,
        result=result,
        error=error,
        lease_token=None,
    )


def test_a_json_value_is_sent_wrapped_as_the_orm_wraps_it_for_each_call(db):
    statement = Compiled(_ending)
    now = timezone.now()
    calls = [
        {
            "job_id": uuid.uuid4(),
            "token": uuid.uuid4(),
            "now": now,
            "result": {"n": i, "items": [i, "x"]},
            "error": None,
        }
        for i in range(3)
    ]
    calls.append({**calls[0], "result": None, "error": {"code": "E", "message": "m"}})  # None: a shape of its own
    calls.append({**calls[1], "result": [1, 2, 3]})  # a JSON list
    for values in calls:
        assert _sent(*statement.statement(**values)) == _sent(*_ending(**values))
    assert all(template is not None for template in statement._templates.values()) or connection.vendor != "postgresql"


def test_a_compiled_ending_stores_each_calls_json_as_the_orm_does(db):
    now = timezone.now()
    jobs = [AsyncJobFactory(lease_token=uuid.uuid4(), lease_expires_at=now + timedelta(minutes=5)) for _ in range(4)]
    for i, job in enumerate(jobs[:3]):
        assert states.transition(
            job.id, to=JobStatus.COMPLETED, lease_token=job.lease_token, event="completed", result={"n": i}, error=None
        )
    assert not states.transition(
        jobs[3].id, to=JobStatus.COMPLETED, lease_token=uuid.uuid4(), event="completed", result={"n": 3}, error=None
    )
    orm = AsyncJobFactory()
    AsyncJob.objects.filter(id=orm.id).update(result={"n": 0})

    rows = {j.id: j for j in AsyncJob.objects.filter(id__in=[j.id for j in [*jobs, orm]])}
    assert [(rows[j.id].status, rows[j.id].result, rows[j.id].lease_token) for j in jobs] == [
        ("COMPLETED", {"n": 0}, None),
        ("COMPLETED", {"n": 1}, None),
        ("COMPLETED", {"n": 2}, None),
        ("IN_PROGRESS", None, jobs[3].lease_token),
    ]
    assert rows[jobs[0].id].result == rows[orm.id].result  # the same JSON the ORM stores
    ending = [t for key, t in states._TRANSITION._templates.items() if ("result", dict, None) in key]
    assert ending and (all(t is not None for t in ending) or connection.vendor != "postgresql")


def _grant(job_id):
    return PromiseGrant.objects.create(
        job_id=job_id, pair="p", ciphertext="c", fingerprint=uuid.uuid4().hex, expires_at=timezone.now()
    )


def test_a_compiled_delete_sends_what_the_querysets_delete_sends_and_deletes_only_its_row(db):
    statement = Compiled(lambda job_id: delete_sql(PromiseGrant.objects.filter(job_id=job_id)))
    grants = [_grant(uuid.uuid4()) for _ in range(4)]
    sent = []

    def capture(execute, sql, params, many, context):
        sent.append((sql, list(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        PromiseGrant.objects.filter(job_id=grants[0].job_id).delete()
    assert len(sent) == 1  # the ORM deletes a grant in one statement: nothing points to it, no signal watches it
    assert statement.statement(job_id=grants[0].job_id) == sent[0]

    deleted = [statement.execute(job_id=g.job_id) for g in grants[1:3]]
    assert deleted == [1, 1] and statement.execute(job_id=uuid.uuid4()) == 0
    assert list(PromiseGrant.objects.values_list("job_id", flat=True)) == [grants[3].job_id]
    assert all(template is not None for template in statement._templates.values()) or connection.vendor != "postgresql"
