"""Promise grants: obtain a job's credential, store it encrypted, rotate it, end it.

Callers own the transactions around grant writes (a grant is written with its job, in the same unit).
"""
import json
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import F
from django.utils import timezone

from serenity.clients.http import ClientError
from tokens import crypto
from tokens.clients import ims
from tokens.models import PromiseGrant
from tokens.pairs import ClientPair, get_pair
from tokens.types import AccessToken, InvalidPromiseToken, PromiseToken

log = logging.getLogger(__name__)

def promise_from_header(value: str) -> PromiseToken:
    """Type an `x-promise-token` header: the JSON object IMS gave the browser,
    `{"promise_token": …, "token_type": …, "expires_in": …}`. A bare token value is refused like any other
    untyped credential (SPEC §4.5). Raises InvalidPromiseToken."""
    value = (value or "").strip()
    if not value.startswith("{"):
        raise InvalidPromiseToken("x-promise-token must be the typed token object, not a bare value")
    try:
        return PromiseToken.parse(json.loads(value))
    except ValueError:
        raise InvalidPromiseToken("x-promise-token is not a valid typed token") from None


def promise_obtain(*, bearer: str, pair: ClientPair, forwarded: str | None) -> PromiseToken:
    """The forwarded token when the browser sent one, else a fresh one minted from the caller's bearer.

    Raises InvalidPromiseToken, or a client error from the mint.
    """
    if forwarded is not None:
        return promise_from_header(forwarded)
    return ims.mint(bearer=bearer, pair=pair)


def grant_store(*, job_id, pair: ClientPair, token: PromiseToken) -> PromiseGrant:
    """Create or replace the job's grant. Runs inside the caller's transaction."""
    if not isinstance(token, PromiseToken):
        raise InvalidPromiseToken("a grant stores typed promise tokens only")
    now = timezone.now()
    grant, _ = PromiseGrant.objects.update_or_create(
        job_id=job_id,
        defaults={
            "pair": pair.name,
            "ciphertext": crypto.seal(token),
            "expires_at": now + timedelta(seconds=token.expires_in),
            "updated_at": now,
            "rotations": 0,
        },
    )
    return grant


def grant_load(job_id) -> tuple[ClientPair, PromiseToken] | None:
    """The job's pair and token, or None when it has no grant."""
    grant = PromiseGrant.objects.filter(job_id=job_id).first()
    if grant is None:
        return None
    return get_pair(grant.pair), crypto.unseal(grant.ciphertext)


def grant_rotate(*, job_id, token: PromiseToken) -> int:
    """Replace the stored token after an exchange rotated it. Callers fence this on their lease."""
    now = timezone.now()
    return PromiseGrant.objects.filter(job_id=job_id).update(
        ciphertext=crypto.seal(token),
        expires_at=now + timedelta(seconds=token.expires_in),
        updated_at=now,
        rotations=F("rotations") + 1,
    )


def grant_delete(job_id) -> int:
    return PromiseGrant.objects.filter(job_id=job_id).delete()[0]


def promise_exchange(*, pair: ClientPair, token: PromiseToken) -> tuple[AccessToken, PromiseToken]:
    """Exchange at IMS. Raises NeedsReauth, InvalidPromiseToken, TransientError, PermanentError."""
    return ims.exchange(promise=token, pair=pair)


def promise_invalidate_quietly(*, pair: ClientPair, token: PromiseToken, job_id=None) -> bool:
    """Best-effort invalidation at IMS: True when IMS confirmed, False (logged) otherwise."""
    try:
        ims.invalidate(promise=token, pair=pair)
        return True
    except ClientError as exc:
        log.warning("promise token invalidation failed", extra={"job_id": str(job_id) if job_id else None,
                                                               "reason": type(exc).__name__, "status": exc.status})
        return False


def grant_load_quietly(job_id) -> tuple[ClientPair, PromiseToken] | None:
    """Like grant_load, but a grant no configured key can open counts as none (logged)."""
    try:
        return grant_load(job_id)
    except (crypto.InvalidToken, InvalidPromiseToken):
        log.error("stored grant cannot be opened", extra={"job_id": str(job_id)})
        return None


@dataclass(frozen=True)
class TakenGrant:
    """A grant already deleted, whose token is still to be invalidated at IMS (after the commit)."""

    job_id: object
    loaded: tuple[ClientPair, PromiseToken] | None

    def invalidate(self) -> None:
        if self.loaded is not None:
            pair, token = self.loaded
            promise_invalidate_quietly(pair=pair, token=token, job_id=self.job_id)


def grant_take(job_id) -> TakenGrant:
    """Delete the job's grant inside the caller's transaction and keep its token for `invalidate()`,
    which the caller runs after commit (a network call must not hold the transaction open)."""
    taken = TakenGrant(job_id=job_id, loaded=grant_load_quietly(job_id))
    grant_delete(job_id)
    return taken


def grant_end(job_id) -> None:
    """Delete the job's grant and invalidate its token at IMS (best effort). Safe to call twice."""
    grant_take(job_id).invalidate()
