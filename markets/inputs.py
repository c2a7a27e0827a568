"""The input fields of the onboarding and generation APIs: each accepts exactly what the OpenAPI schema
says it accepts, no more (nothing trimmed, folded or coerced), so a client generated from the schema and the
server agree on every value.
"""
import re
import uuid

from rest_framework import serializers

from markets import geo

# At least one visible character, no NUL: what a name or an alias must be.
TEXT = r"^[^\x00]*[^\x00\s][^\x00]*$"
DOMAIN = r"^(?:[a-zA-Z0-9-]{1,63}\.)+[a-zA-Z]{2,63}$"  # and at most 253 characters (max_length)
# http(s), a host name, an optional port, an optional path of printable ASCII.
HTTP_URL = r"^https?://[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?(?:/[!-~]*)?$"
UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"


class StrictInput(serializers.Serializer):
    # Rejects fields it does not declare, instead of silently ignoring them (the schema says
    # `additionalProperties: false`, see serenity.openapi.strict_request_bodies).

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown}, code="unknown_field")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean, nothing else ("true", 1 and friends are refused)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class PatternField(serializers.RegexField):
    """A JSON string matching `regex` as a whole, exactly as sent (never trimmed). The schema carries the
    same pattern."""

    def __init__(self, regex: str, *, message: str = "Not in the expected form.", error_code: str = "invalid",
                 **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(regex, **kwargs)
        self._full = re.compile(regex)
        self._message, self._error_code = message, error_code

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not self._full.fullmatch(value):
            raise serializers.ValidationError(self._message, code=self._error_code)
        return value


def TextField(**kwargs):  # noqa: N802  (reads as a field class where it is used)
    return PatternField(TEXT, message="Must hold a visible character and no NUL.", **kwargs)


def DomainField(**kwargs):  # noqa: N802
    return PatternField(DOMAIN, message="Not a domain name, e.g. example.com.", max_length=253, **kwargs)


def HttpUrlField(**kwargs):  # noqa: N802
    return PatternField(HTTP_URL, message="Not an http(s) URL, e.g. https://www.example.com/.", max_length=2000,
                        **kwargs)


class UuidField(PatternField):
    """A UUID in its canonical 8-4-4-4-12 form; the value is a uuid.UUID."""

    def __init__(self, **kwargs):
        super().__init__(UUID, message="Must be a UUID (8-4-4-4-12 hexadecimal digits).", **kwargs)

    def to_internal_value(self, data):
        return uuid.UUID(super().to_internal_value(data))


class CodeField(serializers.ChoiceField):
    """One of a fixed set of codes, exactly as written: `FR`, not `fr` or ` FR `."""

    def __init__(self, *, choices, message: str, error_code: str, **kwargs):
        super().__init__(choices=choices, **kwargs)
        self._message, self._error_code = message, error_code

    def to_internal_value(self, data):
        if not isinstance(data, str) or data not in self.choices:
            raise serializers.ValidationError(self._message, code=self._error_code)
        return data


def CountryField(**kwargs):  # noqa: N802
    return CodeField(choices=geo.COUNTRY_CODES, message="Not an ISO 3166-1 alpha-2 country code in capitals, e.g. FR.",
                     error_code="invalid_country", **kwargs)


def LanguageField(**kwargs):  # noqa: N802
    return CodeField(choices=geo.LANGUAGE_CODES, message="Not an ISO 639-1 language code in lower case, e.g. fr.",
                     error_code="invalid_language", **kwargs)


class MarketSliceInput(StrictInput):
    """One market: a country and a language."""

    market = CountryField(help_text="ISO 3166-1 alpha-2 country code, in capitals, e.g. FR")
    languageCode = LanguageField(help_text="ISO 639-1 language code, in lower case, e.g. fr")  # noqa: N815
