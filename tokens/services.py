"""Promise grants: take in a job's credential, store it encrypted, rotate it, end it.

A promise token has exactly one owner. IMS rotates it on every exchange (the presented token dies), so a
token can be exchanged once and belongs to exactly one job's grant; the grant's unique fingerprint makes
the database refuse a second owner. Callers own the transactions around grant writes (a grant is written
with its job, in the same unit) and make every network call here outside them.
"""

import logging
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from serenity import metrics
from serenity.clients.http import ClientError, TransientError
from serenity.compiled import Compiled, CompiledRead, as_uuid, delete_sql, update_sql
from serenity.db import DISCONNECTED, release_connection, retry_once_on_disconnect
from tokens import crypto
from tokens.clients import ims
from tokens.fingerprints import token_fingerprint
from tokens.models import PromiseGrant
from tokens.pairs import ClientPair, get_pair
from tokens.types import InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)


class TokenAlreadyGranted(InvalidPromiseToken):
    """The token is already held by another job's grant: a token has one owner."""


@dataclass(frozen=True)
class LoadedGrant:
    pair: ClientPair
    token: PromiseToken
    fingerprint: str


# --- Taking a credential in -------------------------------------------------------------------------------


def promise_mint(*, bearer: str, pair: ClientPair) -> PromiseToken:
    """Mint a promise token from the caller's bearer. Network call: never inside a transaction.

    A mint whose answer was lost (IMS may have minted a live token we never saw) is logged and counted
    (`PromiseMintAnswerLost`); nothing is stored. Raises the IMS client's errors.
    """
    try:
        return ims.mint(bearer=bearer, pair=pair)
    except TransientError as exc:
        if exc.maybe_processed:
            log.warning(
                "promise mint answer lost; a token may be live at IMS with no owner",
                extra={"pair": pair.name, "reason": str(exc)},
            )
            metrics.emit(PromiseMintAnswerLost=(1, metrics.COUNT))
        raise


# --- The grant --------------------------------------------------------------------------------------------


def grant_store(*, job_id: UUID | str, pair: ClientPair, token: PromiseToken) -> PromiseGrant:
    """Create or replace the job's grant. Runs inside the caller's transaction.

    Raises InvalidPromiseToken for an untyped token and TokenAlreadyGranted when another job's grant holds
    the same token (the caller's transaction stays usable: the attempt runs in a savepoint).
    """
    if not isinstance(token, PromiseToken):
        raise InvalidPromiseToken("a grant stores typed promise tokens only")
    now = timezone.now()
    try:
        with transaction.atomic():
            grant, _ = PromiseGrant.objects.update_or_create(
                job_id=job_id,
                defaults={
                    "pair": pair.name,
                    "ciphertext": crypto.seal(token),
                    "fingerprint": token_fingerprint(token.promise_token),
                    "expires_at": now + timedelta(seconds=token.expires_in),
                    "updated_at": now,
                    "rotations": 0,
                },
            )
    except IntegrityError:
        raise TokenAlreadyGranted("this promise token already belongs to another job") from None
    return grant


def grant_load(job_id: UUID | str) -> LoadedGrant | None:
    """The job's pair, token and token fingerprint; None when it has no grant, or one no configured key
    can open (logged: such a grant can never be used, the job needs re-authorisation)."""
    row = _GRANT.first(job_id=as_uuid(job_id))
    if row is None:
        return None
    pair, ciphertext, fingerprint = row
    try:
        token = crypto.unseal(ciphertext)
    except (crypto.InvalidToken, InvalidPromiseToken):
        log.error("stored grant cannot be opened", extra={"job_id": str(job_id)})
        return None
    return LoadedGrant(pair=get_pair(pair), token=token, fingerprint=fingerprint)


# A delivery reads its grant at its IMS exchange: compiled once (serenity/compiled.py).
_GRANT = CompiledRead(
    lambda job_id: PromiseGrant.objects.filter(job_id=job_id).values_list("pair", "ciphertext", "fingerprint")[:1]
)


def grant_exists(job_id: UUID | str) -> bool:
    return PromiseGrant.objects.filter(job_id=job_id).exists()


