"""The entry points' limits: per-user and per-organization throttles, and one deadline per request."""


def test_entry_point_calls_past_the_users_limit_get_a_429_problem_with_retry_after(world, throttle_rates):
    throttle_rates(onboarding="2/min")
    answers = [
        world.post(world.url("markets"), {**world.brand_fields, "market": m, "languageCode": "de"}).status_code
        for m in ("DE", "AT", "CH")
    ]

    assert answers == [201, 201, 429]
    refused = world.post(world.url("markets"), {**world.brand_fields, "market": "LU", "languageCode": "de"})
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["code"] == "throttled" and int(refused["Retry-After"]) > 0


def test_markets_past_the_organizations_hourly_limit_get_a_429_counting_each_market(world, throttle_rates):
    throttle_rates(org_markets="3/hour")

    first = world.post(
        world.url("activate"),
        {
            **world.brand_fields,
            "markets": [{"market": "DE", "languageCode": "de"}, {"market": "AT", "languageCode": "de"}],
        },
    )
    second = world.post(
        world.url("activate"),
        {
            **world.brand_fields,
            "markets": [{"market": "CH", "languageCode": "de"}, {"market": "LU", "languageCode": "de"}],
        },
    )
    third = world.post(world.url("markets"), {**world.brand_fields, "market": "CH", "languageCode": "de"})

    assert (first.status_code, second.status_code, third.status_code) == (200, 429, 201)
    assert int(second["Retry-After"]) > 0


def test_an_activation_reports_markets_it_had_no_time_for_as_retryable_and_creates_none_of_them(
    world, settings, gate, async_on
):
    from markets.models import Market
    from sandbox.semrush import controls as semrush_controls

    settings.REQUEST_DEADLINE_SECONDS = 4
    settings.MARKET_PROVISION_CONCURRENCY = 1  # one at a time: the later markets start past the budget
    gate("false")  # no producer: only the market's own Semrush calls
    semrush_controls.set_latency(500)
    try:
        response = world.post(
            world.url("activate"),
            {
                **world.brand_fields,
                "markets": [{"market": m, "languageCode": "de"} for m in ("DE", "AT", "CH")],
                "generatePrompts": True,
            },
            **{"x-promise-audience": "semrush"},
        )
    finally:
        semrush_controls.set_latency(0)

    assert response.status_code == 207
    entries = response.json()["markets"]
    assert [e["status"] for e in entries] == [201, 503, 503]
    assert entries[1]["body"] == {
        "type": "https://errors.serenity.example/not-attempted",
        "status": 503,
        "code": "not_attempted",
        "title": "Not attempted within the request's time budget",
        "retryable": True,
        "detail": "AT/de was not attempted within the request's time budget; nothing was created. Send it again.",
        "error": "serviceUnavailable",
        "message": "AT/de was not attempted within the request's time budget; nothing was created. Send it again.",
    }
    assert list(Market.objects.values_list("country", flat=True)) == ["DE"]


def test_an_activation_provisions_its_markets_concurrently_and_answers_them_in_the_order_asked(
    world, settings, gate, async_on, monkeypatch
):
    import threading

    from markets.models import Market
    from markets.onboarding import provisioning

    settings.MARKET_PROVISION_CONCURRENCY = 4
    gate("false")  # no producer: each market is its project's creation and its publish
    countries = ("DE", "AT", "CH", "LU")
    # Every market waits at the barrier until all four have started: provisioned one after another, the
    # first would wait alone and the barrier would break.
    all_started = threading.Barrier(len(countries), timeout=60)
    provision = provisioning._market_provision

    def provision_once_all_started(**kwargs):
        all_started.wait()
        return provision(**kwargs)

    monkeypatch.setattr(provisioning, "_market_provision", provision_once_all_started)
    response = world.post(
        world.url("activate"),
        {
            **world.brand_fields,
            "markets": [{"market": m, "languageCode": "de"} for m in countries],
            "generatePrompts": True,
        },
        **{"x-promise-audience": "semrush"},
    )

    assert response.status_code == 200, response.content
    assert not all_started.broken
    assert [(e["market"], e["status"]) for e in response.json()["markets"]] == [(m, 201) for m in countries]
    assert sorted(Market.objects.values_list("country", flat=True)) == sorted(countries)
