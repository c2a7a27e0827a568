"""`manage.py limits_reset`: an operator sees what a tenant spent, and gives it back with --apply alone."""

import uuid
from io import StringIO

import pytest
from django.core.management import call_command

from serenity import limits


def run(*args) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("limits_reset", *args, stdout=out)
        return 0, out.getvalue()
    except SystemExit as exc:
        return exc.code, out.getvalue()


@pytest.fixture
def spent(throttle_rates):
    throttle_rates(org_markets="10/hour", onboarding="5/min")
    org = uuid.uuid4()
    limits.charge_org(limits.ORG_MARKETS, org, weight=10)
    limits.charge(limits.ONBOARDING, "user-7", weight=5)
    return org


def test_a_dry_run_shows_what_an_organization_spent_and_changes_nothing(spent):
    code, out = run("--org", str(spent))

    assert code == 1  # found work a dry run did not do
    assert f"organization {spent}  reset org_markets  10 of 10/hour spent  [dry run]" in out
    with pytest.raises(limits.Throttled):
        limits.charge_org(limits.ORG_MARKETS, spent)


def test_apply_gives_the_budget_back_to_that_tenant_alone(spent):
    other = uuid.uuid4()
    limits.charge_org(limits.ORG_MARKETS, other, weight=10)

    code, out = run("--org", str(spent), "--apply")

    assert code == 0 and "1 of 1 spent budgets reset" in out
    limits.charge_org(limits.ORG_MARKETS, spent, weight=10)  # the whole budget again
    with pytest.raises(limits.Throttled):
        limits.charge_org(limits.ORG_MARKETS, other)


def test_a_user_and_one_scope(spent):
    code, out = run("--user", "user-7", "--scope", limits.REAUTH, "--apply")
    assert (code, out.strip()) == (0, "No spent budgets found: nothing to do.")

    code, out = run("--user", "user-7", "--scope", limits.ONBOARDING, "--apply")
    assert code == 0 and "user user-7  reset onboarding  5 of 5/min spent  [done]" in out


def test_an_org_that_is_not_an_id_is_a_usage_error(db):
    with pytest.raises(Exception) as raised:
        call_command("limits_reset", "--org", "acme")
    assert getattr(raised.value, "returncode", None) == 2 and "--org must be an organization id" in str(raised.value)