def grant_rotate(*, job_id: UUID | str, expect_fingerprint: str, token: PromiseToken) -> bool:
    """Replace the stored token after an exchange rotated it, only if the grant still holds the token
    that was exchanged (compare-and-swap on its fingerprint). True when stored: now, or already (a retry of
    a rotation that committed but whose answer was lost finds the grant holding `token`, which IMS issued
    for this exchange alone). Callers also fence this on their lease, in the same transaction."""
    now = timezone.now()
    stored = _ROTATE.execute(
        job_id=as_uuid(job_id),
        expect_fingerprint=expect_fingerprint,
        ciphertext=crypto.seal(token),
        fingerprint=token_fingerprint(token.promise_token),
        expires_at=now + timedelta(seconds=token.expires_in),
        now=now,
    )
    return stored == 1 or grant_holds(job_id, token)


# Every delivery's IMS exchange stores the token it rotated to: compiled once (serenity/compiled.py).
_ROTATE = Compiled(
    lambda job_id, expect_fingerprint, ciphertext, fingerprint, expires_at, now: update_sql(
        PromiseGrant.objects.filter(job_id=job_id, fingerprint=expect_fingerprint),
        ciphertext=ciphertext,
        fingerprint=fingerprint,
        expires_at=expires_at,
        updated_at=now,
        rotations=F("rotations") + 1,
    )
)


def grant_holds(job_id: UUID | str, token: PromiseToken) -> bool:
    """Whether the job's grant holds this very token (by its fingerprint)."""
    return PromiseGrant.objects.filter(job_id=job_id, fingerprint=token_fingerprint(token.promise_token)).exists()


def grant_holds_or_invalidate(*, job_id: UUID | str, pair: ClientPair, token: PromiseToken) -> bool:
    """After the write that was to give `token` its owner failed (a database connection cut mid-write, a
    failover): keep the token if the job's grant holds it after all (a commit whose answer was lost), else
    invalidate it at IMS at once, best effort. The product knows this token's value, and it alone can end it: left
    live it would be a credential nobody owns until it expires. Read on a fresh connection, tried once more
    when that one is dead too; when the database cannot tell, the token is invalidated (fail closed: a job whose
    grant held it after all is refused at its exchange and ends NEEDS_REAUTH). True when the grant holds it.
    Never inside a transaction (a network call follows)."""
    try:
        release_connection()  # the one the failed write met is likely dead: read on a fresh one
        held = retry_once_on_disconnect(grant_holds, job_id, token)
    except DISCONNECTED:
        log.warning("promise grant unreadable; the token it may hold is invalidated", extra={"job_id": str(job_id)})
        held = False
    if not held:
        promise_invalidate_quietly(pair=pair, token=token, job_id=job_id)
    return held


@dataclass(frozen=True)
class TakenGrant:
    """A grant already deleted, whose token is still to be invalidated at IMS (after the commit)."""

    job_id: UUID | str
    loaded: LoadedGrant | None

    def invalidate(self) -> None:
        if self.loaded is not None:
            promise_invalidate_quietly(pair=self.loaded.pair, token=self.loaded.token, job_id=self.job_id)


def grant_take(job_id: UUID | str) -> TakenGrant:
    """Delete the job's grant inside the caller's transaction and keep its token for `invalidate()`,
    which the caller runs after commit (a network call must not hold the transaction open). The one way
    a grant ends."""
    taken = TakenGrant(job_id=job_id, loaded=grant_load(job_id))
    _DELETE.execute(job_id=as_uuid(job_id))
    return taken


# Every job's ending deletes its grant: compiled once (serenity/compiled.py). What `QuerySet.delete()` sends for it:
# no row points to a grant and no signal watches one, so the ORM deletes it in this one statement too.
_DELETE = Compiled(lambda job_id: delete_sql(PromiseGrant.objects.filter(job_id=job_id)))


# --- IMS calls on a stored credential -----------------------------------------------------------------------


def promise_exchange(*, pair: ClientPair, token: PromiseToken) -> ims.Exchanged:
    """Exchange at IMS (rotates the token; never retried once it may have reached IMS). Raises
    NeedsReauth, InvalidPromiseToken, TransientError (`maybe_processed`), PermanentError."""
    return ims.exchange(promise=token, pair=pair)


def promise_invalidate_quietly(*, pair: ClientPair, token: PromiseToken, job_id: UUID | str | None = None) -> bool:
    """Best-effort invalidation at IMS: True when IMS confirmed, False (logged) otherwise."""
    try:
        ims.invalidate(promise=token, pair=pair)
        return True
    except ClientError as exc:
        log.warning(
            "promise token invalidation failed",
            extra={"job_id": str(job_id) if job_id else None, "reason": type(exc).__name__, "status": exc.status},
        )
        return False
