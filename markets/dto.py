"""What callers may see of a generation job: the token-safe DTO, its public error sentences, problem details.

Everything here is an explicit allow-list. A field is shown because it is named below, never because it is
stored: the job's parameters, checkpoints, lease and internal error text stay in the database, the logs and
the admin.
"""
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs import services as job_services
from jobs.models import AsyncJob, JobStatus
from markets import constants

# The one sentence a caller sees per error code. The stored `error.message` is for operators: it may name
# upstream statuses, Semrush project ids or exception classes, so it never leaves through the API.
PUBLIC_ERROR_MESSAGES = {
    constants.NEEDS_REAUTH: "Authorisation to write to Semrush has expired. Re-authorise to continue.",
    constants.PROMPT_GENERATION_HELD: "The generated prompts did not pass the quality checks and were held back.",
    constants.PROMPT_GENERATION_GATE_ERROR: "Prompt generation was stopped by a quality check.",
    constants.PROMPT_GENERATION_EMPTY: "Prompt generation produced no usable prompts.",
    constants.DRS_GENERATION_TERMINAL: "The prompt generation service could not complete the request.",
    constants.DRS_INVALID_TARGET: "The prompt generation service is not configured correctly.",
    constants.SEMRUSH_REJECTED: "Semrush rejected the generated prompts.",
    job_services.UNKNOWN_JOB_TYPE: "This job cannot be processed.",
    job_services.ENQUEUE_FAILED: "The job could not be queued.",
    job_services.RETRIES_EXHAUSTED: "Prompt generation kept failing and was stopped.",
    job_services.OPERATOR_FAILED: "The job was stopped by an operator.",
}
# Codes added later fall back to this until they get their own sentence.
DEFAULT_PUBLIC_ERROR_MESSAGE = "Prompt generation failed."

# The keys of a completed job's result that callers may see (SPEC §5: the outcome of a shipped market).
PUBLIC_RESULT_KEYS = ("promptCount", "projectId", "published", "verdict")


def public_error_message(code: str | None) -> str:
    return PUBLIC_ERROR_MESSAGES.get(code or "", DEFAULT_PUBLIC_ERROR_MESSAGE)


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
        "message": public_error_message(code),
        "retryable": stored.get("retryable") is True,
        "needsReauth": stored.get("needsReauth") is True or code == constants.NEEDS_REAUTH,
    }


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

    @extend_schema_field(GenerationJobResultSerializer(allow_null=True))
    def get_result(self, job: AsyncJob) -> dict | None:
        return public_result(job)

    @extend_schema_field(GenerationJobErrorSerializer(allow_null=True))
    def get_error(self, job: AsyncJob) -> dict | None:
        return public_error(job)


def job_dto(job: AsyncJob) -> dict:
    """The token-safe representation of a job, as the poll endpoint answers it."""
    return GenerationJobSerializer(job).data


class ReauthAcceptedSerializer(serializers.Serializer):
    """The 202 of a re-authorisation: the same job id, queued again."""

    jobId = serializers.UUIDField()
    jobType = serializers.CharField()
    status = serializers.ChoiceField(choices=[JobStatus.IN_PROGRESS.value])


def reauth_accepted(job: AsyncJob) -> dict:
    """The 202 body. The status is the one the re-authorisation set; what happens next is for polling to
    tell (a fast worker may already have moved the job on)."""
    return ReauthAcceptedSerializer({"jobId": job.id, "jobType": job.job_type, "status": JobStatus.IN_PROGRESS}).data


class ProblemFieldErrorSerializer(serializers.Serializer):
    pointer = serializers.CharField(required=False, help_text="JSON pointer to the offending body field (RFC 6901).")
    parameter = serializers.CharField(required=False, help_text="The offending path or header parameter.")
    code = serializers.CharField()
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details, served as `application/problem+json`."""

    type = serializers.URLField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField(required=False)
    code = serializers.CharField(help_text="Stable machine-readable code; clients may branch on it.")
    errors = ProblemFieldErrorSerializer(many=True, required=False, help_text="One entry per invalid field.")
    requestId = serializers.CharField(required=False)
