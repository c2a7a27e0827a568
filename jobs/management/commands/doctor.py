"""`manage.py doctor`: reconcile the job table with the queue and the DLQ; fix what is safe to fix."""

from typing import Any

from jobs.management.commands._runbook import RunbookCommand
from jobs.services import doctor


class Command(RunbookCommand):
    help = (
        "Reconcile jobs with the market-jobs queue, its DLQ, the maintenance queue and the workers' heartbeats, "
        "and name every inconsistency with its safe action: a queue no live worker consumes, a waiting job with "
        "no message anywhere, an expired lease, a held lease whose worker shows no sign of life, a job whose "
        "deliveries keep dying (never re-sent here), a persisted batch with nothing written past the write "
        "budget, prompts written but the job not COMPLETED, and every DLQ message (of a waiting job, a running "
        "one, a finished or missing one, or not a job message at all). --apply takes the safe actions; a job "
        "whose message is in the DLQ is never re-sent here (job_redrive_dlq does that), and while no worker is "
        "alive nothing that may still be queued is re-sent. Run it when an alarm fires, when a user reports a "
        "market stuck 'provisioning', and after any incident. Exit 0: nothing needs you; 1: something does "
        "(see docs/operations.md)."
    )
    filters = ("older_than",)
    older_than_help = "call a waiting job with a sent message stuck after this long without activity"

    def run(self, options: dict[str, Any]) -> None:
        stuck_after = self.older_than(options) if options.get("older_than") else None
        diagnosis = doctor.doctor_run(apply=self.apply, actor=self.actor, stuck_after=stuck_after)
        for note in diagnosis.notes:
            self.stdout.write(f"note  {note}")
        for f in diagnosis.findings:
            self.item(
                f.subject,
                f.kind,
                f"{f.detail} -> {f.action}",
                f.done if f.fix else None,
                why_not="the job changed meanwhile (see job_inspect)",
            )
        findings = diagnosis.findings
        if not findings:
            self.last_line("No inconsistencies found.")
            return
        self.needs_attention = self.needs_attention or diagnosis.needs_an_operator or not self.apply
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(diagnosis.counts().items()))
        fixable = [f for f in findings if f.fix]
        if self.apply:
            done = sum(bool(f.done) for f in fixable)
            self.last_line(
                f"{len(findings)} inconsistencies ({counts}); {done} of {len(fixable)} fixed, "
                f"{len(findings) - len(fixable)} need an operator."
            )
        else:
            self.last_line(
                f"{len(findings)} inconsistencies ({counts}). Dry run: nothing changed; re-run "
                "with --apply to take the safe actions."
            )
