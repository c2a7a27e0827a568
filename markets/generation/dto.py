"""What callers may see of a generation job: the poll's token-safe DTO (its public error sentences come from
markets/generation/jobtype.py), and the 202 bodies of re-authorisation and regeneration.

Everything here is an explicit allow-list. A field is shown because it is named below, never because it is
stored: the job's parameters, checkpoints, lease and internal error text stay in the database, the logs and
the admin.
"""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.models import AsyncJob, JobStatus
from markets.generation import jobtype

# The keys of a completed job's result that callers may see (SPEC §5: the outcome of a shipped market).
PUBLIC_RESULT_KEYS = ("promptCount", "projectId", "published", "verdict")


def public_result(job: AsyncJob) -> dict | None:
    """The allow-listed result of a COMPLETED job; None in every other state."""
    if job.status != JobStatus.COMPLETED:
        return None
    stored = job.result if isinstance(job.result, dict) else {}
    return {key: stored.get(key) for key in PUBLIC_RESULT_KEYS}


def public_error(job: AsyncJob) -> dict | None:
    """`{code, message, retryable, needsReauth}` of a FAILED job, with the public message; None otherwise."""
    if job.status != JobStatus.FAILED:
        return None
    stored = job.error if isinstance(job.error, dict) else {}
    code = job.error_code or stored.get("code") or "FAILED"
    return {
        "code": code,
        "message": jobtype.public_message(code),
        "retryable": stored.get("retryable") is True,
        "needsReauth": stored.get("needsReauth") is True or code == jobtype.NEEDS_REAUTH,
    }


# The phases of a market generation in order (markets/generation/jobtype.py): `progress.step` is a phase's place here.
PHASES = (
    jobtype.PHASE_QUEUED,
    jobtype.PHASE_GENERATING,
    jobtype.PHASE_GENERATED,
    jobtype.PHASE_WRITING,
    jobtype.PHASE_WRITTEN,
    jobtype.PHASE_PUBLISHED,
)


def public_progress(job: AsyncJob) -> dict:
    """`{phase, step, steps, attempt}`: where the job is, from its own columns (never its checkpoints, which hold
    the whole generated batch). `step` is 1-based, null for a phase outside PHASES."""
    step = PHASES.index(job.phase) + 1 if job.phase in PHASES else None
    return {"phase": job.phase, "step": step, "steps": len(PHASES), "attempt": job.attempts}


class GenerationJobProgressSerializer(serializers.Serializer):
    phase = serializers.ChoiceField(
        choices=list(PHASES),
        help_text="The last phase the job reached: queued, generating (the generation service is writing the "
        "prompts; each call is bounded by the DRS timeout, and a failed call is made again later), generated, "
        "writing (to Semrush), written, published. A failed job keeps the phase it failed in.",
    )
    step = serializers.IntegerField(allow_null=True, help_text="The phase's place, 1 (queued) to `steps` (published).")
    steps = serializers.IntegerField(help_text="How many phases there are (6).")
    attempt = serializers.IntegerField(
        help_text="Deliveries that have taken the job so far: 0 while it waits for its first, more after a retry."
    )


class GenerationJobResultSerializer(serializers.Serializer):
    promptCount = serializers.IntegerField(help_text="Prompts written to the Semrush project.")
    projectId = serializers.CharField(help_text="The market's Semrush project.")
    published = serializers.BooleanField()
    verdict = serializers.CharField(help_text="The generation service's verdict; `ship` for a completed job.")


class GenerationJobErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable error code, e.g. `NEEDS_REAUTH`, `PROMPT_GENERATION_HELD`.")
    message = serializers.CharField(help_text="A fixed public sentence for the code.")
    retryable = serializers.BooleanField()
    needsReauth = serializers.BooleanField(
        help_text="True when the requester must re-authorise the job (POST …/reauth)."
    )


class GenerationJobSerializer(serializers.Serializer):
    """The poll body: `result` only when COMPLETED, `error` only when FAILED (null otherwise)."""

    jobId = serializers.UUIDField(source="id")
    jobType = serializers.CharField(source="job_type")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    result = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    progress = serializers.SerializerMethodField(
        help_text="Added beside the original's seven keys: where the job is. Any change to it changes the ETag."
    )

    @extend_schema_field(GenerationJobResultSerializer(allow_null=True))
    def get_result(self, job: AsyncJob) -> dict | None:
        return public_result(job)

    @extend_schema_field(GenerationJobErrorSerializer(allow_null=True))
    def get_error(self, job: AsyncJob) -> dict | None:
        return public_error(job)

    @extend_schema_field(GenerationJobProgressSerializer())
    def get_progress(self, job: AsyncJob) -> dict:
        return public_progress(job)


# The columns job_dto reads: the poll loads these alone (not the parameters, checkpoints or lease).
JOB_DTO_FIELDS = (
    "job_type",
    "status",
    "phase",
    "attempts",
    "result",
    "error",
    "error_code",
    "created_at",
    "updated_at",
)
_TIMESTAMP = serializers.DateTimeField()


def job_dto(job: AsyncJob) -> dict:
    """The token-safe representation of a job, as the poll endpoint answers it: GenerationJobSerializer's
    fields, built directly (the poll is the hottest path; a serializer instance per request costs more than
    the query). tests/markets/generation/test_poll_fast_path.py holds the two to the same output."""
    return {
        "jobId": str(job.id),
        "jobType": job.job_type,
        "status": job.status,
        "result": public_result(job),
        "error": public_error(job),
        "createdAt": _TIMESTAMP.to_representation(job.created_at),
        "updatedAt": _TIMESTAMP.to_representation(job.updated_at),
        "progress": public_progress(job),
    }


class ReauthAcceptedSerializer(serializers.Serializer):
    """The 202 of a re-authorisation: the same job id, queued again."""

    jobId = serializers.UUIDField()
    jobType = serializers.CharField()
    status = serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS.value])


def reauth_accepted(job: AsyncJob) -> dict:
    """The 202 body. The status is the one the re-authorisation set; what happens next is for polling to
    tell (a fast worker may already have moved the job on)."""
    return ReauthAcceptedSerializer({"jobId": job.id, "jobType": job.job_type, "status": JobStatus.IN_PROGRESS}).data


class RegenerationAcceptedSerializer(serializers.Serializer):
    """The 202 of a regeneration: the market's generation job, queued (or already running: `reused`)."""

    jobId = serializers.UUIDField()
    jobType = serializers.ChoiceField(choices=[jobtype.MARKET_GENERATION_JOB_TYPE])
    status = serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS.value])
    reused = serializers.BooleanField(
        help_text="True when a job of this market was already running: nothing new was queued, poll that job."
    )


def regeneration_accepted(handle: dict) -> dict:
    """The 202 body of a regeneration, from the producer's handle `{jobId, status, reused}`."""
    return {
        "jobId": handle["jobId"],
        "jobType": jobtype.MARKET_GENERATION_JOB_TYPE,
        "status": JobStatus.IN_PROGRESS.value,
        "reused": handle["reused"],
    }
