"""Django admin for async jobs: read-only views an operator can filter, and actions that call the same
services as the runbook commands. No token is ever rendered: parameters, errors and the event history
are shown redacted, checkpoints summarised, and grants are not part of the job's page."""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import BooleanField, Case, Q, QuerySet, Value, When
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django_stubs_ext import WithAnnotations

from jobs import codes, display, handlers, selectors
from jobs import services as job_services
from jobs.display import ago
from jobs.dlq import dlq_job_ids
from jobs.models import AsyncJob

CONFIRMATION_ROWS = 100  # jobs listed on a confirmation page; every selected job is acted on


class Row(TypedDict):
    """What the admin's queryset adds to each job (`get_queryset`)."""

    last_activity_at: datetime
    in_dlq: bool | None  # None: the DLQ could not be read


if TYPE_CHECKING:  # names for annotations only: Django's classes do not take these arguments at run time
    Job = WithAnnotations[AsyncJob, Row]
    Jobs = QuerySet[Job]


def admin_actor(request: HttpRequest) -> str:
    return f"admin:{request.user.get_username()}"


class LeaseStateFilter(admin.SimpleListFilter):
    title = "lease"
    parameter_name = "lease"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [("held", "held"), ("expired", "expired"), ("none", "none")]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        state = self.value()
        if state in selectors.LEASE_STATES:
            return queryset.filter(selectors.lease_state_q(state))
        return queryset


class AgeFilter(admin.SimpleListFilter):
    """Age since creation, in the buckets an operator thinks in."""

    title = "age"
    parameter_name = "age"
    BUCKETS = {
        "lt15m": ("under 15 minutes", None, timedelta(minutes=15)),
        "15m-1h": ("15 minutes to 1 hour", timedelta(minutes=15), timedelta(hours=1)),
        "1h-1d": ("1 hour to 1 day", timedelta(hours=1), timedelta(days=1)),
        "gt1d": ("over 1 day", timedelta(days=1), None),
    }

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _, _) in self.BUCKETS.items()]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        bucket = self.BUCKETS.get(self.value() or "")
        if bucket is None:
            return queryset
        now = timezone.now()
        _, older, younger = bucket
        if older is not None:
            queryset = queryset.filter(created_at__lte=now - older)
        if younger is not None:
            queryset = queryset.filter(created_at__gt=now - younger)
        return queryset


class AttentionFilter(admin.SimpleListFilter):
    """The jobs an operator should look at: stuck (what the probe counts), a worker presumed dead, or a
    message in the DLQ (as read at most a minute ago)."""

    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [("any", "any of these"),
                ("stuck", f"stuck (quiet for {settings.JOB_STUCK_AFTER_SECONDS // 60} min)"),
                ("dead", "worker presumed dead"),
                ("dlq", "message in the DLQ")]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        now = timezone.now()
        kinds = {"stuck": selectors.stuck_q(now=now), "dead": selectors.presumed_dead_q(now=now),
                 "dlq": Q(in_dlq=True)}
        if self.value() == "any":
            return queryset.filter(kinds["stuck"] | kinds["dead"] | kinds["dlq"])
        kind = self.value()
        if kind in kinds:
            return queryset.filter(kinds[kind])
        return queryset


class MarkFailedForm(forms.Form):
    """What "mark failed" asks for on its confirmation page."""

    code = forms.RegexField(regex=codes.ERROR_CODE, initial=codes.OPERATOR_FAILED, max_length=64,
                            help_text="an error code, like OPERATOR_FAILED",
                            error_messages={"invalid": "An error code is upper case, like OPERATOR_FAILED."})
    reason = forms.CharField(max_length=300, widget=forms.TextInput(attrs={"size": 60}),
                             help_text="why, for the job's history and its user (at most 300 characters)")


