"""The shared world of the conformance suite: an organization with Serenity, an active brand with its Semrush
sub-workspace and base site, and a caller who calls the running service over real HTTP as the original's UI
does.

Every answer a test gets through `world.api` is checked when the test ends: each 2xx and 4xx body must validate
against the original's response schema for its route and status (answers.py, schemas/original.yaml).

Every conformance test runs twice, once per kind of caller (`caller` is parametrized):

- `ims`: an IMS user access token as the bearer. Semrush calls inside a request act with it.
- `session`: a SpaceCat session token as the bearer (what the original's sign-in gives its UI), and, on every
  request that reaches Semrush or IMS, a fresh promise token of the same user in `x-promise-token`, URL-encoded
  as the UI sends it, with `x-promise-audience: semrush`.
"""

from dataclasses import dataclass, field
from urllib.parse import quote

import httpx
import pytest

from jobs.models import AsyncJob
from markets.clients.semrush import SemrushClient
from markets.models import Brand, Organization
from sandbox.ims.keys import issue_user_token
from sandbox.ims.sessions import issue_session_token
from tests.conformance import answers
from tests.markets.factories import BrandFactory, GenerationJobFactory, OrganizationFactory
from tokens.clients import ims as ims_client
from tokens.pairs import get_pair

ORG_IMS_ID = "5E7A11C0FFEE0000C0FFEE00@AdobeOrg"
OTHER_IMS_ID = "0FF1CE0000000000000000AA@AdobeOrg"
USER_ID = "conformance-user"
SEMRUSH_AUDIENCE = {"x-promise-audience": "semrush"}
# Planted in the stored fields of jobs whose answers must not show them.
SECRET = "PLANTED-SECRET-c0nf0rm"


@dataclass
class Caller:
    """One user, signed in as the kind says. `headers()` is what the UI sends with a request."""

    kind: str
    user_id: str
    ims_token: str
    bearer: str
    forwarded: list[str] = field(default_factory=list)

    @property
    def is_session(self) -> bool:
        return self.kind == "session"

    def promise_token(self) -> str:
        """A fresh promise token of this user for the Semrush pair, URL-encoded as the UI sends it."""
        token = ims_client.mint(bearer=self.ims_token, pair=get_pair("semrush")).promise_token
        self.forwarded.append(token)
        return quote(token, safe="")

    def headers(self, *, promise: bool) -> dict:
        """The bearer, and for a session caller on a request that reaches Semrush (`promise`) a promise token."""
        headers = {"Authorization": f"Bearer {self.bearer}"}
        if promise:
            headers.update(SEMRUSH_AUDIENCE)
            if self.is_session:
                headers["x-promise-token"] = self.promise_token()
        return headers


def make_caller(kind: str, *, user_id: str = USER_ID, org_ids: tuple[str, ...] = (ORG_IMS_ID,)) -> Caller:
    ims_token = issue_user_token(user_id=user_id, org_ids=list(org_ids))
    # A session token's email differs from its user id, so that a job's requester is seen to be the id.
    bearer = (
        ims_token
        if kind == "ims"
        else issue_session_token(user_id=user_id, org_ids=list(org_ids), email=f"{user_id}@example.com")
    )
    return Caller(kind=kind, user_id=user_id, ims_token=ims_token, bearer=bearer)


