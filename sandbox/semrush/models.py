"""State of the local Semrush simulator: workspaces, AI projects, tags, prompts, catalogue overrides, switches.

Uniqueness lives in database constraints so two concurrent creates cannot both win: the loser gets an
IntegrityError and the API answers 409 naming the winner's id.
"""

import secrets

from django.db import models


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def _workspace_id():
    return new_id("ws")


def _project_id():
    return new_id("prj")


def _tag_root_id():
    return new_id("tag")


def _tag_value_id():
    return new_id("tv")


def _prompt_id():
    return new_id("pr")


class Workspace(models.Model):
    id = models.CharField(primary_key=True, max_length=100, default=_workspace_id)
    name = models.CharField(max_length=300, blank=True)
    parent_id = models.CharField(max_length=100, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.name or self.id}"


class Project(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"

    id = models.CharField(primary_key=True, max_length=100, default=_project_id)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=300)
    geo_target_id = models.PositiveIntegerField()
    language_code = models.CharField(max_length=12)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    published_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "geo_target_id", "language_code"], name="semrush_sim_project_unique_slice"
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.geo_target_id}/{self.language_code})"


class TagRoot(models.Model):
    id = models.CharField(primary_key=True, max_length=100, default=_tag_root_id)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tag_roots")
    name = models.CharField(max_length=200)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="semrush_sim_tag_root_unique")]

    def __str__(self):
        return self.name


class TagValue(models.Model):
    id = models.CharField(primary_key=True, max_length=100, default=_tag_value_id)
    root = models.ForeignKey(TagRoot, on_delete=models.CASCADE, related_name="values")
    value = models.CharField(max_length=200)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["root", "value"], name="semrush_sim_tag_value_unique")]

    def __str__(self):
        return f"{self.root.name}={self.value}"


class Prompt(models.Model):
    """A prompt exactly as it arrived; metadata is kept as the strings sent, not re-rendered."""

    seq = models.BigAutoField(primary_key=True)  # write order, and the pagination cursor
    prompt_id = models.CharField(max_length=100, unique=True, default=_prompt_id)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="prompts")
    text = models.TextField()
    tag_ids = models.JSONField(default=list)
    created_by = models.CharField(max_length=200)
    created_at = models.CharField(max_length=64)
    updated_by = models.CharField(max_length=200)
    updated_at = models.CharField(max_length=64)
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.text[:80]


class IdempotentResponse(models.Model):
    """The first answer to a request carrying an Idempotency-Key; a repeat gets it back unchanged."""

    key = models.CharField(max_length=200)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    status = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["method", "path", "key"], name="semrush_sim_idempotency_unique")]

    def __str__(self):
        return f"{self.method} {self.path} [{self.key}]"


class CatalogueOverride(models.Model):
    """An exact catalogue for one (domain, country), replacing the generated one (an empty list is allowed)."""

    domain = models.CharField(max_length=253)
    country = models.CharField(max_length=2)
    items = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["domain", "country"], name="semrush_sim_catalogue_unique"),
        ]

    def __str__(self):
        return f"{self.domain}/{self.country}"


class Switchboard(models.Model):
    """The one row of simulator-wide switches (id=1). With `rate_requests` set, each client pair may make at
    most that many API calls (those matching `rate_path` and `rate_method`, when set) in any `rate_seconds`:
    one more is answered 429 with Retry-After."""

    latency_ms = models.PositiveIntegerField(default=0)
    rate_requests = models.PositiveIntegerField(null=True, blank=True, help_text="Calls per window; empty = no limit")
    rate_seconds = models.PositiveIntegerField(default=1)
    rate_path = models.CharField(max_length=300, blank=True)
    rate_method = models.CharField(max_length=8, blank=True)
    # The most calls of one pair admitted within one window since the limit was set: how close the callers came.
    rate_peak = models.PositiveIntegerField(default=0)

    def __str__(self):
        return f"latency {self.latency_ms} ms"


class FailureRule(models.Model):
    """Misbehave on the next `remaining` matching API calls: by default answer `status` instead of serving
    them; with `lose_answer`, serve them (the write commits) and then answer `status`; with `stall_ms`, wait
    that long before serving them (past the caller's timeout, the caller never sees the answer)."""

    status = models.PositiveSmallIntegerField()
    remaining = models.PositiveIntegerField()
    path_contains = models.CharField(max_length=300, blank=True)
    method = models.CharField(max_length=8, blank=True)
    retry_after = models.PositiveIntegerField(null=True, blank=True)
    lose_answer = models.BooleanField(default=False)
    stall_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        how = "stall" if self.stall_ms else "lose answer" if self.lose_answer else "fail"
        return f"{self.remaining} x {how} {self.status} {self.method or '*'} *{self.path_contains}*"


class RateHit(models.Model):
    """One call the rate limit admitted, for the pair (the token's client id) that made it."""

    pair = models.CharField(max_length=200)
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["pair", "at"], name="semrush_sim_rate_hit_pair_at")]

    def __str__(self):
        return f"{self.pair or '-'} at {self.at:%H:%M:%S}"


class Call(models.Model):
    """One API call the simulator answered (never a header or a token)."""

    seq = models.BigAutoField(primary_key=True)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    query = models.CharField(max_length=1000, blank=True)
    status = models.PositiveSmallIntegerField()
    user_id = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.method} {self.path} -> {self.status}"
