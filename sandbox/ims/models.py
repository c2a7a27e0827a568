"""State of the IMS simulator, kept in the database so the API, workers and commands share it."""

from django.db import models
from django.utils import timezone


class SigningKey(models.Model):
    """The simulator's RSA signing key. One row (`name="signing"`), created on first need."""

    name = models.CharField(max_length=16, unique=True)
    kid = models.CharField(max_length=64, unique=True, help_text="RFC 7638 thumbprint of the public key")
    private_pem = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"signing key {self.kid}"


class PromiseState(models.TextChoices):
    LIVE = "live"
    EXCHANGED = "exchanged"
    INVALIDATED = "invalidated"


class PromiseRecord(models.Model):
    """A promise token the simulator issued, known by the SHA-256 of its value (never the value)."""

    digest = models.CharField(max_length=64, unique=True)
    pair = models.CharField(max_length=32)
    user_id = models.CharField(max_length=255)
    org_ids = models.JSONField(default=list)
    state = models.CharField(max_length=16, choices=PromiseState.choices, default=PromiseState.LIVE)
    replaces = models.CharField(max_length=64, blank=True, help_text="Digest of the token this one was rotated from")
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"promise {self.fingerprint} ({self.pair}, {self.state})"

    @property
    def fingerprint(self) -> str:
        return self.digest[:16]


class EventKind(models.TextChoices):
    MINTED = "minted"
    EXCHANGED = "exchanged"
    ROTATED_TO = "rotated_to"
    INVALIDATED = "invalidated"
    REFUSED = "refused"
    ANSWER_LOST = "answer_lost"


class LedgerEvent(models.Model):
    """One thing that happened to a promise token (or to a request for one). Fingerprints only."""

    kind = models.CharField(max_length=16, choices=EventKind.choices)
    operation = models.CharField(max_length=16, help_text="mint, exchange or invalidate")
    fingerprint = models.CharField(max_length=16, blank=True, help_text="SHA-256 prefix of the token")
    replaces = models.CharField(max_length=16, blank=True, help_text="Fingerprint of the token rotated away")
    pair = models.CharField(max_length=32, blank=True)
    user_id = models.CharField(max_length=255, blank=True)
    status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="HTTP status of a refusal")
    reason = models.CharField(max_length=64, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.kind} {self.fingerprint or '-'} ({self.operation})"


class Switch(models.Model):
    """Forced failures of the next `remaining` calls of `name` (mint or exchange), or IMS's latency.

    `refuse`: answer `status` without acting (the token stays as it was). `lose`: act (mint, or rotate the
    token) and commit, then lose the answer: answer `status`, or with `stall_seconds` hold the answer past
    the caller's timeout. `latency` (name): every IMS call waits `delay_ms` first.
    """

    MINT = "mint"
    EXCHANGE = "exchange"
    LATENCY = "latency"
    REFUSE = "refuse"
    LOSE = "lose"

    name = models.CharField(
        max_length=16, unique=True, choices=[(MINT, "mint"), (EXCHANGE, "exchange"), (LATENCY, "latency")]
    )
    remaining = models.PositiveIntegerField(default=0)
    status = models.PositiveSmallIntegerField(default=503)
    mode = models.CharField(max_length=8, default=REFUSE, choices=[(REFUSE, "refuse"), (LOSE, "lose the answer")])
    stall_seconds = models.FloatField(default=0)
    delay_ms = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        if self.name == self.LATENCY:
            return f"latency {self.delay_ms} ms"
        return f"{self.mode} next {self.remaining} {self.name}(s) with {self.status}"
