"""The operator's views of async jobs, in the Django admin: the `ModelAdmin`s here (read-only pages an operator
filters, and actions that call the same services as the runbook commands), and beside them what the pages draw:
a job's waterfall (timeline.py, its geometry in charts.py) and the overview's first line (overview.py). Nothing
in the job core imports this package. No token is ever rendered: parameters, errors and the event history are
shown redacted, checkpoints summarised, and grants are not part of the job's page."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import BooleanField, Case, Q, QuerySet, Value, When
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django_stubs_ext import WithAnnotations

from jobs import codes, display, dlq, handlers, selectors
from jobs import services as job_services
from jobs.admin import charts, overview, timeline
from jobs.clients import sqs
from jobs.display import ago
from jobs.dlq import dlq_job_ids
from jobs.leases import crash_looping_or_parked_q, lease_state_q, parked_q
from jobs.models import AsyncJob, JobStatus, LeaseState

CONFIRMATION_ROWS = 100  # jobs listed on a confirmation page; every selected job is acted on
WORKER_ROWS = 50  # heartbeat rows listed on the overview; every one is counted


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
        return [(state, state) for state in LeaseState.values]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        state = self.value()
        if state in LeaseState.values:
            return queryset.filter(lease_state_q(state))
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
    """The jobs an operator should look at: stuck (what the probe counts), a worker presumed dead, deliveries
    that keep dying, or a message in the DLQ (as read at most a minute ago)."""

    title = "needs attention"
    parameter_name = "attention"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [
            ("any", "any of these"),
            ("stuck", f"stuck (quiet for {settings.JOB_STUCK_AFTER_SECONDS // 60} min)"),
            ("dead", "worker presumed dead"),
            ("crash_loop", "crash-looping or parked (deliveries keep dying)"),
            ("parked", "parked (not run until named)"),
            ("dlq", "message in the DLQ"),
        ]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        now = timezone.now()
        kinds = {
            "stuck": selectors.stuck_q(now=now),
            "dead": selectors.presumed_dead_q(now=now),
            "crash_loop": crash_looping_or_parked_q(now=now),
            "parked": Q(status=JobStatus.IN_PROGRESS) & parked_q(),
            "dlq": Q(in_dlq=True),
        }
        if self.value() == "any":
            return queryset.filter(kinds["stuck"] | kinds["dead"] | kinds["crash_loop"] | kinds["dlq"])
        kind = self.value()
        if kind in kinds:
            return queryset.filter(kinds[kind])
        return queryset


class StateFilter(admin.SimpleListFilter):
    """Where live work is now, as the overview counts it (selectors.job_state_q)."""

    title = "state now"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [(state, state.replace("_", " ")) for state in selectors.JOB_STATES]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        state = self.value()
        if state in selectors.JOB_STATES:
            return queryset.filter(selectors.job_state_q(state))
        return queryset


class OutcomeFilter(admin.SimpleListFilter):
    """How a finished job ended, as the overview's chart colours it (selectors.OUTCOMES)."""

    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [(name, name.replace("_", " ")) for name in selectors.OUTCOMES]

    def queryset(self, request: HttpRequest, queryset: Jobs) -> Jobs:
        outcome = self.value()
        if outcome in selectors.OUTCOMES:
            return queryset.filter(selectors.OUTCOMES[outcome])
        return queryset


class MarkFailedForm(forms.Form):
    """What "mark failed" asks for on its confirmation page."""

    code = forms.RegexField(
        regex=codes.ERROR_CODE,
        initial=codes.OPERATOR_FAILED,
        max_length=64,
        help_text="an error code, like OPERATOR_FAILED",
        error_messages={"invalid": "An error code is upper case, like OPERATOR_FAILED."},
    )
    reason = forms.CharField(
        max_length=300,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="why, for the job's history and its user (at most 300 characters)",
    )


