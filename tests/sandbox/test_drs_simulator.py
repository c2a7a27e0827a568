"""The DRS simulator itself: deterministic, contract-shaped answers in the requested language, switches per
brand and with remaining counts, a token-free call ledger, and its control and ledger endpoints."""

import json

import pytest

from sandbox.drs import controls, state

INVOKE = "/sandbox/drs/invoke"
CONTROL = "/sandbox/drs/_control"
CALLS = "/sandbox/drs/_calls"
REQUEST = {
    "site_id": "site-1",
    "brand": "Acme",
    "brand_aliases": ["Acme Gear"],
    "base_url": "https://acme.example",
    "market_country": "US",
    "language_code": "en",
    "num_prompts": 4,
    "model": "gpt-5-nano",
    "catalogue_seeds": [
        {"topic": "trail shoes", "volume": 900, "example_prompts": ["best trail shoes for mud"]},
        {"topic": "rain jackets", "volume": 400, "example_prompts": []},
    ],
    "catalogue_status": "populated",
    "metadata": {"imsOrgId": "ORG1@AdobeOrg"},
}


def invoke(client, body, **headers):
    return client.post(INVOKE, data=json.dumps(body), content_type="application/json", **headers)


def test_a_request_gets_prompts_built_from_its_seeds_and_brand(client, db):
    response = invoke(client, REQUEST, HTTP_X_DRS_FUNCTION="arn:aws:lambda:us-east-1:123456789012:function:drs")

    assert response.status_code == 200
    body = response.json()
    assert body == {
        "prompts": [
            {"prompt": "What are the best options for trail shoes?", "category": "trail-shoes"},
            {"prompt": "What are the best options for rain jackets?", "category": "rain-jackets"},
            {"prompt": "How do I choose the right trail shoes?", "category": "trail-shoes"},
            {"prompt": "How do I choose the right rain jackets?", "category": "rain-jackets"},
        ],
        "language_evidence": body["language_evidence"],
        "ship_summary": {
            "generated": 4,
            "hard_validated": 4,
            "guardrail_dropped": 0,
            "language_rejected": 0,
            "quality_downranked": 0,
            "final_count": 4,
            "verdict": "ship",
            "error_category": None,
            "reason": "ok",
        },
    }
    assert [(e["detected_language"], e["language_validation_passed"]) for e in body["language_evidence"]] == [
        ("en", True)
    ] * 4
    assert all(0.75 <= e["language_confidence"] <= 0.99 for e in body["language_evidence"])
    assert state.call_records() == [
        {
            "receivedAt": state.call_records()[0]["receivedAt"],
            "brand": "Acme",
            "function": "arn:aws:lambda:us-east-1:123456789012:function:drs",
            "outcome": "ship",
            "body": REQUEST,
        }
    ]


def test_the_same_request_always_gets_the_same_answer(client, db):
    first = invoke(client, {**REQUEST, "num_prompts": 50}).content
    second = invoke(client, {**REQUEST, "num_prompts": 50}).content

    assert first == second
    assert len(json.loads(first)["prompts"]) == 50


def test_prompts_are_distinct_and_use_brand_and_example_prompts(client, db):
    prompts = [p["prompt"] for p in invoke(client, {**REQUEST, "num_prompts": 50}).json()["prompts"]]

    assert len(set(prompts)) == 50
    assert "Is Acme a good choice for trail shoes?" in prompts
    assert "What do experts recommend for best trail shoes for mud?" in prompts


FIRST_PROMPT = {
    "en": "What are the best options for trail shoes?",
    "fr": "Quelles sont les meilleures options pour trail shoes ?",
    "de": "Was sind die besten Optionen für trail shoes?",
    "es": "¿Cuáles son las mejores opciones para trail shoes?",
    "it": "Quali sono le migliori opzioni per trail shoes?",
    "nl": "Wat zijn de beste opties voor trail shoes?",
    "pt": "Quais são as melhores opções para trail shoes?",
    "ja": "trail shoesのおすすめは何ですか？",
}


@pytest.mark.parametrize("language", sorted(FIRST_PROMPT))
def test_prompts_are_in_the_requested_language(client, db, language):
    body = invoke(client, {**REQUEST, "language_code": language, "num_prompts": 20}).json()

    assert body["prompts"][0]["prompt"] == FIRST_PROMPT[language]
    assert {e["detected_language"] for e in body["language_evidence"]} == {language}
    english = {p["prompt"] for p in invoke(client, {**REQUEST, "num_prompts": 20}).json()["prompts"]}
    if language != "en":
        assert english.isdisjoint(p["prompt"] for p in body["prompts"])


def test_a_regional_language_code_uses_its_base_language(client, db):
    body = invoke(client, {**REQUEST, "language_code": "pt-BR", "num_prompts": 1}).json()

    assert body["prompts"] == [{"prompt": FIRST_PROMPT["pt"], "category": "trail-shoes"}]


def test_a_language_without_templates_falls_back_to_english(client, db):
    body = invoke(client, {**REQUEST, "language_code": "sv", "num_prompts": 1}).json()

    assert body["prompts"] == [{"prompt": FIRST_PROMPT["en"], "category": "trail-shoes"}]
    assert body["language_evidence"][0]["detected_language"] == "en"


