"""The Semrush simulator's own behaviour: catalogue, bearer check, Semrush's rules, switches and inspection."""

import re
import threading

import httpx
import pytest

from sandbox.semrush import catalogue, controls, state
from sandbox.semrush.models import Project

STAMP = "2025-01-02T03:04:05+00:00"


@pytest.fixture
def api(sims, bearer):
    """An HTTP client on the simulator's API with a valid user bearer."""
    with httpx.Client(
        base_url=f"{sims.url}/sandbox/semrush", headers={"Authorization": f"Bearer {bearer(user_id='user-9')}"}
    ) as client:
        yield client


@pytest.fixture
def anonymous(sims):
    with httpx.Client(base_url=f"{sims.url}/sandbox/semrush") as client:
        yield client


@pytest.fixture
def project(api):
    return api.post(
        "/v1/workspaces/ws_1/ai-projects", json={"name": "France", "geoTargetId": 2250, "languageCode": "fr"}
    ).json()


def prompt(text, tag_ids=()):
    return {
        "text": text,
        "tagIds": list(tag_ids),
        "createdBy": "u",
        "createdAt": STAMP,
        "updatedBy": "u",
        "updatedAt": STAMP,
    }


# -- catalogue -------------------------------------------------------------------------------------


def test_catalogue_is_the_same_for_the_same_domain_and_country():
    assert catalogue.generate("acme.example", "FR") == catalogue.generate("ACME.example", "fr")


def test_catalogue_differs_between_countries_and_domains():
    assert catalogue.generate("acme.example", "FR") != catalogue.generate("acme.example", "BE")
    assert catalogue.generate("acme.example", "US") != catalogue.generate("other.example", "US")


def test_catalogue_has_sixty_ranked_topics_and_five_messy_items():
    items = catalogue.generate("acme.example", "US")

    clean = [
        i
        for i in items
        if i["topic"] and isinstance(i["volume"], int) and i["examplePrompts"] and all(i["examplePrompts"])
    ]
    assert len(items) == 65
    assert len(clean) == 60
    assert len({i["topic"] for i in clean}) == 60
    assert all(3 <= len(i["examplePrompts"]) <= 6 for i in clean)
    assert [(i["topic"], i["volume"]) for i in items if not i["topic"]] == [(None, 9100), ("", 8800)]
    assert any(i["volume"] == "n/a" for i in items)
    assert any(i["examplePrompts"] == [] for i in items)
    assert any(None in i["examplePrompts"] and "" in i["examplePrompts"] for i in items)
    # Not handed out ranked: the product sorts by volume itself.
    volumes = [i["volume"] for i in clean]
    assert volumes != sorted(volumes, reverse=True)


@pytest.mark.parametrize(
    ("country", "marker"),
    [
        ("US", "What"),
        ("GB", "What"),
        ("SE", "What"),
        ("FR", "Quel"),
        ("DE", "Welche"),
        ("ES", "¿Qué"),
        ("IT", "Qual"),
        ("NL", "Welk"),
        ("BR", "Qual"),
        ("PT", "Qual"),
    ],
)
def test_catalogue_is_written_in_the_country_main_language(country, marker):
    prompts = [p for i in catalogue.generate("acme.example", country) if i["topic"] for p in i["examplePrompts"] if p]

    assert any(p.startswith(marker) for p in prompts)
    assert not any(p.startswith("What") for p in prompts) or marker == "What"


