"""The DRS simulator's state, in the database so every process (API, worker, tests) sees the same:
behaviour switches and the ledger of calls received."""

from django.db import models


class SwitchKind(models.TextChoices):
    HELD = "held"
    GATE_ERROR_RETRYABLE = "gate_error_retryable"
    GATE_ERROR_TERMINAL = "gate_error_terminal"
    NON_JSON = "non_json"
    STATUS_500 = "status_500"
    EMPTY = "empty"
    SHIP_ZERO = "ship_zero"
    DUPLICATES = "duplicates"
    LATENCY = "latency"


class DrsSwitch(models.Model):
    """One behaviour override. `slot` keeps one outcome and one latency per scope (a brand, or "" for every
    brand); a brand's own switch wins over the global one."""

    SLOT_OUTCOME = "outcome"
    SLOT_LATENCY = "latency"

    brand = models.CharField(max_length=200, blank=True, default="", help_text='Brand name; "" for every brand')
    slot = models.CharField(max_length=16, editable=False)
    kind = models.CharField(max_length=32, choices=SwitchKind.choices)
    latency_ms = models.PositiveIntegerField(default=0)
    remaining = models.PositiveIntegerField(null=True, blank=True, help_text="Calls left; empty = until cleared")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["brand", "slot"], name="sandbox_drs_one_switch_per_slot")]

    def __str__(self):
        scope = self.brand or "every brand"
        extra = f" {self.latency_ms} ms" if self.kind == SwitchKind.LATENCY else ""
        left = "" if self.remaining is None else f" ({self.remaining} left)"
        return f"{self.kind}{extra} for {scope}{left}"

    def save(self, *args, **kwargs):
        self.slot = self.SLOT_LATENCY if self.kind == SwitchKind.LATENCY else self.SLOT_OUTCOME
        super().save(*args, **kwargs)


class DrsCall(models.Model):
    """A request the simulator received: the body as sent (it carries no token), the targeted function and
    what the simulator answered."""

    received_at = models.DateTimeField(auto_now_add=True)
    brand = models.CharField(max_length=200, blank=True, default="", db_index=True)
    function = models.CharField(max_length=300, blank=True, default="", help_text="X-Drs-Function header")
    body = models.JSONField()
    outcome = models.CharField(max_length=32)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.brand or '-'} -> {self.outcome}"


class DrsConcurrency(models.Model):
    """The one row (id=1) of the simulated function's concurrency: above `limit` invocations in flight at
    once, an invocation is refused with Lambda's throttling error. `limit` None: no limit (the default)."""

    limit = models.PositiveIntegerField(null=True, blank=True, help_text="Invocations at once; empty = no limit")
    in_flight = models.PositiveIntegerField(default=0)

    def __str__(self):
        return f"{self.in_flight} in flight, limit {self.limit if self.limit is not None else 'none'}"