def test_an_empty_catalogue_still_gets_prompts_about_the_brand(client, db):
    body = invoke(client, {**REQUEST, "catalogue_seeds": [], "catalogue_status": "empty", "num_prompts": 1}).json()

    assert body["prompts"] == [{"prompt": "What are the best options for Acme?", "category": "acme"}]


def test_an_unpriced_model_is_refused_like_the_real_service(client, db):
    body = invoke(client, {**REQUEST, "model": "gpt-4"}).json()

    assert body == {
        "prompts": [],
        "language_evidence": [],
        "ship_summary": {
            "generated": 0,
            "hard_validated": 0,
            "guardrail_dropped": 0,
            "language_rejected": 0,
            "quality_downranked": 0,
            "final_count": 0,
            "verdict": "gate_error",
            "error_category": "terminal",
            "reason": "invalid_model:gpt-4",
        },
    }


def test_a_request_with_a_subpath_is_refused(client, db):
    body = invoke(client, {**REQUEST, "subpath": "/us"}).json()

    assert (body["ship_summary"]["verdict"], body["ship_summary"]["reason"]) == (
        "gate_error",
        "invalid_request:subpath",
    )


def test_a_request_without_a_language_is_refused(client, db):
    request = {k: v for k, v in REQUEST.items() if k != "language_code"}

    body = invoke(client, request).json()

    assert body["ship_summary"]["reason"] == "invalid_request:language_code"


def test_a_body_that_is_not_a_json_object_is_a_bad_request(client, db):
    response = client.post(INVOKE, data="[1, 2]", content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"errorType": "InvalidRequest", "errorMessage": "the body must be a JSON object"}
    assert state.call_count() == 0


def test_a_request_carrying_a_token_is_refused_and_the_token_is_never_stored(client, db):
    response = invoke(client, {**REQUEST, "metadata": {"imsOrgId": "ORG1@AdobeOrg", "promise_token": "pt-secret"}})

    assert response.status_code == 400
    assert response.json() == {"errorType": "InvalidRequest", "errorMessage": "the request carries a credential"}
    [record] = state.call_records()
    assert record["outcome"] == "rejected_credential"
    assert record["body"]["metadata"] == {"imsOrgId": "ORG1@AdobeOrg", "promise_token": "[REDACTED]"}
    assert "pt-secret" not in json.dumps(state.calls())


def test_held_switch_answers_the_contract_held_shape(client, db):
    controls.set_switch("held")

    body = invoke(client, REQUEST).json()

    assert body == {
        "prompts": [],
        "language_evidence": [],
        "ship_summary": {
            "generated": 4,
            "hard_validated": 4,
            "guardrail_dropped": 0,
            "language_rejected": 4,
            "quality_downranked": 0,
            "final_count": 0,
            "verdict": "held",
            "error_category": None,
            "reason": "language_gate",
        },
    }


def test_status_500_switch_answers_http_500(client, db):
    controls.set_switch("status_500")

    response = invoke(client, REQUEST)

    assert response.status_code == 500
    assert response.json() == {"errorType": "SimulatedFailure", "errorMessage": "simulated DRS failure"}


def test_empty_switch_answers_200_with_an_empty_body(client, db):
    controls.set_switch("empty")

    response = invoke(client, REQUEST)

    assert (response.status_code, response.content) == (200, b"")


def test_non_json_switch_answers_html(client, db):
    controls.set_switch("non_json")

    response = invoke(client, REQUEST)

    assert (response.status_code, response["Content-Type"]) == (200, "text/html")
    with pytest.raises(ValueError):
        json.loads(response.content)


def test_a_brand_switch_wins_over_the_global_one(client, db):
    controls.set_switch("held")
    controls.set_switch("gate_error_retryable", brand="Acme")

    acme = invoke(client, REQUEST).json()["ship_summary"]
    other = invoke(client, {**REQUEST, "brand": "Other"}).json()["ship_summary"]

    assert (acme["verdict"], acme["error_category"]) == ("gate_error", "retryable")
    assert other["verdict"] == "held"


def test_a_switch_is_used_up_after_its_remaining_calls(client, db):
    controls.set_switch("gate_error_terminal", brand="Acme", remaining=2)

    verdicts = [invoke(client, REQUEST).json()["ship_summary"]["verdict"] for _ in range(3)]

    assert verdicts == ["gate_error", "gate_error", "ship"]
    assert controls.switches() == []


def test_setting_a_switch_replaces_that_scopes_previous_one(client, db):
    controls.set_switch("held", brand="Acme")
    controls.set_switch("ship_zero", brand="Acme")
    controls.set_latency(10, brand="Acme")

    assert controls.switches() == [
        {"brand": "Acme", "switch": "latency", "latencyMs": 10, "remaining": None},
        {"brand": "Acme", "switch": "ship_zero", "latencyMs": 0, "remaining": None},
    ]


def test_an_unknown_switch_is_refused(db):
    with pytest.raises(ValueError):
        controls.set_switch("explode")