def test_japanese_catalogue_is_written_in_japanese():
    prompts = [p for i in catalogue.generate("acme.example", "JP") for p in i["examplePrompts"] if p and p.strip()]

    assert all(re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", p) for p in prompts)


def test_catalogue_prompts_mention_the_brand_named_after_the_domain():
    prompts = [p for i in catalogue.generate("www.acme-coffee.example", "US") for p in i["examplePrompts"] if p]

    assert any("Acme Coffee" in p for p in prompts)
    assert not all("Acme Coffee" in p for p in prompts)


def test_catalogue_override_replaces_the_generated_catalogue_even_when_empty(api, anonymous):
    answer = anonymous.post(
        "/_control", json={"action": "catalogue", "domain": "acme.example", "country": "fr", "items": []}
    )

    assert answer.status_code == 200
    assert api.get("/v1/workspaces/ws_1/brand-topics", params={"domain": "acme.example", "country": "FR"}).json() == {
        "items": []
    }
    assert api.get("/v1/workspaces/ws_1/brand-topics", params={"domain": "acme.example", "country": "DE"}).json() == {
        "items": catalogue.generate("acme.example", "DE")
    }


def test_catalogue_for_a_bad_country_is_400(api):
    answer = api.get("/v1/workspaces/ws_1/brand-topics", params={"domain": "acme.example", "country": "FRA"})

    assert answer.status_code == 400
    assert answer.json() == {
        "error": {"code": "invalid_request", "message": "`country` must be an ISO 3166-1 alpha-2 code"}
    }


def test_the_language_catalogue_lists_every_language_an_ai_project_may_be_in(api):
    answer = api.get("/v1/languages")

    assert answer.status_code == 200
    items = answer.json()["items"]
    assert {"id", "name", "code"} <= set(items[0])
    assert {"name": "French", "code": "fr"}.items() <= next(i for i in items if i["code"] == "fr").items()


def test_the_ai_model_catalogue_is_served_a_page_at_a_time(api):
    from sandbox.semrush.ai_models import AI_MODELS

    first = api.get("/v1/ai_models", params={"page": 1, "limit": 4}).json()["items"]
    second = api.get("/v1/ai_models", params={"page": 2, "limit": 4}).json()["items"]
    past_the_end = api.get("/v1/ai_models", params={"page": 3, "limit": 4}).json()["items"]

    assert first + second == list(AI_MODELS) and len(first) == 4
    assert past_the_end == []
    assert api.get("/v1/ai_models").json()["items"] == list(AI_MODELS)
    assert all({"id", "key", "name", "icon"} == set(model) for model in first)


@pytest.mark.parametrize("query", [{"page": "0"}, {"limit": "101"}, {"page": "x"}])
def test_an_ai_model_page_out_of_range_is_400(api, query):
    assert api.get("/v1/ai_models", params=query).status_code == 400


# -- bearer ----------------------------------------------------------------------------------------


def test_a_call_without_a_bearer_is_401(anonymous):
    answer = anonymous.get("/v1/workspaces/ws_1/tags")

    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="semrush"'
    assert answer.json() == {"error": {"code": "unauthorized", "message": "a valid bearer token is required"}}
    assert state.calls() == [
        {"method": "GET", "path": "/sandbox/semrush/v1/workspaces/ws_1/tags", "query": "", "status": 401, "userId": ""}
    ]


def test_an_expired_bearer_is_401(anonymous, bearer):
    answer = anonymous.get("/v1/workspaces/ws_1/tags", headers={"Authorization": f"Bearer {bearer(ttl=-120)}"})

    assert answer.status_code == 401


def test_an_exchanged_access_token_is_accepted(anonymous):
    from sandbox.ims import keys

    token = keys.issue_access_token(
        user_id="user-7",
        org_ids=["ORG1@AdobeOrg"],
        client_id="semrush-consumer",
        scope="openid,AdobeID,semrush.read,semrush.write",
    )

    answer = anonymous.get("/v1/workspaces/ws_1/tags", headers={"Authorization": f"Bearer {token}"})

    assert answer.status_code == 200
    assert answer.json() == {"items": []}
    assert state.calls()[0]["userId"] == "user-7"


def test_an_access_token_without_a_semrush_scope_is_403(anonymous):
    from sandbox.ims import keys

    token = keys.issue_access_token(
        user_id="user-7", org_ids=["ORG1@AdobeOrg"], client_id="ims-default-consumer", scope="openid,AdobeID"
    )
    headers = {"Authorization": f"Bearer {token}"}

    write = anonymous.post("/v1/workspaces/ws_1/tags", json={"name": "source"}, headers=headers)

    assert write.status_code == 403
    assert write.json() == {
        "error": {"code": "insufficient_scope", "message": "the token's scope does not allow this call"}
    }
    assert state.tag_values("ws_1") == {}


def test_a_promise_token_is_not_accepted_as_a_bearer(anonymous):
    from sandbox.ims import keys

    promise = keys.issue_promise_token(user_id="user-7", client_id="semrush-emitter", ttl=600)

    answer = anonymous.get("/v1/workspaces/ws_1/tags", headers={"Authorization": f"Bearer {promise}"})

    assert answer.status_code == 401


# -- Semrush's rules -------------------------------------------------------------------------------


def test_a_duplicate_project_create_is_409_naming_the_existing_project(api, project):
    answer = api.post(
        "/v1/workspaces/ws_1/ai-projects", json={"name": "Again", "geoTargetId": 2250, "languageCode": "fr"}
    )

    assert answer.status_code == 409
    assert answer.json() == {
        "error": {
            "code": "duplicate",
            "message": "a project for this geo target and language exists",
            "existingId": project["id"],
        }
    }
    assert Project.objects.count() == 1


def test_a_created_project_is_a_draft_in_its_workspace(api, project):
    assert project == {
        "id": project["id"],
        "workspaceId": "ws_1",
        "name": "France",
        "geoTargetId": 2250,
        "languageCode": "fr",
        "status": "draft",
        "published": False,
        "publishedAt": None,
        "createdAt": project["createdAt"],
    }
    assert state.projects("ws_1") == [project]


def test_a_duplicate_tag_value_create_is_409_naming_the_existing_value(api):
    root = api.post("/v1/workspaces/ws_1/tags", json={"name": "origin"}).json()
    first = api.post(f"/v1/workspaces/ws_1/tags/{root['id']}/values", json={"value": "ai"}).json()

    answer = api.post(f"/v1/workspaces/ws_1/tags/{root['id']}/values", json={"value": "ai"})

    assert answer.status_code == 409
    assert answer.json() == {
        "error": {"code": "duplicate", "message": "this tag value exists", "existingId": first["id"]}
    }
    assert state.tag_values("ws_1") == {"origin": {"ai": first["id"]}}


def test_a_tag_is_created_with_its_first_values_in_one_call(api):
    answer = api.post("/v1/workspaces/ws_1/tags", json={"name": "intent", "values": ["buy", "learn", "buy"]})

    assert answer.status_code == 201
    values = state.tag_values("ws_1")["intent"]
    assert answer.json() == {
        "id": answer.json()["id"],
        "name": "intent",
        "values": [{"id": values["buy"], "value": "buy"}, {"id": values["learn"], "value": "learn"}],
    }


def test_a_prompt_naming_an_unknown_tag_is_400_and_nothing_is_written(api, project):
    answer = api.post(
        f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("fine"), prompt("bad", ["tv_nope"])]}
    )

    assert answer.status_code == 400
    assert answer.json() == {
        "error": {
            "code": "invalid_request",
            "message": "prompts[1].tagIds names tags this workspace does not have",
            "unknownTagIds": ["tv_nope"],
        }
    }
    assert state.prompts(project["id"]) == []


