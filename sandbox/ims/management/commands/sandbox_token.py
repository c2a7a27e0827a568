"""Print a token for curl walkthroughs of the local API: an IMS user token signed by the IMS simulator; with
--session the SpaceCat session token the original's UI calls with; with --promise a promise token of the Semrush
pair, URL-encoded as that UI sends it in x-promise-token (each exchange rotates it: one per request)."""

from urllib.parse import quote

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sandbox.ims import services
from sandbox.ims.keys import issue_user_token
from sandbox.ims.sessions import issue_session_token


def mint_promise_token(*, user_id: str, org_ids: list[str]) -> str:
    """A live promise token of the Semrush pair for the user, as IMS mints it for the UI."""
    pair = settings.IMS_CLIENT_PAIRS["semrush"]
    answer = services.mint(
        {
            "client_id": pair["emitter_client_id"],
            "client_secret": pair["emitter_client_secret"],
            "definition_id": pair["emitter_definition_id"],
            "user_token": issue_user_token(user_id=user_id, org_ids=org_ids),
        }
    )
    return answer["promise_token"]


class Command(BaseCommand):
    help = (
        "Run on a local checkout to get a bearer for calling the API by hand: prints only the token, "
        "so `TOKEN=$(python manage.py sandbox_token --user-id u1 --org ORG@AdobeOrg)` works."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user-id", required=True, help="IMS user_id claim")
        parser.add_argument(
            "--org",
            action="append",
            required=True,
            dest="orgs",
            metavar="IMS_ORG_ID",
            help="IMS org id the caller may access; repeat for more",
        )
        parser.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (default 3600)")
        kind = parser.add_mutually_exclusive_group()
        kind.add_argument(
            "--session", action="store_true", help="a SpaceCat session token (ES256) instead of an IMS user token"
        )
        kind.add_argument(
            "--promise",
            action="store_true",
            help="a promise token of the Semrush pair, URL-encoded, for x-promise-token",
        )

    def handle(self, *args, user_id, orgs, ttl, session, promise, **options):
        if not user_id.strip():
            raise CommandError("--user-id must not be empty")
        if ttl <= 0:
            raise CommandError("--ttl must be a positive number of seconds")
        if promise:
            self.stdout.write(quote(mint_promise_token(user_id=user_id, org_ids=orgs), safe=""))
            return
        issue = issue_session_token if session else issue_user_token
        self.stdout.write(issue(user_id=user_id, org_ids=orgs, ttl=ttl))
