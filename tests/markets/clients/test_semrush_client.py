"""The Semrush client against the Semrush simulator over real HTTP."""

import json
import logging
import threading
import time
from datetime import UTC, datetime

import httpx
import pytest

from markets.clients.semrush import SemrushClient
from sandbox.ims import keys
from sandbox.semrush import controls, state
from serenity.clients.http import PermanentError, ReauthRequired, TransientError
from tests.waits import wait_until

WORKSPACE = "ws_client_tests"
AT = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)


@pytest.fixture
def token(bearer):
    return bearer(user_id="user-1", org_ids=["ORG1@AdobeOrg"])


@pytest.fixture
def semrush(token, settings):
    settings.SEMRUSH_TIMEOUT_SECONDS = 2.0
    return SemrushClient(token)


@pytest.fixture
def project(semrush):
    return semrush.create_project(workspace_id=WORKSPACE, name="France", geo_target_id=2250, language_code="fr")


@pytest.fixture
def tag_ids(semrush):
    return semrush.ensure_tags(workspace_id=WORKSPACE, wanted={"source": ["semrush"], "origin": ["ai"]})


def statuses(path_contains, method=None):
    return [c["status"] for c in state.calls(path_contains=path_contains, method=method)]


# -- catalogue -------------------------------------------------------------------------------------


def test_brand_topics_returns_the_catalogue_items_exactly_as_served(semrush):
    items = [
        {"topic": "espresso machines", "volume": 1900, "examplePrompts": ["Which espresso machine is best?"]},
        {"topic": None, "volume": "n/a", "examplePrompts": ["", None]},
    ]
    controls.set_catalogue(domain="acme.example", country="US", items=items)

    assert semrush.brand_topics(workspace_id=WORKSPACE, domain="acme.example", country="US") == items
    assert state.calls(path_contains="/brand-topics") == [
        {
            "method": "GET",
            "path": f"/sandbox/semrush/v1/workspaces/{WORKSPACE}/brand-topics",
            "query": "domain=acme.example&country=US",
            "status": 200,
            "userId": "user-1",
        }
    ]


def test_brand_topics_of_an_empty_catalogue_is_an_empty_list(semrush):
    controls.set_catalogue(domain="acme.example", country="FR", items=[])

    assert semrush.brand_topics(workspace_id=WORKSPACE, domain="acme.example", country="FR") == []


def test_brand_topics_of_a_generated_catalogue_is_deterministic(semrush):
    first = semrush.brand_topics(workspace_id=WORKSPACE, domain="acme.example", country="DE")
    second = semrush.brand_topics(workspace_id="ws_other", domain="acme.example", country="DE")

    assert first == second
    assert len(first) == 65


def test_brand_topics_without_a_workspace_is_refused_before_any_call(semrush):
    with pytest.raises(PermanentError):
        semrush.brand_topics(workspace_id=None, domain="acme.example", country="US")

    assert state.calls() == []


# -- workspaces and projects -----------------------------------------------------------------------


def test_create_workspace_returns_the_new_sub_workspace_id(semrush):
    workspace_id = semrush.create_workspace(name="Acme", parent_id="serenity")

    assert workspace_id.startswith("ws_")
    assert [(w["id"], w["name"]) for w in state.workspaces(parent_id="serenity")] == [(workspace_id, "Acme")]


def test_find_project_is_none_before_the_project_exists(semrush):
    assert semrush.find_project(workspace_id=WORKSPACE, geo_target_id=2250, language_code="fr") is None


def test_create_project_returns_the_project_that_find_project_then_finds(semrush):
    created = semrush.create_project(workspace_id=WORKSPACE, name="France", geo_target_id=2250, language_code="fr")

    assert created == {
        "id": created["id"],
        "name": "France",
        "geoTargetId": 2250,
        "languageCode": "fr",
        "published": False,
    }
    assert semrush.find_project(workspace_id=WORKSPACE, geo_target_id=2250, language_code="fr") == created
    assert semrush.find_project(workspace_id=WORKSPACE, geo_target_id=2250, language_code="en") is None


def test_creating_an_existing_project_returns_the_existing_one(semrush, project):
    again = semrush.create_project(workspace_id=WORKSPACE, name="France again", geo_target_id=2250, language_code="fr")

    assert again == project
    assert [p["id"] for p in state.projects(WORKSPACE)] == [project["id"]]
    assert statuses("/ai-projects", "POST") == [201, 409]


