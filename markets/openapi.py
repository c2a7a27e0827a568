"""What the OpenAPI description of the entry points and of the generation routes shares: the ids in the paths
and the two promise headers, described once. Each route family's own pieces are in its `schemas.py`
(markets/onboarding/schemas.py, markets/generation/schemas.py)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from markets.credentials import AUDIENCE_HEADER
from tokens.delegation import PROMISE_TOKEN_HEADER, PROMISE_TOKEN_PATTERN

PATH_IDS = [
    OpenApiParameter("orgId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The organization."),
    OpenApiParameter("brandId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="A brand of the organization."),
    OpenApiParameter(
        "jobId",
        OpenApiTypes.UUID,
        OpenApiParameter.PATH,
        description="The job id from `promptGeneration.jobId` of an entry point's response.",
    ),
]
MARKET_ID = OpenApiParameter("marketId", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The market.")

# `semrush` in any case with spaces around it, or empty (the default pair), as HTTP allows: what
# tokens.pairs.pair_from_audience accepts.
AUDIENCE_PATTERN = r"^[ \t]*(?:[Ss][Ee][Mm][Rr][Uu][Ss][Hh])?[ \t]*$"


def audience_parameter(description: str) -> OpenApiParameter:
    """`x-promise-audience` where it may be absent (the default pair) or `semrush`."""
    return OpenApiParameter(
        AUDIENCE_HEADER,
        {"type": "string", "pattern": AUDIENCE_PATTERN},
        OpenApiParameter.HEADER,
        required=False,
        description=description,
    )


# `x-promise-audience` where a job writing to Semrush needs the Semrush pair.
SEMRUSH_AUDIENCE = OpenApiParameter(
    AUDIENCE_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=True,
    enum=["semrush"],
    description="The IMS client pair: must be `semrush`.",
)


def promise_token_parameter(description: str) -> OpenApiParameter:
    """`x-promise-token` as every route reads it (the pattern the parser accepts), described for the route."""
    return OpenApiParameter(
        PROMISE_TOKEN_HEADER,
        {"type": "string", "pattern": PROMISE_TOKEN_PATTERN},
        OpenApiParameter.HEADER,
        required=False,
        description=description,
    )
