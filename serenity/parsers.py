"""The API's JSON parser: DRF's, with a depth limit, so a pathological body is a 400, never a 500."""
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

# Our request bodies nest three levels at most ({markets: [{market, languageCode}]}); a little room above.
MAX_DEPTH = 16


def _depth(value, limit: int) -> int:
    """Nesting depth of a parsed JSON value, iteratively (a recursive walk is what must not blow up)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


class BoundedJSONParser(JSONParser):
    """Refuses bodies nested deeper than MAX_DEPTH, and bodies the decoder cannot take (its recursion
    limit included), as ParseError (400 problem+json)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        if _depth(data, MAX_DEPTH) > MAX_DEPTH:
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_DEPTH} levels.")
        return data


__all__ = ["BoundedJSONParser"]
