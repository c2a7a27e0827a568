"""`manage.py sandbox_token`: a user bearer for walkthroughs, printed alone."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from serenity.auth import verify_bearer


def test_sandbox_token_prints_only_a_bearer_the_api_accepts(sims):
    out = StringIO()

    call_command("sandbox_token", "--user-id", "cli-user", "--org", "A@AdobeOrg", "--org", "B@AdobeOrg", stdout=out)

    token = out.getvalue().strip()
    assert out.getvalue() == token + "\n"
    caller = verify_bearer(token)
    assert (caller.user_id, caller.org_ids) == ("cli-user", frozenset({"A@AdobeOrg", "B@AdobeOrg"}))


def test_sandbox_token_without_an_org_is_an_error(db):
    with pytest.raises(CommandError, match="--org"):
        call_command("sandbox_token", "--user-id", "cli-user", stdout=StringIO())


def test_sandbox_token_refuses_a_non_positive_ttl(db):
    with pytest.raises(CommandError, match="--ttl"):
        call_command("sandbox_token", "--user-id", "cli-user", "--org", "A@AdobeOrg", "--ttl", "0", stdout=StringIO())
