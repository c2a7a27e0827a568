"""What the IMS simulator does for each call: mint, exchange (rotating), validate and invalidate promise tokens.

Client ids and secrets come from settings.IMS_CLIENT_PAIRS, read on every call so a test's settings
override reaches the simulator. Every refusal raises `Refused`, which the view answers and ledgers; a
switch that loses an answer raises `AnswerLost` after the work was committed.
"""

import hmac
from datetime import timedelta

import jwt
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sandbox.ims import controls, keys, ledger
from sandbox.ims.models import PromiseRecord, PromiseState, Switch

PROMISE_TTL = 24 * 3600
ACCESS_TTL = 3600
PROMISE_TOKEN_TYPE = "promise_token"

# What an access token from each pair may do. Semrush writes need `semrush.write`, which only the
# Semrush pair's tokens carry; this is why a generation job requires that pair.
SCOPES = {"semrush": "openid,AdobeID,semrush.read,semrush.write"}
DEFAULT_SCOPE = "openid,AdobeID"

_ERRORS = {401: "invalid_token", 403: "unauthorized_client", 429: "rate_limited"}


class Refused(Exception):
    """A refusal: the HTTP status, the OAuth `error` code, and what the ledger records about it."""

    def __init__(self, status: int, error: str, reason: str, *, fingerprint="", pair="", user_id=""):
        super().__init__(reason)
        self.status, self.error, self.reason = status, error, reason
        self.fingerprint, self.pair, self.user_id = fingerprint, pair, user_id

    def body(self) -> dict:
        return {"error": self.error}


class AnswerLost(Exception):
    """The call was carried out and committed, and its answer is to be lost (an error status, or held
    back for `forced.stall_seconds` and then sent to a caller that has stopped waiting)."""

    def __init__(self, forced: controls.Forced, answer: dict, *, fingerprint="", pair="", user_id=""):
        super().__init__("answer lost")
        self.forced, self.answer = forced, answer
        self.fingerprint, self.pair, self.user_id = fingerprint, pair, user_id


def _forced(status: int, **context) -> Refused:
    error = _ERRORS.get(status, "server_error" if status >= 500 else "invalid_request")
    return Refused(status, error, "forced", **context)


def _client_pair(client_id: str, client_secret: str, *roles: str) -> str:
    """The name of the pair whose `<role>_client_id` is `client_id`, checking its secret. Raises Refused."""
    for name, pair in settings.IMS_CLIENT_PAIRS.items():
        for role in roles:
            if pair[f"{role}_client_id"] == client_id:
                if not hmac.compare_digest(pair[f"{role}_client_secret"].encode(), client_secret.encode()):
                    raise Refused(401, "invalid_client", "bad_client_secret", pair=name)
                return name
    raise Refused(401, "invalid_client", "unknown_client")


def _require(fields: dict, *names: str) -> None:
    missing = [n for n in names if not fields.get(n)]
    if missing:
        raise Refused(400, "invalid_request", "missing_" + "_".join(missing))


def mint(fields: dict) -> dict:
    """grant_type=promise_token_mint: a user bearer and an emitter client -> a new promise token."""
    _require(fields, "client_id", "client_secret", "definition_id", "user_token")
    pair_name = _client_pair(fields["client_id"], fields["client_secret"], "emitter")
    if fields["definition_id"] != settings.IMS_CLIENT_PAIRS[pair_name]["emitter_definition_id"]:
        raise Refused(400, "invalid_request", "unknown_definition", pair=pair_name)
    forced = controls.take(Switch.MINT)
    if forced is not None and not forced.loses_answer:
        raise _forced(forced.status, pair=pair_name)
    try:
        claims = keys.verify_token(fields["user_token"])
    except jwt.PyJWTError:
        raise Refused(401, "invalid_token", "bad_user_token", pair=pair_name) from None
    user_id, org_ids = claims.get("user_id"), claims.get("org_ids") or []
    if claims.get("type") == keys.PROMISE_TOKEN or not isinstance(user_id, str) or not user_id:
        raise Refused(401, "invalid_token", "not_a_user_token", pair=pair_name)

    token = keys.issue_promise_token(user_id=user_id, client_id=fields["client_id"], ttl=PROMISE_TTL)
    with transaction.atomic():
        PromiseRecord.objects.create(
            digest=ledger.digest(token),
            pair=pair_name,
            user_id=user_id,
            org_ids=list(org_ids),
            expires_at=timezone.now() + timedelta(seconds=PROMISE_TTL),
        )
        ledger.record(
            ledger.MINTED, operation="mint", fingerprint=ledger.fingerprint(token), pair=pair_name, user_id=user_id
        )
    answer = {"promise_token": token, "token_type": PROMISE_TOKEN_TYPE, "expires_in": PROMISE_TTL}
    if forced is not None:
        raise AnswerLost(forced, answer, fingerprint=ledger.digest(token), pair=pair_name, user_id=user_id)
    return answer


