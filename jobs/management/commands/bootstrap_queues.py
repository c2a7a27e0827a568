"""Create (on a local SQS) or verify (in a deployment) the market-jobs queue, its DLQ and the readiness flag."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs import readiness
from jobs.clients import sqs


class Command(BaseCommand):
    help = (
        "Run before starting workers. Local (the default when SERENITY_ENVIRONMENT is local, or --local): "
        "create the DLQ and the market-jobs queue on the local SQS, bring their attributes to the expected "
        "values and set the consumer-readiness parameter to `true`; run it after every start of the local SQS, "
        "which keeps nothing across restarts. Deployed (the default elsewhere, or --verify): check the queues "
        "without creating or changing anything and exit non-zero listing every problem; run it in the release "
        "step before new workers start. Safe to run twice."
    )
    # Talks to SQS only: the checks (and a database) are not needed to bootstrap a queue.
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--local",
            dest="local",
            action="store_true",
            default=None,
            help="Create the queues and set the readiness parameter (local SQS only).",
        )
        mode.add_argument("--verify", dest="local", action="store_false", help="Only check the queues; change nothing.")

    def handle(self, *args: str, local: bool | None = None, **options: Any) -> None:
        local = settings.IS_LOCAL if local is None else local
        if local:
            self._create()
        else:
            self._verify()

    def _create(self) -> None:
        # Creating queues and declaring the consumer ready belong to the environment's provisioning in AWS;
        # from here they are only for a local endpoint (moto), never for the real service.
        if not settings.IS_LOCAL and not settings.AWS_ENDPOINT_URL:
            raise CommandError(
                "--local creates queues and marks the consumer ready: it needs a local SQS endpoint "
                "(SERENITY_ENVIRONMENT=local or AWS_ENDPOINT_URL). Use --verify against AWS."
            )
        try:
            for line in sqs.ensure_queues():
                self.stdout.write(line)
            readiness.readiness_set("true")
        except sqs.AWSError as exc:
            raise CommandError(
                f"The local SQS at {settings.AWS_ENDPOINT_URL or 'AWS'} did not answer ({type(exc).__name__}). "
                "Start it with `python -m moto.server -H 127.0.0.1 -p 5055`, or run `make run`."
            ) from exc
        self.stdout.write(f"readiness parameter set: {settings.READINESS_PARAMETER} = true")
        self.stdout.write(self.style.SUCCESS("queues bootstrapped"))

    def _verify(self) -> None:
        problems = sqs.verify_queues()
        if problems:
            listed = "\n".join(f"  - {problem}" for problem in problems)
            raise CommandError(
                f"{len(problems)} problem(s) with {settings.MARKET_JOBS_QUEUE} / {settings.MARKET_JOBS_DLQ}:\n{listed}"
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"queues verified: {settings.MARKET_JOBS_QUEUE} "
                f"(visibility {settings.QUEUE_VISIBILITY_TIMEOUT_SECONDS}s) redrives to {settings.MARKET_JOBS_DLQ}"
            )
        )