# -- tags ------------------------------------------------------------------------------------------


def test_delete_project_deletes_it_then_finds_it_gone(semrush, project):
    assert semrush.delete_project(workspace_id=WORKSPACE, project_id=project["id"]) is True
    assert semrush.delete_project(workspace_id=WORKSPACE, project_id=project["id"]) is False
    assert statuses("/ai-projects/", method="DELETE") == [204, 404]
    assert state.project(project["id"]) is None


def test_delete_project_raises_what_semrush_answers_besides_404(semrush, project):
    controls.fail_next(4, status=503, path="/ai-projects/", method="DELETE")

    with pytest.raises(TransientError):
        semrush.delete_project(workspace_id=WORKSPACE, project_id=project["id"])
    assert state.project(project["id"]) is not None


def test_ai_models_reads_every_page_until_a_short_one(semrush, monkeypatch):
    from markets.clients import semrush as client_module
    from sandbox.semrush.ai_models import AI_MODELS

    monkeypatch.setattr(client_module, "AI_MODELS_PAGE_SIZE", 4)

    assert semrush.ai_models() == list(AI_MODELS)
    assert [c["query"] for c in state.calls(path_contains="/ai_models")] == ["page=1&limit=4", "page=2&limit=4"]


def test_the_language_catalogue_is_read_once_for_languages_and_the_catalogue(semrush):
    from markets.clients import semrush as client_module

    client_module._languages.clear()

    catalogue = semrush.language_catalogue()

    assert semrush.languages() == [item for item in catalogue if "code" in item]
    assert len(state.calls(path_contains="/v1/languages")) == 1


def test_ensure_tags_creates_missing_roots_and_values_and_returns_their_ids(semrush):
    ids = semrush.ensure_tags(workspace_id=WORKSPACE, wanted={"source": ["semrush"], "origin": ["ai", "human"]})

    assert ids == {
        ("source", "semrush"): state.tag_values(WORKSPACE)["source"]["semrush"],
        ("origin", "ai"): state.tag_values(WORKSPACE)["origin"]["ai"],
        ("origin", "human"): state.tag_values(WORKSPACE)["origin"]["human"],
    }
    assert len(set(ids.values())) == 3


def test_ensure_tags_reuses_existing_tags_without_creating_any(semrush, tag_ids):
    again = semrush.ensure_tags(workspace_id=WORKSPACE, wanted={"source": ["semrush"], "origin": ["ai"]})

    assert again == tag_ids
    assert statuses("/tags", "POST") == [201, 201]  # only the first call's two tags, each with its value


def test_ensure_tags_adds_a_missing_value_to_an_existing_tag(semrush, tag_ids):
    ids = semrush.ensure_tags(workspace_id=WORKSPACE, wanted={"origin": ["ai", "human"]})

    assert ids == {
        ("origin", "ai"): tag_ids[("origin", "ai")],
        ("origin", "human"): state.tag_values(WORKSPACE)["origin"]["human"],
    }
    assert statuses("/values", "POST") == [201]


def _ensure_concurrently(token, wanted) -> list:
    # Both callers read the taxonomy before either writes: the latency holds every request back.
    controls.set_latency(200)
    barrier = threading.Barrier(2)
    results, errors = [], []

    def ensure():
        try:
            barrier.wait()
            results.append(SemrushClient(token).ensure_tags(workspace_id=WORKSPACE, wanted=wanted))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ensure) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    controls.set_latency(0)
    assert errors == []
    return results


def test_concurrent_duplicate_tag_creates_end_with_one_tag_and_the_same_ids(token):
    results = _ensure_concurrently(token, {"source": ["semrush"]})

    tag_id = state.tag_values(WORKSPACE)["source"]["semrush"]
    assert results == [{("source", "semrush"): tag_id}] * 2
    assert state.tag_values(WORKSPACE) == {"source": {"semrush": tag_id}}
    # Both created the tag: one won, the other's 409 was absorbed by re-reading.
    assert sorted(statuses(f"/v1/workspaces/{WORKSPACE}/tags", "POST")) == [201, 409]