def test_a_prompt_without_metadata_is_400(api, project):
    bare = {"text": "no metadata", "tagIds": []}

    answer = api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [bare]})

    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "prompts[0].createdBy must be a non-empty string"


def test_more_than_100_prompts_in_one_write_is_400(api, project):
    answer = api.post(
        f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt(f"p{i}") for i in range(101)]}
    )

    assert answer.status_code == 400
    assert answer.json() == {
        "error": {"code": "invalid_request", "message": "at most 100 prompts per write", "limit": 100}
    }


def test_a_repeated_idempotency_key_replays_the_first_answer(api, project):
    body = {"prompts": [prompt("once")]}
    first = api.post(f"/v1/ai-projects/{project['id']}/prompts", json=body, headers={"Idempotency-Key": "k1"})

    again = api.post(f"/v1/ai-projects/{project['id']}/prompts", json=body, headers={"Idempotency-Key": "k1"})

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert [p["text"] for p in state.prompts(project["id"])] == ["once"]


def test_a_refused_write_is_not_remembered_under_its_idempotency_key(api, project):
    api.post(
        f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [{"text": "x"}]}, headers={"Idempotency-Key": "k2"}
    )

    answer = api.post(
        f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("x")]}, headers={"Idempotency-Key": "k2"}
    )

    assert answer.status_code == 201
    assert [p["text"] for p in state.prompts(project["id"])] == ["x"]


