"""The API's JSON parser: DRF's, with a depth limit and no unpaired surrogates, so a pathological body is a 400,
never a 500."""

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
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _unicode(value) -> bool:
    """True when every string of a parsed JSON value (keys too) is valid Unicode. JSON's `\\ud800` escapes can
    spell a lone surrogate, which is no character (RFC 8259 §8.2) and which no database can store."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


class BoundedJSONParser(JSONParser):
    """Refuses bodies nested deeper than MAX_DEPTH, strings that are not Unicode, and bodies the decoder
    cannot take (its recursion limit included), as ParseError (400 problem+json)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        if _depth(data, MAX_DEPTH) > MAX_DEPTH:
            raise ParseError(f"JSON parse error - the body is nested deeper than {MAX_DEPTH} levels.")
        if not _unicode(data):
            raise ParseError("JSON parse error - the body holds an unpaired surrogate.")
        return data


__all__ = ["BoundedJSONParser"]