def test_the_control_endpoint_sets_and_lists_switches(client, db):
    set_held = client.post(
        CONTROL,
        data=json.dumps({"action": "set", "switch": "held", "brand": "Acme", "remaining": 3}),
        content_type="application/json",
    )
    set_latency = client.post(
        CONTROL, data=json.dumps({"action": "latency", "latencyMs": 25}), content_type="application/json"
    )

    assert set_held.json() == {
        "switches": [{"brand": "Acme", "switch": "held", "latencyMs": 0, "remaining": 3}],
        "concurrency": {"limit": None, "inFlight": 0},
    }
    assert set_latency.json() == {
        "switches": [
            {"brand": None, "switch": "latency", "latencyMs": 25, "remaining": None},
            {"brand": "Acme", "switch": "held", "latencyMs": 0, "remaining": 3},
        ],
        "concurrency": {"limit": None, "inFlight": 0},
    }


def test_the_control_endpoint_refuses_an_unknown_action(client, db):
    response = client.post(CONTROL, data=json.dumps({"action": "explode"}), content_type="application/json")

    assert response.status_code == 400
    assert response.json() == {"error": "action must be one of set, latency, concurrency, clear, reset"}


def test_reset_clears_switches_and_the_ledger(client, db):
    controls.set_switch("held")
    invoke(client, REQUEST)

    response = client.post(CONTROL, data=json.dumps({"action": "reset"}), content_type="application/json")

    assert response.json() == {"switches": [], "concurrency": {"limit": None, "inFlight": 0}}
    assert state.call_count() == 0


def test_the_calls_endpoint_lists_the_ledger_by_brand(client, db):
    invoke(client, REQUEST)
    invoke(client, {**REQUEST, "brand": "Other"})

    body = client.get(CALLS, {"brand": "Other"}).json()

    assert body == {
        "count": 1,
        "calls": [
            {
                "receivedAt": body["calls"][0]["receivedAt"],
                "brand": "Other",
                "function": "",
                "outcome": "ship",
                "body": {**REQUEST, "brand": "Other"},
            }
        ],
    }
    assert (state.call_count(), state.call_count("Acme"), state.calls("Acme")) == (2, 1, [REQUEST])


def test_the_admin_lists_switches_and_calls(admin_client):
    controls.set_switch("held", brand="Acme")
    state.record(brand="Acme", function="", body=REQUEST, outcome="held")

    switches = admin_client.get("/admin/sandbox_drs/drsswitch/")
    calls = admin_client.get("/admin/sandbox_drs/drscall/")

    assert (switches.status_code, calls.status_code) == (200, 200)
    assert b"Acme" in switches.content and b"held" in calls.content


def test_invocations_above_the_concurrency_limit_get_lambdas_throttling_error_and_those_below_do_not(sims):
    """N invocations held in flight, then k more: exactly the k are throttled; once the N end, one runs again."""
    import threading

    import httpx

    limit, extra = 3, 2
    controls.set_concurrency_limit(limit)
    controls.set_latency(8000, brand="Held")
    url = f"{sims.url}{INVOKE}"
    held: list[int] = []

    def call():
        held.append(httpx.post(url, json={**REQUEST, "brand": "Held"}, timeout=60).status_code)

    threads = [threading.Thread(target=call) for _ in range(limit)]
    for thread in threads:
        thread.start()
    deadline_checks = 0
    while controls.concurrency()["inFlight"] < limit and deadline_checks < 300:
        deadline_checks += 1
        threading.Event().wait(0.1)
    assert controls.concurrency() == {"limit": limit, "inFlight": limit}

    refused = [httpx.post(url, json=REQUEST, timeout=30) for _ in range(extra)]
    for thread in threads:
        thread.join(timeout=60)
    after = httpx.post(url, json=REQUEST, timeout=30)

    assert sorted(held) == [200] * limit
    assert [r.status_code for r in refused] == [429] * extra
    assert all(r.headers["x-amzn-ErrorType"] == "TooManyRequestsException" for r in refused)
    assert all(int(r.headers["Retry-After"]) >= 1 for r in refused)
    assert refused[0].json()["Reason"] == "ConcurrentInvocationLimitExceeded"
    assert after.status_code == 200 and after.json()["ship_summary"]["verdict"] == "ship"
    assert [c["outcome"] for c in state.call_records("Acme")] == ["throttled"] * extra + ["ship"]
    assert controls.concurrency()["inFlight"] == 0


def test_without_a_concurrency_limit_nothing_is_throttled_and_the_control_sets_and_lifts_one(client, db):
    assert invoke(client, REQUEST).status_code == 200

    limited = client.post(CONTROL, {"action": "concurrency", "limit": 0}, content_type="application/json")
    refused = invoke(client, REQUEST)
    lifted = client.post(CONTROL, {"action": "concurrency", "limit": None}, content_type="application/json")

    assert limited.json()["concurrency"] == {"limit": 0, "inFlight": 0}
    assert refused.status_code == 429
    assert lifted.json()["concurrency"] == {"limit": None, "inFlight": 0}
    assert invoke(client, REQUEST).status_code == 200