class Api:
    """Real HTTP to the running service (pytest-django's live server), as `caller`."""

    def __init__(self, base_url: str, caller: Caller):
        self.answers: list[httpx.Response] = []
        self.http = httpx.Client(base_url=base_url, timeout=120, event_hooks={"response": [self._collect]})
        self.caller = caller

    def _collect(self, response: httpx.Response) -> None:
        """Every answer, kept to be checked against the original's schemas when the test ends."""
        response.read()
        self.answers.append(response)

    def post(
        self, path: str, body=None, *, promise: bool = True, headers: dict | None = None, caller: Caller | None = None
    ) -> httpx.Response:
        """POST `body` as JSON (None: no body at all); `promise` says whether the request reaches Semrush."""
        sent = {**(caller or self.caller).headers(promise=promise), **(headers or {})}
        if body is None:
            return self.http.post(path, headers=sent)
        return self.http.post(path, json=body, headers=sent)

    def get(
        self, path: str, *, promise: bool = False, headers: dict | None = None, caller: Caller | None = None
    ) -> httpx.Response:
        return self.http.get(path, headers={**(caller or self.caller).headers(promise=promise), **(headers or {})})

    def delete(
        self, path: str, *, promise: bool = True, headers: dict | None = None, caller: Caller | None = None
    ) -> httpx.Response:
        return self.http.delete(path, headers={**(caller or self.caller).headers(promise=promise), **(headers or {})})


@dataclass
class World:
    org: Organization
    brand: Brand
    caller: Caller
    api: Api

    @property
    def brands_path(self) -> str:
        return f"/v2/orgs/{self.org.id}/brands"

    def path(self, tail: str, brand: Brand | None = None) -> str:
        return f"/v2/orgs/{self.org.id}/brands/{(brand or self.brand).id}/serenity/{tail}"

    def org_path(self, tail: str, org=None) -> str:
        """An organization-level route: `/v2/orgs/{orgId}/serenity/{tail}`."""
        return f"/v2/orgs/{org or self.org.id}/serenity/{tail}"

    def job_path(self, job_id, brand: Brand | None = None) -> str:
        return self.path(f"markets/generation/jobs/{job_id}", brand)

    def other_caller(self, **kwargs) -> Caller:
        """Another caller of the same kind (another user, or a member of other organizations)."""
        return make_caller(self.caller.kind, **kwargs)

    def brand_with_workspace(self, **fields) -> Brand:
        workspace = SemrushClient(self.caller.ims_token).create_workspace(
            name=fields.get("name", "Brand"), parent_id="serenity"
        )
        return BrandFactory(organization=self.org, semrush_workspace_id=workspace, **fields)

    def job(self, *, brand: Brand | None = None, **fields) -> AsyncJob:
        """A generation job of this world's caller, with SECRET planted where no answer may show it."""
        brand = brand or self.brand
        values = {
            "organization_id": self.org.id,
            "brand_id": brand.id,
            "site_id": brand.base_site_id,
            "user_id": self.caller.user_id,
            "params": {"promiseToken": {"promise_token": SECRET}, "seeds": [{"topic": SECRET}]},
            "checkpoints": {"note": SECRET},
        }
        return GenerationJobFactory(**{**values, **fields})


@pytest.fixture(params=["ims", "session"])
def caller(request, sims) -> Caller:
    return make_caller(request.param)


@pytest.fixture
def world(sims, caller, queues) -> World:
    org = OrganizationFactory(ims_org_id=ORG_IMS_ID, name="Nordlicht Group")
    api = Api(sims.url, caller)
    world = World(org=org, brand=None, caller=caller, api=api)
    world.brand = world.brand_with_workspace(
        name="Nordlicht Outdoor", domain="nordlicht-outdoor.example", aliases=["Nordlicht"]
    )
    yield world
    api.http.close()
    wrong = [failure for answer in api.answers for failure in answers.failures(answer)]
    assert not wrong, "answers that break the original's schemas:\n" + "\n".join(wrong)


@pytest.fixture
def async_on(settings):
    """Prompt generation by the producer (SERENITY_ASYNC_PROMPT_GEN): `generatePrompts: true` queues a job."""
    settings.SERENITY_ASYNC_PROMPT_GEN = "TRUE"


def problem(response: httpx.Response, status: int, error: str) -> dict:
    """The problem document of `response`, checked for its status, content type, the original's `error` token,
    and on a 403 or 404 the `x-error` header the original sets to the message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert (body["status"], body["error"]) == (status, error), body
    if status in (403, 404):
        assert response.headers["x-error"] == body["message"]
    return body
