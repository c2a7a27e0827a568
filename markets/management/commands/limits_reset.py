"""`manage.py limits_reset`: give a tenant its request budget back (docs/operations.md "Request limits")."""

import uuid

from jobs.management.commands._runbook import RunbookCommand, UsageError
from serenity import limits

UNITS = {1: "s", 60: "min", 3600: "hour", 86400: "day"}


class Command(RunbookCommand):
    help = (
        "Show what an organization or a user has spent of its request limits, and with --apply give it back at "
        "once (every scope, or the one --scope names). Run it when a tenant is refused with 429 after an "
        "incident of ours (a retry storm of the UI, say); to raise a tenant's rate for good, set "
        "THROTTLE_OVERRIDES instead. Dry run unless --apply."
    )
    filters = ()

    def add_arguments(self, parser):
        super().add_arguments(parser)
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--org", metavar="ORGANIZATION_ID", help="an organization's id (the orgId of the URLs)")
        who.add_argument("--user", metavar="USER_ID", help="a user's IMS id (a session token's sub)")
        parser.add_argument(
            "--scope",
            choices=[limits.ONBOARDING, limits.REAUTH, limits.ORG_MARKETS, limits.ORG_REAUTH],
            help="only this limit",
        )

    def run(self, options):
        if options["org"] is not None:
            try:
                ident, subject = str(uuid.UUID(options["org"].strip())), f"organization {options['org'].strip()}"
            except ValueError:
                raise UsageError(f"--org must be an organization id (a UUID), got {options['org']!r}.") from None
        else:
            ident, subject = options["user"].strip(), f"user {options['user'].strip()}"
        spent = [b for b in limits.budgets(ident) if options["scope"] in (None, b.scope)]
        done = 0
        for budget in spent:
            reset = limits.reset(budget.scope, ident) == 1 if self.apply else None
            done += bool(reset)
            self.item(
                subject,
                f"reset {budget.scope}",
                f"{budget.spent:.0f} of {budget.rate.limit}/{UNITS[budget.rate.period]} spent",
                reset,
                why_not="refilled meanwhile",
            )
        self.summary(len(spent), "spent budgets", done=done, verb="reset")