def exchange(fields: dict) -> dict:
    """grant_type=promise_token_exchange: a live promise token and the consumer client of the same pair
    -> an access token plus a rotated promise token; the presented token stops working."""
    _require(fields, "client_id", "client_secret", "promise_token")
    pair_name = _client_pair(fields["client_id"], fields["client_secret"], "consumer")
    presented = fields["promise_token"]
    digest = ledger.digest(presented)
    record = PromiseRecord.objects.filter(digest=digest).first()
    context = {"fingerprint": digest, "pair": pair_name, "user_id": record.user_id if record else ""}
    forced = controls.take(Switch.EXCHANGE)
    if forced is not None and not forced.loses_answer:
        raise _forced(forced.status, **context)
    if record is None:
        raise Refused(401, "invalid_token", "unknown_token", **context)
    if record.state != PromiseState.LIVE:
        raise Refused(401, "invalid_token", f"token_{record.state}", **context)
    if record.expires_at <= timezone.now():
        raise Refused(401, "invalid_token", "token_expired", **context)
    if record.pair != pair_name:
        raise Refused(403, "unauthorized_client", "wrong_pair", **context)

    rotated = keys.issue_promise_token(user_id=record.user_id, client_id=fields["client_id"], ttl=PROMISE_TTL)
    with transaction.atomic():
        # Conditional on `live`: of two concurrent exchanges of one token exactly one rotates it.
        won = PromiseRecord.objects.filter(pk=record.pk, state=PromiseState.LIVE).update(
            state=PromiseState.EXCHANGED, ended_at=timezone.now()
        )
        if won:
            PromiseRecord.objects.create(
                digest=ledger.digest(rotated),
                pair=record.pair,
                user_id=record.user_id,
                org_ids=record.org_ids,
                replaces=digest,
                expires_at=timezone.now() + timedelta(seconds=PROMISE_TTL),
            )
            ledger.record(
                ledger.EXCHANGED, operation="exchange", fingerprint=digest, pair=record.pair, user_id=record.user_id
            )
            ledger.record(
                ledger.ROTATED_TO,
                operation="exchange",
                fingerprint=ledger.digest(rotated),
                replaces=digest,
                pair=record.pair,
                user_id=record.user_id,
            )
    if not won:
        raise Refused(401, "invalid_token", "token_exchanged", **context)

    access = keys.issue_access_token(
        user_id=record.user_id,
        org_ids=record.org_ids,
        client_id=fields["client_id"],
        scope=SCOPES.get(record.pair, DEFAULT_SCOPE),
        ttl=ACCESS_TTL,
    )
    answer = {
        "access_token": access,
        "token_type": "bearer",
        "expires_in": ACCESS_TTL,
        "user_id": record.user_id,
        "promise": {"promise_token": rotated, "token_type": PROMISE_TOKEN_TYPE, "expires_in": PROMISE_TTL},
    }
    if forced is not None:
        raise AnswerLost(forced, answer, **context)
    return answer


def validate(fields: dict) -> dict:
    """Whether a promise token is live for the calling client's pair, and whose it is. Changes nothing.
    `{valid: true, user_id, expires_in}`, or `{valid: false, reason}` (unknown, ended, expired, other pair)."""
    _require(fields, "client_id", "client_secret", "type", "token")
    if fields["type"] != PROMISE_TOKEN_TYPE:
        raise Refused(400, "unsupported_token_type", "unsupported_token_type")
    pair_name = _client_pair(fields["client_id"], fields["client_secret"], "consumer", "emitter")
    record = PromiseRecord.objects.filter(digest=ledger.digest(fields["token"])).first()
    now = timezone.now()
    if record is None:
        return {"valid": False, "reason": "unknown_token"}
    if record.state != PromiseState.LIVE:
        return {"valid": False, "reason": f"token_{record.state}"}
    if record.expires_at <= now:
        return {"valid": False, "reason": "token_expired"}
    if record.pair != pair_name:
        return {"valid": False, "reason": "wrong_pair"}
    return {"valid": True, "user_id": record.user_id, "expires_in": int((record.expires_at - now).total_seconds())}


def invalidate(fields: dict) -> dict:
    """Invalidate a promise token with a client of its pair. Unknown or already dead tokens answer {} too."""
    _require(fields, "client_id", "client_secret", "token_type", "token")
    if fields["token_type"] != PROMISE_TOKEN_TYPE:
        raise Refused(400, "unsupported_token_type", "unsupported_token_type")
    pair_name = _client_pair(fields["client_id"], fields["client_secret"], "consumer", "emitter")
    digest = ledger.digest(fields["token"])
    record = PromiseRecord.objects.filter(digest=digest).first()
    if record is None:
        return {}
    if record.pair != pair_name:
        raise Refused(
            403, "unauthorized_client", "wrong_pair", fingerprint=digest, pair=pair_name, user_id=record.user_id
        )
    with transaction.atomic():
        changed = PromiseRecord.objects.filter(pk=record.pk, state=PromiseState.LIVE).update(
            state=PromiseState.INVALIDATED, ended_at=timezone.now()
        )
        if changed:
            ledger.record(
                ledger.INVALIDATED, operation="invalidate", fingerprint=digest, pair=record.pair, user_id=record.user_id
            )
    return {}