@admin.register(AsyncJob)
class AsyncJobAdmin(admin.ModelAdmin[AsyncJob]):
    # Typed as sequences of any length: the markets admin extends both.
    list_display: tuple[str, ...] = ("id", "job_type", "status", "error_code", "attempts", "lease", "last_activity",
                                     "message_sent", "dlq", "age")
    list_filter: ClassVar[tuple[type[admin.SimpleListFilter] | str, ...]] = (
        AttentionFilter, "status", "job_type", "error_code", "attempts", LeaseStateFilter, AgeFilter, "brand_id")
    search_fields = ("id", "brand_id")
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    actions = ["release_stale_lease", "requeue", "rerun", "mark_failed"]
    fieldsets = [
        (None, {"fields": ("id", "job_type", "status", "phase", "error_view", "result_view")}),
        ("Owner", {"fields": ("organization_id", "brand_id", "site_id", "user_id", "about")}),
        ("Lease", {"fields": ("lease_view", "lease_epoch", "attempts", "lost_deliveries")}),
        ("Checkpoints", {"fields": ("checkpoints_view",)}),
        ("History", {"fields": ("events_view",)}),
        ("Parameters", {"fields": ("params_view",)}),
        ("Times", {"fields": ("created_at", "updated_at", "started_at", "message_sent_at", "ended_at",
                              "expires_at")}),
    ]
    readonly_fields = ("id", "job_type", "status", "phase", "error_view", "result_view", "organization_id",
                       "brand_id", "site_id", "user_id", "about", "lease_view", "lease_epoch", "attempts",
                       "lost_deliveries", "checkpoints_view", "events_view", "params_view", "created_at",
                       "updated_at", "started_at", "message_sent_at", "ended_at", "expires_at")

    def get_queryset(self, request: HttpRequest) -> Jobs:
        """Each row with its last activity and whether its message is in the DLQ (None: DLQ unreadable)."""
        ids = dlq_job_ids()
        in_dlq = Value(None, output_field=BooleanField()) if ids is None else Case(
            When(id__in=list(ids), then=Value(True)), default=Value(False), output_field=BooleanField())
        return selectors.with_activity(super().get_queryset(request)).annotate(in_dlq=in_dlq)

    # -- read-only: every change goes through an action that calls a service ---------------------------------
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AsyncJob | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AsyncJob | None = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Actions need the model's change permission, even though no form ever edits a job."""
        return request.user.has_perm("jobs.change_asyncjob")

    # -- columns and fields -------------------------------------------------------------------------------------
    @admin.display(description="lease")
    def lease(self, job: Job) -> str:
        return job.lease_state()

    @admin.display(description="last activity", ordering="last_activity_at")
    def last_activity(self, job: Job) -> str:
        return ago(job.last_activity_at)

    @admin.display(description="message sent", ordering="message_sent_at")
    def message_sent(self, job: Job) -> str:
        return ago(job.message_sent_at) if job.message_sent_at else "never"

    @admin.display(description="DLQ")
    def dlq(self, job: Job) -> str:
        return "unknown" if job.in_dlq is None else "in DLQ" if job.in_dlq else "-"

    @admin.display(description="age", ordering="created_at")
    def age(self, job: Job) -> str:
        return ago(job.created_at)

    @admin.display(description="about")
    def about(self, job: Job) -> str:
        return handlers.describe(job) or "-"

    @admin.display(description="error")
    def error_view(self, job: Job) -> str:
        if not job.error:
            return "-"
        return format_html("<pre>{}</pre>", display.params_for_display(job.error))

    @admin.display(description="result")
    def result_view(self, job: Job) -> str:
        return format_html("<pre>{}</pre>", display.params_for_display(job.result)) if job.result else "-"

    @admin.display(description="lease")
    def lease_view(self, job: Job) -> str:
        state = job.lease_state()
        if state == "none":
            return "none"
        return f"{state}, expires {job.lease_expires_at:%Y-%m-%d %H:%M:%S} UTC ({ago(job.lease_expires_at)})"

    @admin.display(description="checkpoints")
    def checkpoints_view(self, job: Job) -> str:
        summary = display.checkpoints_summary(job.checkpoints)
        if not summary:
            return "none"
        return format_html("<table>{}</table>", format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, v) for k, v in summary.items())))

    @admin.display(description="events")
    def events_view(self, job: Job) -> str:
        # A table of our own rather than an inline: an inline prints each row's str(), which holds the raw
        # detail, and every value here must go through the redaction first.
        rows = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", (
            (f"{e.at:%Y-%m-%d %H:%M:%S}", e.kind, e.actor or "-", display.redacted(e.detail))
            for e in selectors.job_events(job.id)))
        if not rows:
            return "none"
        return format_html("<table><thead><tr><th>at (UTC)</th><th>event</th><th>actor</th><th>detail</th></tr>"
                           "</thead><tbody>{}</tbody></table>", rows)

    @admin.display(description="parameters")
    def params_view(self, job: Job) -> str:
        return format_html('<pre style="max-height:30em;overflow:auto">{}</pre>',
                           display.params_for_display(job.params))

    # -- actions: each shows a confirmation page first ---------------------------------------------------------
    def _confirmation(self, request: HttpRequest, queryset: Jobs, *, action: str, title: str, explains: str,
                      form: forms.Form | None = None) -> TemplateResponse | None:
        """The page between choosing an action and carrying it out: the selected jobs as they are now, what
        the action does (and to which of them), and the action's inputs. None once the operator confirmed
        (and the inputs are valid): the action then runs."""
        if request.POST.get("confirmed") == "yes" and (form is None or form.is_valid()):
            return None
        jobs = list(queryset.order_by("-created_at"))
        context = {
            **self.admin_site.each_context(request), "opts": self.model._meta, "title": title,
            "explains": explains, "action": action, "form": form, "ids": [str(j.id) for j in jobs],
            "rows": [(j.id, j.status, j.error_code or "-", j.lease_state(), ago(j.last_activity_at))
                     for j in jobs[:CONFIRMATION_ROWS]],
            "more": max(0, len(jobs) - CONFIRMATION_ROWS),
        }
        return TemplateResponse(request, "admin/jobs/asyncjob/confirm_action.html", context)

    def _report(self, request: HttpRequest, verb: str, done: int, total: int, why_not: str) -> None:
        level = messages.SUCCESS if done == total else messages.WARNING
        text = f"{verb} {done} of {total} job(s)."
        if done < total:
            text += f" Skipped {total - done}: {why_not}."
        self.message_user(request, text, level)

    @admin.action(description="Release stale lease (expired leases only)", permissions=["operate"])
    def release_stale_lease(self, request: HttpRequest, queryset: Jobs) -> TemplateResponse | None:
        page = self._confirmation(request, queryset, action="release_stale_lease", title="Release stale leases",
                                  explains="Clears the lease of each selected job that is IN_PROGRESS with an "
                                  "expired lease (its worker died). A live lease is never touched. No message is "
                                  "sent: re-enqueue afterwards, or let the doctor do it.")
        if page:
            return page
        ids = list(queryset.values_list("id", flat=True))
        done = sum(job_services.job_release_stale_lease(i, actor=admin_actor(request)) for i in ids)
        self._report(request, "Released the stale lease of", done, len(ids),
                     "not IN_PROGRESS, or the lease is live or absent")
        return None

    @admin.action(description="Re-enqueue (IN_PROGRESS without a live lease)", permissions=["operate"])
    def requeue(self, request: HttpRequest, queryset: Jobs) -> TemplateResponse | None:
        page = self._confirmation(request, queryset, action="requeue", title="Re-enqueue jobs",
                                  explains="Sends a fresh message for each selected job that is IN_PROGRESS with no "
                                  "live lease (an expired lease is released first); the worker resumes at the "
                                  "job's last checkpoint. Others are skipped. A job whose message is in the DLQ "
                                  "kept failing: read its history first.")
        if page:
            return page
        ids = list(queryset.values_list("id", flat=True))
        done = sum(job_services.job_requeue(i, actor=admin_actor(request)) for i in ids)
        self._report(request, "Re-enqueued", done, len(ids), "not IN_PROGRESS, a live lease, or the send failed")
        return None

    @admin.action(description="Re-run (FAILED with a retryable error, with its parked credential)",
                  permissions=["operate"])
    def rerun(self, request: HttpRequest, queryset: Jobs) -> TemplateResponse | None:
        page = self._confirmation(request, queryset, action="rerun", title="Re-run failed jobs",
                                  explains="Puts each selected job that FAILED with a retryable error (such as "
                                  "RETRIES_EXHAUSTED after an outage) back to IN_PROGRESS under the same id, with "
                                  "the credential it kept, and sends its message; it resumes from its checkpoints. "
                                  "Run it once the outage is over. Others are skipped.")
        if page:
            return page
        ids = list(queryset.values_list("id", flat=True))
        results = [job_services.job_rerun(i, actor=admin_actor(request)) for i in ids]
        reasons = sorted({r.why_not for r in results if not r.done})
        self._report(request, "Re-ran", sum(r.done for r in results), len(ids), "; ".join(reasons))
        return None

    @admin.action(description="Mark failed (asks for a code and a reason)", permissions=["operate"])
    def mark_failed(self, request: HttpRequest, queryset: Jobs) -> TemplateResponse | None:
        form = MarkFailedForm(request.POST if request.POST.get("confirmed") == "yes" else None)
        page = self._confirmation(request, queryset, action="mark_failed", title="Mark jobs failed", form=form,
                                  explains="Ends each selected IN_PROGRESS job as FAILED with the code and reason "
                                  "below; its credential is invalidated and deleted. Its user sees the reason. "
                                  "Finished jobs are skipped. This cannot be undone.")
        if page:
            return page
        code, reason = form.cleaned_data["code"], form.cleaned_data["reason"].strip()
        ids = list(queryset.values_list("id", flat=True))
        done = sum(job_services.job_mark_failed(i, code=code, reason=reason, actor=admin_actor(request)) for i in ids)
        self._report(request, f"Marked FAILED {code}:", done, len(ids), "not IN_PROGRESS")
        return None
