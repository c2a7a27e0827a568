"""`manage.py job_regenerate`: re-run the generation job of a market, as an operator."""

import uuid

from jobs import services as job_services
from jobs.management.commands._runbook import RunbookCommand, UsageError
from jobs.models import AsyncJob, JobStatus
from markets.generation.jobtype import generation_job_id
from markets.models import Market


class Command(RunbookCommand):
    help = (
        "Re-run the generation job of a market (--market, repeatable) under its id, with its stored seeds and "
        "the credential it retained: what POST .../markets/{marketId}/generation does for a user, without the "
        "user. An operator has no user's bearer, so neither fresh catalogue seeds nor a new credential can be "
        "obtained: a job that holds no credential (every outcome but RETRIES_EXHAUSTED ends it) is refused, "
        "and the market's user regenerates it from the UI; so is a job a market's delete cancelled "
        "(MARKET_DELETED), and the job an earlier, deleted market of the same slice left behind; a job already "
        "running is left alone (so a second run exits 0). Dry run unless --apply."
    )
    filters = ()

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--market", action="append", required=True, metavar="MARKET_ID", help="the market's id (repeat for several)"
        )

    def run(self, options):
        done = found = 0
        markets = []
        for value in options["market"]:
            try:
                markets.append(uuid.UUID(value.strip()))
            except ValueError:
                raise UsageError(f"--market must be a market id (a UUID), got {value!r}.") from None
        for market_id in dict.fromkeys(markets):
            market = Market.objects.filter(id=market_id).first()
            if market is None:
                self.needs_attention = True  # the operator named a market that does not exist
                self.missing += 1
                self.stdout.write(f"market {market_id}  not found (deleted, or never created)")
                continue
            job_id = generation_job_id(market.brand_id, market.geo_target_id, market.language_code)
            job = AsyncJob.objects.filter(id=job_id).first()
            label = f"{market.country}/{market.language_code}, job {job_id}"
            if job is None:
                self.needs_attention = True
                why = (
                    f"its generation could not be enqueued ({market.generation_not_enqueued})"
                    if market.generation_not_enqueued
                    else "none was enqueued for it, or its record was purged"
                )
                self.stdout.write(
                    f"{market_id}  cannot re-run  {market.country}/{market.language_code}: no generation job exists "
                    f"({why}): its user regenerates it from the UI"
                )
                continue
            if (job.params or {}).get("marketId") != str(market.id):
                # The slice's job id is deterministic: this job was an earlier market's of the same slice, deleted
                # since (its generation cancelled). Nothing of it may touch the market made again.
                self.needs_attention = True
                ended = f"{job.status} {job.error_code or ''}".rstrip()
                self.stdout.write(
                    f"{market_id}  cannot re-run  {label}: the job is of an earlier market of this slice, deleted "
                    f"since ({ended}): its user starts this market's generation from the UI"
                )
                continue
            if job.status == JobStatus.IN_PROGRESS:
                # Already back at work (a second run, or its user regenerated it): nothing to do.
                self.stdout.write(f"{market_id}  already running  {label} IN_PROGRESS: nothing to do")
                continue
            found += 1
            rerun = job_services.job_rerun(job.id, actor=self.actor) if self.apply else None
            done += bool(rerun and rerun.done)
            self.item(
                market_id,
                "re-run generation",
                f"{label} {job.status} {job.error_code or ''}".rstrip(),
                rerun.done if rerun else None,
                why_not=rerun.why_not if rerun else "",
            )
        self.summary(found, "markets to re-run", done=done, verb="re-run", missing_noun="market")
