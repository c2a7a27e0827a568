"""The soak's promise-token invariant (scripts/soak/invariants.py `unowned_tokens`), read from the IMS simulator's
own records written here: which live token a fault explains (it reached no one who could invalidate it) and which
is an orphan, a leak the product would answer for."""

import shutil
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from scripts.soak import Config, Soak
from scripts.soak.config import TIMEOUTS
from scripts.soak.model import Generation

USER = "SOAK0001ABCDEFUSER@AdobeID"


@pytest.fixture
def soak(db):
    soak = Soak(Config(seed=1, jobs=0, minutes=0, fault_every=1, database_url="postgres://unused/x"))
    soak.generations = [
        Generation(index=0, flow="create", drs_fault=None, regenerate=False, start_at=0, country="DE", user=USER)
    ]
    yield soak
    shutil.rmtree(soak.stack.var, ignore_errors=True)


def minted(at: float, user: str = USER):
    """A live promise token the IMS simulator minted for `user` at the wall time `at`."""
    from sandbox.ims.models import PromiseRecord

    made = datetime.fromtimestamp(at, UTC)
    return PromiseRecord.objects.create(
        digest=uuid.uuid4().hex * 2, pair="semrush", user_id=user, created_at=made, expires_at=made + timedelta(days=1)
    )


def api_killed(soak: Soak, at: float) -> None:
    """The soak's record of an API SIGKILL at the wall time `at` (a window of the API's own restarts)."""
    down = at - (time.time() - time.monotonic())
    soak.api_down.append([down, down + 1])


def test_a_token_minted_after_the_api_died_for_a_request_that_got_no_answer_is_explained_up_to_the_ims_timeout(soak):
    """The API sent the mint and was killed before IMS had finished it: IMS mints for a caller that is gone. Not
    later than the caller's own IMS timeout, though: a mint IMS finished after that is an orphan."""
    now = time.time()
    api_killed(soak, now - 20)
    soak.unanswered.append((USER, now - 20.2, now - 20))
    token = minted(now - 19.8)
    minted(now - 20 + TIMEOUTS["IMS_TIMEOUT_SECONDS"] + 0.5)

    orphans, explained = soak.unowned_tokens(held=0)

    assert explained == [
        f"token {token.fingerprint} of generation 0 (job None): a live promise token, minted for a request that got "
        "no answer (its API process was killed)"
    ]
    assert len(orphans) == 1


def test_a_token_minted_before_an_api_kill_for_a_user_whose_requests_were_all_answered_is_an_orphan(soak):
    """Whoever asked for it had its answer: a live token nobody holds is a leak, however near the kill."""
    now = time.time()
    api_killed(soak, now - 10)
    soak.unanswered.append(("SOAK0002OTHERUSER@AdobeID", now - 10.2, now - 10))
    minted(now - 10.1)

    orphans, explained = soak.unowned_tokens(held=0)

    assert len(orphans) == 1 and explained == []


def test_a_token_invalidated_just_after_the_ledger_was_first_read_is_not_an_orphan(soak, monkeypatch):
    """A job's end is committed before its token is invalidated at IMS: a read between the two sees the token
    live. The invariant reads again until the invalidation could have run its course."""
    from sandbox.ims.models import PromiseRecord, PromiseState

    token = minted(time.time() - 5)
    first_read = soak.unowned_tokens

    def then_the_invalidation_lands(held):
        found = first_read(held)
        PromiseRecord.objects.filter(pk=token.pk).update(state=PromiseState.INVALIDATED)
        return found

    monkeypatch.setattr(soak, "unowned_tokens", then_the_invalidation_lands)

    assert soak.settled_unowned_tokens(held=0) == ([], [])


def test_a_token_rotated_for_an_exchange_whose_answer_the_worker_never_had_is_explained_by_its_lost_rotation(soak):
    """IMS rotated the token, the worker's exchange timed out (no fault of the simulator's: its ledger records no
    lost answer), its next delivery presented the old token, refused, and the job ended naming a lost rotation.
    The same rotation in a job whose worker had the answer (its ending names no lost rotation) is an orphan."""
    from jobs import states
    from sandbox.ims import ledger
    from sandbox.ims.models import PromiseRecord
    from tests.jobs.factories import AsyncJobFactory

    other = "SOAK0002OTHERUSER@AdobeID"
    soak.generations.append(
        Generation(index=1, flow="create", drs_fault=None, regenerate=False, start_at=0, country="FR", user=other)
    )
    rotated = {}
    for g in soak.generations:
        job = AsyncJobFactory(status="COMPLETED", user_id=g.user)
        g.job = str(job.id)
        presented = minted(time.time() - 30, g.user)
        PromiseRecord.objects.filter(pk=presented.pk).update(state="exchanged")
        rotated[g.user] = PromiseRecord.objects.create(
            digest=uuid.uuid4().hex * 2,
            pair="semrush",
            user_id=g.user,
            replaces=presented.digest,
            expires_at=presented.expires_at,
        )
        ledger.record(ledger.REFUSED, operation="exchange", fingerprint=presented.digest, reason="token_exchanged")
    lost_rotation = soak.generations[0].job
    states.record(lost_rotation, "failed", detail="NEEDS_REAUTH: IMS refused the promise token: lost rotation (…)")
    states.record(soak.generations[1].job, "failed", detail="NEEDS_REAUTH: IMS refused the promise token.")

    orphans, explained = soak.unowned_tokens(held=0)

    assert explained == [
        f"token {rotated[USER].fingerprint} of generation 0 (job {lost_rotation}): a live promise token, rotated by "
        "an exchange whose answer its worker never had (its own timeout): a lost rotation"
    ]
    assert len(orphans) == 1 and orphans[0].startswith(f"token {rotated[other].fingerprint} of generation 1")
