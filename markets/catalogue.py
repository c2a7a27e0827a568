"""The Semrush catalogue read for prompts: seeds for prompt generation (SPEC §4.2) and the topic ranking and example
prompts of the old synchronous path (§8), one ranking for both."""

MAX_SEED_TOPICS = 50
MAX_EXAMPLES_PER_TOPIC = 10


def _volume(value) -> float:
    """Search volume as a number; anything that is not a number counts as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, (int, float)):
        return value
    return 0


def _examples(item: dict, limit: int) -> list[str]:
    out = []
    for example in item.get("examplePrompts") or []:
        if isinstance(example, str) and example.strip():
            out.append(example.strip())
            if len(out) == limit:
                break
    return out


def rank_topics(items: list[dict], limit: int) -> list[dict]:
    """Items with a topic, by volume descending (stable for equal volumes), the first `limit`."""
    with_topic = [i for i in items if isinstance(i, dict) and isinstance(i.get("topic"), str) and i["topic"].strip()]
    return sorted(with_topic, key=lambda i: _volume(i.get("volume")), reverse=True)[:limit]


def seeds_from_catalogue(items: list[dict]) -> list[dict]:
    """Top 50 topics by volume, each with its first 10 non-empty example prompts, in the job's shape."""
    return [
        {
            "topic": item["topic"].strip(),
            "volume": _volume(item.get("volume")),
            "examplePrompts": _examples(item, MAX_EXAMPLES_PER_TOPIC),
        }
        for item in rank_topics(items, MAX_SEED_TOPICS)
    ]


def example_prompts(items: list[dict], top: int) -> list[str]:
    """The old path: the verbatim example prompts of the top `top` topics, empties and repeats dropped."""
    seen, out = set(), []
    for item in rank_topics(items, top):
        for example in _examples(item, 10_000):
            if example not in seen:
                seen.add(example)
                out.append(example)
    return out
