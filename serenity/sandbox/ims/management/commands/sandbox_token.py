"""Print a user bearer signed by the IMS simulator, for curl walkthroughs of the local API."""
from django.core.management.base import BaseCommand, CommandError

from serenity.sandbox.ims.keys import issue_user_token


class Command(BaseCommand):
    help = (
        "Run on a local checkout to get a bearer for calling the API by hand: prints only the token, "
        "so `TOKEN=$(python manage.py sandbox_token --user-id u1 --org ORG@AdobeOrg)` works."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user-id", required=True, help="IMS user_id claim")
        parser.add_argument("--org", action="append", required=True, dest="orgs", metavar="IMS_ORG_ID",
                            help="IMS org id the caller may access; repeat for more")
        parser.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (default 3600)")

    def handle(self, *args, user_id, orgs, ttl, **options):
        if not user_id.strip():
            raise CommandError("--user-id must not be empty")
        if ttl <= 0:
            raise CommandError("--ttl must be a positive number of seconds")
        self.stdout.write(issue_user_token(user_id=user_id, org_ids=orgs, ttl=ttl))