def test_an_unknown_project_is_404(api):
    answer = api.get("/v1/ai-projects/prj_missing/prompts")

    assert answer.status_code == 404
    assert answer.json() == {"error": {"code": "not_found", "message": "no such project"}}


def test_a_bad_cursor_is_400(api, project):
    assert api.get(f"/v1/ai-projects/{project['id']}/prompts", params={"cursor": "abc"}).status_code == 400


def test_deleting_a_project_removes_it_and_its_prompts_for_good(api, project):
    api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("Which tent?")]})

    answer = api.delete(f"/v1/workspaces/ws_1/ai-projects/{project['id']}")

    assert answer.status_code == 204 and answer.content == b""
    assert state.project(project["id"]) is None
    assert api.get(f"/v1/ai-projects/{project['id']}/prompts").status_code == 404
    assert api.post(f"/v1/ai-projects/{project['id']}/publish", json={}).status_code == 404


def test_deleting_a_project_again_or_from_another_workspace_is_404(api, project):
    assert api.delete(f"/v1/workspaces/ws_other/ai-projects/{project['id']}").status_code == 404
    assert state.project(project["id"]) is not None

    assert api.delete(f"/v1/workspaces/ws_1/ai-projects/{project['id']}").status_code == 204
    assert api.delete(f"/v1/workspaces/ws_1/ai-projects/{project['id']}").status_code == 404


def test_a_write_repeated_after_the_project_was_deleted_is_404_not_its_stored_answer(api, project):
    write = {"json": {"prompts": [prompt("Which tent?")]}, "headers": {"Idempotency-Key": "batch-1"}}
    assert api.post(f"/v1/ai-projects/{project['id']}/prompts", **write).status_code == 201
    api.delete(f"/v1/workspaces/ws_1/ai-projects/{project['id']}")

    again = api.post(f"/v1/ai-projects/{project['id']}/prompts", **write)

    assert again.status_code == 404
    assert "Idempotent-Replayed" not in again.headers


def test_a_project_made_again_for_the_slice_gets_a_new_id(api, project):
    api.delete(f"/v1/workspaces/ws_1/ai-projects/{project['id']}")

    again = api.post(
        "/v1/workspaces/ws_1/ai-projects", json={"name": "France", "geoTargetId": 2250, "languageCode": "fr"}
    ).json()

    assert again["id"] != project["id"]


# -- switches --------------------------------------------------------------------------------------


def test_injected_429_carries_retry_after_then_the_call_is_served(api, anonymous):
    anonymous.post("/_control", json={"action": "fail", "count": 1, "status": 429})

    failed = api.get("/v1/workspaces/ws_1/tags")
    served = api.get("/v1/workspaces/ws_1/tags")

    assert (failed.status_code, failed.headers["Retry-After"]) == (429, "1")
    assert failed.json() == {"error": {"code": "injected_failure", "message": "failure injected by a test switch"}}
    assert served.status_code == 200


def test_injected_failures_can_be_limited_to_a_path_and_a_method(api, project):
    controls.fail_next(1, status=503, path="/prompts", method="POST")

    listed = api.get(f"/v1/ai-projects/{project['id']}/prompts")
    published = api.post(f"/v1/ai-projects/{project['id']}/publish")
    written = api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("a")]})

    assert [listed.status_code, published.status_code, written.status_code] == [200, 200, 503]
    assert "Retry-After" not in written.headers


def test_a_lost_answer_commits_the_write_and_answers_the_injected_status(api, project):
    controls.fail_next(1, status=502, path="/prompts", method="POST", lose_answer=True)

    written = api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("kept")]})
    again = api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("next")]})

    assert written.status_code == 502 and written.json()["error"]["code"] == "injected_failure"
    assert again.status_code == 201
    assert [p["text"] for p in state.prompts(project["id"])] == ["kept", "next"]
    assert [c["status"] for c in state.calls(path_contains="/prompts", method="POST")] == [201, 201]