def test_concurrent_duplicate_tag_value_creates_end_with_one_value_and_the_same_ids(token):
    from sandbox.semrush import services

    services.tag_root_create(workspace_id=WORKSPACE, name="origin")

    results = _ensure_concurrently(token, {"origin": ["ai"]})

    tag_id = state.tag_values(WORKSPACE)["origin"]["ai"]
    assert results == [{("origin", "ai"): tag_id}] * 2
    assert state.tag_values(WORKSPACE) == {"origin": {"ai": tag_id}}
    assert sorted(statuses("/values", "POST")) == [201, 409]


# -- prompts ---------------------------------------------------------------------------------------


def test_write_prompts_records_text_tags_and_metadata_exactly(semrush, project, tag_ids):
    tags = [tag_ids[("source", "semrush")], tag_ids[("origin", "ai")]]

    ids = semrush.write_prompts(
        project_id=project["id"],
        user_id="user-1",
        at=AT,
        prompts=[
            {"text": "Quelle cafetière choisir ?", "tagIds": tags},
            {"text": "Où acheter du café ?", "tagIds": []},
        ],
    )

    stamp = "2025-03-04T05:06:07+00:00"
    assert state.prompts(project["id"]) == [
        {
            "id": ids[0],
            "text": "Quelle cafetière choisir ?",
            "tagIds": tags,
            "createdBy": "user-1",
            "createdAt": stamp,
            "updatedBy": "user-1",
            "updatedAt": stamp,
        },
        {
            "id": ids[1],
            "text": "Où acheter du café ?",
            "tagIds": [],
            "createdBy": "user-1",
            "createdAt": stamp,
            "updatedBy": "user-1",
            "updatedAt": stamp,
        },
    ]


def test_write_prompts_sends_at_most_100_per_call(semrush, project):
    ids = semrush.write_prompts(
        project_id=project["id"],
        user_id="user-1",
        at=AT,
        prompts=[{"text": f"prompt {i}", "tagIds": []} for i in range(250)],
    )

    assert len(ids) == len(set(ids)) == 250
    assert [p["id"] for p in state.prompts(project["id"])] == ids
    assert statuses("/prompts", "POST") == [201, 201, 201]


def test_resending_the_same_batch_returns_the_first_ids_without_duplicates(semrush, project):
    batch = [{"text": "one", "tagIds": []}, {"text": "two", "tagIds": []}]

    first = semrush.write_prompts(project_id=project["id"], user_id="user-1", prompts=batch, at=AT)
    second = semrush.write_prompts(project_id=project["id"], user_id="user-1", prompts=batch)

    assert second == first
    assert [p["text"] for p in state.prompts(project["id"])] == ["one", "two"]


def test_write_prompts_without_a_user_is_refused_before_any_call(semrush, project):
    with pytest.raises(PermanentError):
        semrush.write_prompts(project_id=project["id"], user_id="", prompts=[{"text": "one", "tagIds": []}])

    assert state.calls(path_contains="/prompts") == []


def test_list_prompts_reads_every_page(semrush, project):
    written = semrush.write_prompts(
        project_id=project["id"],
        user_id="user-1",
        at=AT,
        prompts=[{"text": f"prompt {i}", "tagIds": []} for i in range(250)],
    )

    listed = semrush.list_prompts(project_id=project["id"])

    assert listed == state.prompts(project["id"])
    assert [p["id"] for p in listed] == written
    assert [c["query"] for c in state.calls(path_contains="/prompts", method="GET")] == [
        "limit=100",
        f"limit=100&cursor={_seq_after(listed, 100)}",
        f"limit=100&cursor={_seq_after(listed, 200)}",
    ]


def _seq_after(listed, n):
    from sandbox.semrush.models import Prompt

    return Prompt.objects.get(prompt_id=listed[n - 1]["id"]).seq


# -- publish ---------------------------------------------------------------------------------------


def test_publish_makes_a_draft_project_published(semrush, project):
    assert semrush.publish_status(project_id=project["id"]) == "draft"

    answer = semrush.publish(project_id=project["id"])

    assert answer == {"published": True, "publishedAt": state.project(project["id"])["publishedAt"]}
    assert semrush.publish_status(project_id=project["id"]) == "published"


def test_writing_prompts_after_publishing_leaves_unpublished_changes(semrush, project):
    semrush.publish(project_id=project["id"])

    semrush.write_prompts(project_id=project["id"], user_id="user-1", prompts=[{"text": "new", "tagIds": []}])

    assert semrush.publish_status(project_id=project["id"]) == "draft"