@admin.register(AsyncJob)
class AsyncJobAdmin(admin.ModelAdmin[AsyncJob]):
    # Typed as sequences of any length: the markets admin extends both.
    list_display: tuple[str, ...] = (
        "id",
        "job_type",
        "status",
        "error_code",
        "attempts",
        "lease",
        "last_activity",
        "message_sent",
        "dlq",
        "age",
    )
    list_filter: ClassVar[tuple[type[admin.SimpleListFilter] | str, ...]] = (
        AttentionFilter,
        StateFilter,
        OutcomeFilter,
        "status",
        "job_type",
        "error_code",
        "attempts",
        LeaseStateFilter,
        AgeFilter,
        "brand_id",
    )
    search_fields = ("id", "brand_id")
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    actions = ["release_stale_lease", "requeue", "rerun", "mark_failed"]

    class Media:
        css = {"all": ("jobs/admin.css",)}  # the waterfall's layout (jobs/static/jobs/admin.css)

    fieldsets = [
        (None, {"fields": ("id", "job_type", "status", "phase", "error_view", "result_view")}),
        ("Timeline", {"fields": ("timeline_view",)}),
        ("Owner", {"fields": ("organization_id", "brand_id", "site_id", "user_id", "about")}),
        ("Lease", {"fields": ("lease_view", "lease_epoch", "deliveries_view")}),
        ("Checkpoints", {"fields": ("checkpoints_view",)}),
        ("History", {"fields": ("events_view",)}),
        ("Parameters", {"fields": ("params_view",)}),
        ("Times", {"fields": ("created_at", "updated_at", "started_at", "message_sent_at", "ended_at", "expires_at")}),
    ]
    readonly_fields = (
        "id",
        "job_type",
        "status",
        "phase",
        "error_view",
        "result_view",
        "organization_id",
        "brand_id",
        "site_id",
        "user_id",
        "about",
        "lease_view",
        "lease_epoch",
        "deliveries_view",
        "timeline_view",
        "checkpoints_view",
        "events_view",
        "params_view",
        "created_at",
        "updated_at",
        "started_at",
        "message_sent_at",
        "ended_at",
        "expires_at",
    )

    def get_queryset(self, request: HttpRequest) -> Jobs:
        """Each row with its last activity and whether its message is in the DLQ (None: DLQ unreadable)."""
        ids = dlq_job_ids()
        in_dlq = (
            Value(None, output_field=BooleanField())
            if ids is None
            else Case(When(id__in=list(ids), then=Value(True)), default=Value(False), output_field=BooleanField())
        )
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
        if state == LeaseState.NONE:
            return "none"
        return f"{state}, expires {job.lease_expires_at:%Y-%m-%d %H:%M:%S} UTC ({ago(job.lease_expires_at)})"

    @admin.display(description="deliveries")
    def deliveries_view(self, job: Job) -> str:
        """The counts `job_inspect` and the doctor print (selectors.deliveries), in the same words."""
        return display.deliveries_line(selectors.deliveries(job), in_progress=job.status == JobStatus.IN_PROGRESS)

    @admin.display(description="checkpoints")
    def checkpoints_view(self, job: Job) -> str:
        summary = display.checkpoints_summary(job.checkpoints)
        if not summary:
            return "none"
        return format_html(
            "<table>{}</table>",
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", ((k, v) for k, v in summary.items())),
        )

    @admin.display(description="events")
    def events_view(self, job: Job) -> str:
        # A table of our own rather than an inline: an inline prints each row's str(), which holds the raw
        # detail, and every value here must go through the redaction first.
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (f"{e.at:%Y-%m-%d %H:%M:%S}", e.kind, e.actor or "-", display.redacted(e.detail), e.trace_id or "-")
                for e in selectors.job_events(job.id)
            ),
        )
        if not rows:
            return "none"
        return format_html(
            "<table><thead><tr><th>at (UTC)</th><th>event</th><th>actor</th><th>detail</th>"
            "<th>trace</th></tr></thead><tbody>{}</tbody></table>",
            rows,
        )

    @admin.display(description="waterfall")
    def timeline_view(self, job: Job) -> str:
        """Where the job's time went, from its kept spans or else its history (jobs/admin/timeline.py), as SVG."""
        drawn = timeline.job_timeline(job)
        if not drawn.segments:
            return "nothing recorded yet"
        return render_to_string(
            "admin/jobs/asyncjob/waterfall.html", {"timeline": drawn, "chart": charts.waterfall(drawn)}
        )

    # -- the operator overview -----------------------------------------------------------------------------------
    def get_urls(self) -> list[URLPattern]:
        return [
            path("overview/", self.admin_site.admin_view(self.overview_view), name="jobs_asyncjob_overview"),
            *super().get_urls(),
        ]

    def overview_view(self, request: HttpRequest) -> TemplateResponse:
        """The fleet at a glance. First line: is anything consuming (workers alive, an alarm when none is while
        work waits), the oldest waiting job, stuck and crash-looping jobs, the DLQ and the maintenance queue.
        Then outcomes per hour (24 hours, 7 days), live work now, the workers, the organizations waiting most.
        Five queries and three SQS reads; every figure links to the job list filtered to exactly what it counts."""
        now = timezone.now()
        jobs_url = reverse("admin:jobs_asyncjob_changelist")
        this_hour = now.replace(minute=0, second=0, microsecond=0)
        start = this_hour - timedelta(hours=24 * 7 - 1)
        counted = selectors.outcomes_per_hour(since=start)
        hours: list[tuple[str, dict[str, tuple[int, str]]]] = []
        for i in range(24 * 7):
            hour = start + timedelta(hours=i)
            span = {"ended_at__gte": hour.isoformat(), "ended_at__lt": (hour + timedelta(hours=1)).isoformat()}
            hours.append(
                (
                    f"{hour:%Y-%m-%d %H:%M}",
                    {
                        outcome: (counted[(hour, outcome)], f"{jobs_url}?{urlencode({'outcome': outcome, **span})}")
                        for outcome in selectors.OUTCOMES
                        if counted.get((hour, outcome))
                    },
                )
            )
        day_start = this_hour - timedelta(hours=23)
        live = selectors.live_work(now=now)
        states = live.states
        ttl = selectors.worker_ttl()
        queues: dlq.QueueCounts | None
        try:
            queues = dlq.queue_counts("queue", "dlq", "maintenance")
        except sqs.AWSError:
            queues = None
        workers = selectors.workers_seen(now=now)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Jobs overview",
            "now": now,
            "first_line": overview.first_line(
                live=live,
                fleet=selectors.fleet(workers, now=now),
                oldest=selectors.oldest_waiting(now=now),
                queues=queues,
                last_beat=workers[0] if workers else None,
                jobs_url=jobs_url,
                now=now,
            ),
            "day": charts.hourly_bars(hours[-24:]),
            "week": charts.hourly_bars(hours),
            "totals": [
                (
                    outcome,
                    outcome.replace("_", " "),
                    sum(c.get(outcome, (0, ""))[0] for _, c in hours[-24:]),
                    f"{jobs_url}?{urlencode({'outcome': outcome, 'ended_at__gte': day_start.isoformat()})}",
                )
                for outcome in selectors.OUTCOMES
            ],
            "states": [
                (state.replace("_", " "), states[state], f"{jobs_url}?state={state}") for state in selectors.JOB_STATES
            ],
            "queues": None
            if queues is None
            else [
                ("market-jobs queue", dlq.total(queues["queue"]), f"{jobs_url}?status=IN_PROGRESS"),
                ("DLQ", dlq.total(queues["dlq"]), f"{jobs_url}?attention=dlq"),
            ],
            "workers": [overview.worker_row(w, now=now, ttl=ttl) for w in workers[:WORKER_ROWS]],
            "more_workers": max(0, len(workers) - WORKER_ROWS),
            "retention": display.duration(selectors.heartbeat_retention().total_seconds()),
            "running_url": f"{jobs_url}?state=running",
            "organizations": [
                (org, n, f"{jobs_url}?{urlencode({'state': 'waiting', 'organization_id': org})}")
                for org, n in selectors.organizations_waiting(now=now)
            ],
        }
        return TemplateResponse(request, "admin/jobs/asyncjob/overview.html", context)

    @admin.display(description="parameters")
    def params_view(self, job: Job) -> str:
        return format_html(
            '<pre style="max-height:30em;overflow:auto">{}</pre>', display.params_for_display(job.params)
        )

    # -- actions: each shows a confirmation page first ---------------------------------------------------------
    def _confirmation(
        self,
        request: HttpRequest,
        queryset: Jobs,
        *,
        action: str,
        title: str,
        explains: str,
        form: forms.Form | None = None,
    ) -> TemplateResponse | None:
        """The page between choosing an action and carrying it out: the selected jobs as they are now, what
        the action does (and to which of them), and the action's inputs. None once the operator confirmed
        (and the inputs are valid): the action then runs."""
        if request.POST.get("confirmed") == "yes" and (form is None or form.is_valid()):
            return None
        jobs = list(queryset.order_by("-created_at"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "explains": explains,
            "action": action,
            "form": form,
            "ids": [str(j.id) for j in jobs],
            "rows": [
                (j.id, j.status, j.error_code or "-", j.lease_state(), ago(j.last_activity_at))
                for j in jobs[:CONFIRMATION_ROWS]
            ],
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
        page = self._confirmation(
            request,
            queryset,
            action="release_stale_lease",
            title="Release stale leases",
            explains="Clears the lease of each selected job that is IN_PROGRESS with an "
            "expired lease (its worker died). A live lease is never touched. No message is "
            "sent: re-enqueue afterwards, or let the doctor do it.",
        )
        if page:
            return page
        ids = list(queryset.values_list("id", flat=True))
        done = sum(job_services.job_release_stale_lease(i, actor=admin_actor(request)) for i in ids)
        self._report(
            request, "Released the stale lease of", done, len(ids), "not IN_PROGRESS, or the lease is live or absent"
        )
        return None

    @admin.action(description="Re-enqueue (IN_PROGRESS without a live lease)", permissions=["operate"])
    def requeue(self, request: HttpRequest, queryset: Jobs) -> TemplateResponse | None:
        page = self._confirmation(
            request,
            queryset,
            action="requeue",
            title="Re-enqueue jobs",
            explains="Sends a fresh message for each selected job that is IN_PROGRESS with no "
            "live lease (an expired lease is released first); the worker resumes at the "
            "job's last checkpoint. Others are skipped. A job whose message is in the DLQ "
            "kept failing: read its history first.",
        )
        if page:
            return page
        jobs = list(queryset)
        done = 0
        for job in jobs:
            if not job_services.job_requeue(job.id, actor=admin_actor(request)):
                continue
            done += 1
            if warning := display.resend_warning(job.id, selectors.deliveries(job)):
                self.message_user(request, f"Job {job.id}: {warning}.", messages.WARNING)
        self._report(request, "Re-enqueued", done, len(jobs), "not IN_PROGRESS, a live lease, or the send failed")
        return None

    @admin.action(
        description="Re-run (FAILED with a retryable error, with its retained credential)", permissions=["operate"]
    )
    def rerun(self, request: HttpRequest, queryset: Jobs) -> TemplateResponse | None:
        page = self._confirmation(
            request,
            queryset,
            action="rerun",
            title="Re-run failed jobs",
            explains="Puts each selected job that FAILED with a retryable error (such as "
            "RETRIES_EXHAUSTED after an outage) back to IN_PROGRESS under the same id, with "
            "the credential it kept, and sends its message; it resumes from its checkpoints. "
            "Run it once the outage is over. Others are skipped.",
        )
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
        page = self._confirmation(
            request,
            queryset,
            action="mark_failed",
            title="Mark jobs failed",
            form=form,
            explains="Ends each selected IN_PROGRESS job as FAILED with the code and reason "
            "below; its credential is invalidated and deleted. Its user sees the reason. "
            "Finished jobs are skipped. This cannot be undone.",
        )
        if page:
            return page
        code, reason = form.cleaned_data["code"], form.cleaned_data["reason"].strip()
        ids = list(queryset.values_list("id", flat=True))
        done = sum(job_services.job_mark_failed(i, code=code, reason=reason, actor=admin_actor(request)) for i in ids)
        self._report(request, f"Marked FAILED {code}:", done, len(ids), "not IN_PROGRESS")
        return None