def test_a_stalled_write_lands_after_its_caller_gave_up(api, project):
    controls.fail_next(1, path="/prompts", method="POST", stall_ms=1500)

    with pytest.raises(httpx.ReadTimeout):
        api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("late")]}, timeout=0.3)

    assert state.prompts(project["id"]) == []  # the caller gave up before the write
    for _ in range(100):
        if state.prompts(project["id"]):
            break
        threading.Event().wait(0.1)
    assert [p["text"] for p in state.prompts(project["id"])] == ["late"]


def test_a_simulator_told_to_forget_idempotency_serves_a_repeated_key_again(api, project, monkeypatch):
    monkeypatch.setenv(controls.FORGET_IDEMPOTENCY_ENV, "true")
    body = {"prompts": [prompt("twice")]}

    for _ in range(2):
        answer = api.post(f"/v1/ai-projects/{project['id']}/prompts", json=body, headers={"Idempotency-Key": "k3"})
        assert answer.status_code == 201 and "Idempotent-Replayed" not in answer.headers

    assert [p["text"] for p in state.prompts(project["id"])] == ["twice", "twice"]


def test_the_control_endpoint_arms_a_lost_answer_and_a_stall(anonymous):
    lost = anonymous.post("/_control", json={"action": "fail", "status": 504, "path": "/prompts", "loseAnswer": True})
    stall = anonymous.post("/_control", json={"action": "fail", "path": "/tags", "stallMs": 2000})
    refused = anonymous.post("/_control", json={"action": "fail", "stallMs": -1})

    assert lost.status_code == stall.status_code == 200 and refused.status_code == 400
    from sandbox.semrush.models import FailureRule

    rules = [(r.status, r.path_contains, r.lose_answer, r.stall_ms) for r in FailureRule.objects.order_by("id")]
    assert rules == [(504, "/prompts", True, 0), (503, "/tags", False, 2000)]


def test_latency_delays_every_api_call(api):
    controls.set_latency(300)

    answer = api.get("/v1/workspaces/ws_1/tags")

    assert answer.status_code == 200
    assert answer.elapsed.total_seconds() >= 0.3


def test_an_unknown_control_action_is_400(anonymous):
    answer = anonymous.post("/_control", json={"action": "explode"})

    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_request"


def test_reset_turns_every_switch_off_and_keeps_the_data(anonymous, project):
    controls.set_latency(50)
    controls.fail_next(3, status=500)
    controls.set_catalogue(domain="acme.example", country="US", items=[])

    answer = anonymous.post("/_control", json={"action": "reset"})

    assert answer.json() == {"ok": True, "switches": {"latencyMs": 0, "rateLimit": None, "failures": []}}
    assert controls.catalogue_for("acme.example", "US") == catalogue.generate("acme.example", "US")
    assert state.projects("ws_1") == [project]


def test_reset_with_data_forgets_everything(anonymous, project):
    anonymous.post("/_control", json={"action": "reset", "data": True})

    assert state.projects() == []
    assert state.workspaces() == []
    assert state.calls() == []


# -- inspection ------------------------------------------------------------------------------------


def test_state_lists_projects_with_prompts_tags_and_switches_without_any_bearer(api, anonymous, project, bearer):
    root = api.post("/v1/workspaces/ws_1/tags", json={"name": "source"}).json()
    value = api.post(f"/v1/workspaces/ws_1/tags/{root['id']}/values", json={"value": "semrush"}).json()
    written = api.post(f"/v1/ai-projects/{project['id']}/prompts", json={"prompts": [prompt("q", [value["id"]])]})
    api.post(f"/v1/ai-projects/{project['id']}/publish")
    controls.fail_next(2, status=500, path="/publish")

    answer = anonymous.get("/_state", params={"workspaceId": "ws_1"})

    published = state.project(project["id"])
    assert answer.status_code == 200
    assert answer.json() == {
        "workspaces": [state.workspaces()[0]],
        "projects": [{**published, "prompts": [{**written.json()["items"][0]}]}],
        "tags": {"ws_1": [{"id": root["id"], "name": "source", "values": [{"id": value["id"], "value": "semrush"}]}]},
        "switches": {
            "latencyMs": 0,
            "rateLimit": None,
            "failures": [{"status": 500, "remaining": 2, "path": "/publish", "method": None, "retryAfter": None}],
        },
    }
    assert published["status"] == "published"
    assert api.headers["Authorization"].split()[1] not in answer.text