# -- errors, retries and deadlines -----------------------------------------------------------------


def test_429_is_retried_after_the_advertised_retry_after(semrush, project):
    controls.fail_next(1, status=429, retry_after=1, path="/publish")
    started = time.monotonic()

    assert semrush.publish(project_id=project["id"])["published"] is True

    assert time.monotonic() - started >= 1.0
    assert statuses("/publish") == [429, 200]


def test_503_twice_then_success_is_retried_to_success(semrush, project):
    controls.fail_next(2, status=503, path="/publish")

    assert semrush.publish(project_id=project["id"])["published"] is True

    assert statuses("/publish") == [503, 503, 200]
    assert state.project(project["id"])["published"] is True


def test_exhausted_retries_raise_transient_error(semrush, project):
    controls.fail_next(10, status=500, retry_after=0, path="/publish")

    with pytest.raises(TransientError) as raised:
        semrush.publish(project_id=project["id"])

    assert raised.value.status == 500
    assert statuses("/publish") == [500, 500, 500, 500]
    assert state.project(project["id"])["published"] is False


def test_401_raises_reauth_required_without_retrying(bearer, project):
    expired = bearer(user_id="user-1", ttl=-120)

    with pytest.raises(ReauthRequired) as raised:
        SemrushClient(expired).publish(project_id=project["id"])

    assert raised.value.status == 401
    assert statuses("/publish") == [401]


def test_a_bearer_signed_by_another_key_raises_reauth_required(bearer, project):
    forged = bearer(user_id="user-1", key=keys.new_rsa_key())

    with pytest.raises(ReauthRequired):
        SemrushClient(forged).list_prompts(project_id=project["id"])


def test_404_raises_permanent_error(semrush):
    with pytest.raises(PermanentError) as raised:
        semrush.publish_status(project_id="prj_missing")

    assert raised.value.status == 404
    assert statuses("/v1/ai-projects/prj_missing") == [404]


def test_retries_stop_before_the_deadline(token, project):
    controls.fail_next(10, status=503, retry_after=5, path="/publish")
    started = time.monotonic()

    with pytest.raises(TransientError):
        SemrushClient(token, deadline=started + 0.5).publish(project_id=project["id"])

    # The advertised Retry-After (5 s) lies past the deadline: no second attempt was made.
    assert statuses("/publish") == [503]


def test_a_slow_answer_is_cut_off_at_the_deadline(token, project, settings):
    settings.SEMRUSH_TIMEOUT_SECONDS = 5.0
    controls.set_latency(800)
    started = time.monotonic()

    with pytest.raises(TransientError):
        SemrushClient(token, deadline=started + 0.4).publish_status(project_id=project["id"])

    # Without the deadline the call would have succeeded after the 800 ms latency (the timeout is 5 s): the
    # TransientError is the cut-off, and it came no earlier than the deadline.
    assert time.monotonic() - started >= 0.35
    # The simulator still answers the abandoned attempt; wait for it so the test ends quiet.
    wait_until(lambda: statuses("/v1/ai-projects/") == [200], timeout=5.0, what="the abandoned attempt's answer")


def test_a_past_deadline_sends_nothing(token):
    with pytest.raises(TransientError):
        SemrushClient(token, deadline=time.monotonic() - 1).publish_status(project_id="prj_any")

    assert state.calls() == []


# -- the bearer stays secret -----------------------------------------------------------------------


def test_the_bearer_appears_in_no_log_line_state_or_call_record(semrush, token, project, tag_ids, sims, caplog):
    caplog.set_level(logging.DEBUG)
    controls.fail_next(1, status=503, retry_after=0, path="/prompts")
    semrush.write_prompts(project_id=project["id"], user_id="user-1", prompts=[{"text": "one", "tagIds": []}])
    semrush.list_prompts(project_id=project["id"])
    with pytest.raises(ReauthRequired):
        SemrushClient(token + "x").publish(project_id=project["id"])

    snapshot = httpx.get(f"{sims.url}/sandbox/semrush/_state").text

    assert "retrying after transient error" in caplog.text
    assert token not in caplog.text
    assert token not in snapshot
    assert token not in json.dumps(state.calls())
    assert token not in repr(semrush)
