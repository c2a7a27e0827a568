"""Statements compiled once per shape (serenity/compiled.py): every call sends what the ORM would have sent for its
own values, a shape it cannot prove is left to the ORM, and a statement reused across calls changes the rows the
call names and no other."""

import threading
import uuid
from datetime import timedelta

from django.db import connection
from django.db.models import F
from django.utils import timezone

from jobs.models import AsyncJob, JobEvent
from serenity.compiled import Compiled, CompiledRead, insert_sql, update_sql
from tests.jobs.factories import AsyncJobFactory


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