def test_calls_above_the_rate_limit_of_a_pair_get_429_with_retry_after_and_other_pairs_do_not(anonymous):
    from sandbox.ims import keys

    def token(client_id):
        return keys.issue_access_token(
            user_id="user-7", org_ids=["ORG1@AdobeOrg"], client_id=client_id, scope="semrush.read,semrush.write"
        )

    limit, extra = 3, 2
    # A window long enough that every call below falls in it: the count decides, not the clock.
    controls.set_rate_limit(limit, per_seconds=600)
    mine = {"Authorization": f"Bearer {token('semrush-consumer')}"}
    other = {"Authorization": f"Bearer {token('other-consumer')}"}

    answers = [anonymous.get("/v1/workspaces/ws_1/tags", headers=mine) for _ in range(limit + extra)]
    others = [anonymous.get("/v1/workspaces/ws_1/tags", headers=other) for _ in range(limit)]
    controls.set_rate_limit(None)
    lifted = anonymous.get("/v1/workspaces/ws_1/tags", headers=mine)

    assert [a.status_code for a in answers] == [200] * limit + [429] * extra
    assert all(1 <= int(a.headers["Retry-After"]) <= 600 for a in answers[limit:])
    assert answers[-1].json()["error"]["code"] == "rate_limited"
    assert [a.status_code for a in others] == [200] * limit
    assert lifted.status_code == 200
    assert [c["status"] for c in state.calls()].count(429) == extra


def test_the_rate_limit_keeps_the_most_calls_it_admitted_within_one_window(anonymous):
    """How close the callers came to the limit, which its 429s alone do not say: refused calls are not counted,
    and setting the limit again starts over."""
    from sandbox.ims import keys

    bearer = keys.issue_access_token(
        user_id="user-7", org_ids=["ORG1@AdobeOrg"], client_id="semrush-consumer", scope="semrush.read,semrush.write"
    )
    controls.set_rate_limit(3, per_seconds=600)
    assert controls.rate_peak() == 0
    for _ in range(2):
        anonymous.get("/v1/workspaces/ws_1/tags", headers={"Authorization": f"Bearer {bearer}"})
    assert controls.rate_peak() == 2
    for _ in range(3):
        anonymous.get("/v1/workspaces/ws_1/tags", headers={"Authorization": f"Bearer {bearer}"})
    assert controls.rate_peak() == 3  # the limit's, never the refused calls'
    controls.set_rate_limit(3, per_seconds=600)
    assert controls.rate_peak() == 0
    controls.set_rate_limit(None)


def test_a_rate_limit_on_one_path_and_method_leaves_the_other_calls_alone(api):
    api.post("/v1/workspaces/ws_1/ai-projects", json={"name": "France", "geoTargetId": 2250, "languageCode": "fr"})
    answer = api.post(
        "/_control", json={"action": "rateLimit", "requests": 1, "perSeconds": 600, "path": "/tags", "method": "POST"}
    )

    first = api.post("/v1/workspaces/ws_1/tags", json={"name": "source"})
    second = api.post("/v1/workspaces/ws_1/tags", json={"name": "origin"})
    reads = [api.get("/v1/workspaces/ws_1/tags") for _ in range(3)]

    assert answer.json()["switches"]["rateLimit"] == {
        "requests": 1,
        "perSeconds": 600,
        "path": "/tags",
        "method": "POST",
    }
    assert (first.status_code, second.status_code) == (201, 429)
    assert [r.status_code for r in reads] == [200, 200, 200]


def test_the_call_log_counts_from_a_moment(api, project):
    mark = state.last_call_seq()
    api.get("/v1/workspaces/ws_1/tags")

    assert [c["path"] for c in state.calls(after=mark)] == ["/sandbox/semrush/v1/workspaces/ws_1/tags"]
    assert state.last_call_seq() > mark
