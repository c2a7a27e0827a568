"""`manage.py doctor`: reconcile the job table with the queue and the DLQ; fix what is safe to fix."""
from django.core.management.base import CommandError

from jobs.clients import sqs
from jobs.management.commands._runbook import RunbookCommand
from jobs.services import doctor


class Command(RunbookCommand):
    help = (
        "Reconcile jobs with the market-jobs queue and its DLQ and name every inconsistency: a waiting job "
        "with no message anywhere, a DLQ message for a finished job, an expired lease on an IN_PROGRESS "
        "job, a persisted batch with nothing written past the write budget, prompts written but the job not "
        "COMPLETED (and a waiting job whose message is in the DLQ, left for job_redrive_dlq). Each line "
        "names the safe action the runbook commands take; --apply takes them. Run it when an alarm fires "
        "or a user reports a market stuck 'provisioning', and after any incident. Semrush is not compared "
        "(no credential of its own); see docs/operations.md."
    )
    filters = ("older_than",)
    older_than_help = "call a waiting job with a sent message stuck after this long without activity"

    def run(self, options):
        stuck_after = self.older_than(options) if options.get("older_than") else None
        try:
            diagnosis = doctor.doctor_run(apply=self.apply, actor=self.actor, stuck_after=stuck_after)
        except sqs.AWSError as exc:
            raise CommandError(f"The DLQ cannot be read: {type(exc).__name__}.") from None
        for note in diagnosis.notes:
            self.stdout.write(f"note  {note}")
        for f in diagnosis.findings:
            self.item(f.subject, f.kind, f"{f.detail} -> {f.action}", f.done if f.fix else None,
                      why_not="the job changed meanwhile (see job_inspect)")
        findings = diagnosis.findings
        if not findings:
            self.stdout.write("No inconsistencies found.")
            return
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(diagnosis.counts().items()))
        fixable = [f for f in findings if f.fix]
        if self.apply:
            done = sum(bool(f.done) for f in fixable)
            self.stdout.write(f"{len(findings)} inconsistencies ({counts}); {done} of {len(fixable)} fixed, "
                              f"{len(findings) - len(fixable)} need an operator.")
        else:
            self.stdout.write(f"{len(findings)} inconsistencies ({counts}). Dry run: nothing changed; re-run "
                              "with --apply to take the safe actions.")
