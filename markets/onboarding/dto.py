"""What the onboarding routes answer (SPEC §3, §3.1): a brand, a market, an activation; the brand's markets and
one market; the wizard's catalogues. Each shape is defined once, by its serializer below: the answer is rendered
through it and the OpenAPI document is generated from it.

The original service's fields come first, in its order, then this service's. A part that depends on what
happened (the old synchronous path's counts, a queued generation job, an activation's `baseSiteId`) is present
only when it happened.
"""

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from jobs.models import AsyncJob, JobStatus
from markets.generation.dto import GenerationJobErrorSerializer, public_error
from markets.models import Brand, Market
from markets.onboarding.activation import Activation
from markets.onboarding.brands import BrandCreated
from markets.onboarding.inputs import host_of
from markets.onboarding.provisioning import MarketOutcome
from markets.onboarding.reads import MarketRead

# A brand's `origin`, as the original's V2Brand enumerates it (a user's create is `human`).
ORIGINS = ("human", "ai")


class PromptGenerationHandle(serializers.Serializer):
    jobId = serializers.UUIDField(
        allow_null=True, help_text="The generation job; null when none could be made (`status: failed`)."
    )
    status = serializers.ChoiceField(
        choices=["provisioning", "failed"],
        help_text="`failed`: the generation asked for could not be enqueued; the market is made, with no prompts, "
        "and its user regenerates it (POST …/markets/{marketId}/generation).",
    )
    code = serializers.CharField(
        required=False, help_text="With `failed`: why (IMS_MINT_FAILED, ENQUEUE_FAILED, CATALOGUE_UNREADABLE, …)."
    )
    reused = serializers.BooleanField()


class SyncPromptsOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=["written", "partial", "skipped", "empty", "failed"])
    written = serializers.IntegerField()


class MarketCreatedOutput(serializers.Serializer):
    """A market (a MarketOutcome with its market): the original's fields first, then this service's. The
    fields marked not required are present only when that happened."""

    brandId = serializers.UUIDField(source="market.brand_id")
    geoTargetId = serializers.IntegerField(
        source="market.geo_target_id", help_text="Google Ads country criterion id (2000 + ISO numeric)."
    )
    languageCode = serializers.CharField(source="market.language_code")
    workspaceId = serializers.CharField(
        source="market.brand.semrush_workspace_id", help_text="The brand's Semrush sub-workspace."
    )
    projectId = serializers.CharField(source="market.semrush_project_id", help_text="The market's Semrush AI project.")
    published = serializers.SerializerMethodField()
    topicCount = serializers.IntegerField(
        source="sync_prompts.topics", required=False, help_text="Old synchronous path: topics prompts came from."
    )
    promptCount = serializers.IntegerField(
        source="sync_prompts.written", required=False, help_text="Old synchronous path: prompts written."
    )
    promptGeneration = PromptGenerationHandle(
        source="prompt_generation", required=False, help_text="When a generation job was queued."
    )
    id = serializers.UUIDField(source="market.id", help_text="This service's id of the market.")
    market = serializers.CharField(source="market.country", help_text="ISO 3166-1 alpha-2, in capitals.")
    name = serializers.CharField(source="market.name")
    siteId = serializers.UUIDField(source="market.site_id", allow_null=True)
    publishState = serializers.CharField(source="market.publish_state")
    createdAt = serializers.DateTimeField(source="market.created_at")
    prompts = SyncPromptsOutput(
        source="sync_prompts", required=False, help_text="Old synchronous path: what was written."
    )

    def get_published(self, outcome: MarketOutcome) -> bool:
        assert outcome.market is not None
        return outcome.market.publish_state == Market.PublishState.PUBLISHED

    def to_representation(self, outcome: MarketOutcome) -> dict:
        body = super().to_representation(outcome)
        return {name: value for name, value in body.items() if value is not None or self.fields[name].required}


class ProfileValue(serializers.JSONField):
    """A brand field kept as given in the brand's profile and returned, not used by this service."""

    def __init__(self, absent, **kwargs):
        self.absent = absent  # what a profile without the field answers
        super().__init__(source="profile", allow_null=True, **kwargs)

    def to_representation(self, profile):
        return (profile or {}).get(self.field_name, self.absent)


class BrandOutput(serializers.Serializer):
    """A brand: the original's V2 brand fields, then this service's."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    baseSiteId = serializers.UUIDField(source="base_site_id", allow_null=True)
    baseUrl = serializers.SerializerMethodField()
    semrushSubWorkspaceId = serializers.CharField(source="semrush_workspace_id", allow_null=True)
    pendingSemrushProvisioning = serializers.SerializerMethodField()
    status = serializers.ChoiceField(choices=Brand.Status.choices)
    urls = serializers.SerializerMethodField()
    brandAliases = serializers.SerializerMethodField()
    origin = serializers.SerializerMethodField()
    siteIds = serializers.SerializerMethodField()
    serenityActive = serializers.SerializerMethodField()
    serenityActivatedAt = serializers.DateTimeField(source="workspace_provisioned_at", allow_null=True)
    updatedAt = serializers.DateTimeField(source="updated_at")
    updatedBy = serializers.SerializerMethodField()
    description = ProfileValue(None)
    brandContext = ProfileValue(None)
    mentionSentimentGuidance = ProfileValue(None)
    vertical = ProfileValue(None)
    region = ProfileValue([])
    competitors = ProfileValue([])
    socialAccounts = ProfileValue([])
    earnedContent = ProfileValue([])
    brandClaimsEnabled = ProfileValue(False)
    displayName = serializers.SerializerMethodField()
    domain = serializers.CharField()
    primaryUrl = serializers.CharField(source="primary_url")
    aliases = serializers.ListField(child=serializers.CharField())
    semrushWorkspaceId = serializers.CharField(source="semrush_workspace_id", allow_null=True)
    semrushModelIds = serializers.ListField(source="semrush_model_ids", child=serializers.CharField())
    createdAt = serializers.DateTimeField(source="created_at")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_baseUrl(self, brand: Brand) -> str | None:
        return brand.base_site.base_url if brand.base_site else (brand.primary_url or None)

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_pendingSemrushProvisioning(self, brand: Brand) -> None:
        return None  # the original's field; this service provisions at once, nothing is ever pending

    @extend_schema_field(inline_serializer("BrandUrl", many=True, fields={"value": serializers.CharField()}))
    def get_urls(self, brand: Brand) -> list[dict]:
        return [{"value": url} for url in brand.urls or []]

    @extend_schema_field(
        inline_serializer(
            "BrandAlias",
            many=True,
            fields={"name": serializers.CharField(), "regions": serializers.ListField(child=serializers.CharField())},
        )
    )
    def get_brandAliases(self, brand: Brand) -> list[dict]:
        aliases = (brand.profile or {}).get("brandAliases")
        return aliases or [{"name": alias, "regions": []} for alias in brand.aliases or []]

    @extend_schema_field(
        serializers.ChoiceField(choices=ORIGINS, help_text="As given when `human` or `ai`, else `human`.")
    )
    def get_origin(self, brand: Brand) -> str:
        origin = (brand.profile or {}).get("origin")
        return origin if origin in ORIGINS else "human"

    @extend_schema_field(serializers.ListField(child=serializers.UUIDField()))
    def get_siteIds(self, brand: Brand) -> list[str]:
        return [str(site_id) for site_id in brand.sites.order_by("created_at").values_list("id", flat=True)]

    def get_serenityActive(self, brand: Brand) -> bool:
        return bool(brand.organization.is_serenity_active and brand.semrush_workspace_id)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_updatedBy(self, brand: Brand) -> str | None:
        return brand.updated_by or None

    def get_displayName(self, brand: Brand) -> str:
        return brand.display_name or brand.name


class BrandCreatedOutput(BrandOutput):
    """createBrand's 201: the brand (a BrandCreated), with its first market when `semrushMarket` was given."""

    market = MarketCreatedOutput(required=False, help_text="The first market, when `semrushMarket` was given.")
    promptGeneration = PromptGenerationHandle(
        required=False, help_text="When the first market's generation job was queued."
    )

    def to_representation(self, created: BrandCreated) -> dict:
        body = super().to_representation(created.brand)  # the two fields below are not the brand's: left out
        if created.market is not None:
            body["market"] = self.fields["market"].to_representation(created.market)
            if created.market.prompt_generation is not None:
                body["promptGeneration"] = created.market.prompt_generation
        return body


def market_dto(outcome: MarketOutcome) -> dict:
    """One market's answer: the market, or the problem document saying why it was not made."""
    if outcome.market is None:
        assert outcome.problem is not None  # a market not made always says why
        return outcome.problem
    return MarketCreatedOutput(outcome).data


class ActivationEntry(serializers.Serializer):
    market = serializers.JSONField(source="market_as_sent", help_text="As sent.")
    languageCode = serializers.JSONField(source="language_as_sent", help_text="As sent.")
    status = serializers.IntegerField(
        help_text="201 new, 409 already live, 400 the entry breaks a rule, 401 "
        "or 403 Semrush refused the request's credential, 502 Semrush "
        "failed, 503 not attempted in time (retryable)"
    )
    body = serializers.SerializerMethodField()

    @extend_schema_field(
        serializers.JSONField(help_text="The market (as createMarket answers it) or a problem document")
    )
    def get_body(self, outcome: MarketOutcome) -> dict:
        return market_dto(outcome)


class ActivationOutput(serializers.Serializer):
    """activateMarkets' answer (an Activation): `baseSiteId` only when every market is live."""

    brandId = serializers.UUIDField(source="brand.id")
    status = serializers.ChoiceField(source="brand.status", choices=Brand.Status.choices)
    baseSiteId = serializers.UUIDField(source="brand.base_site_id", required=False, allow_null=True)
    markets = ActivationEntry(many=True)
    brand = BrandOutput(help_text="This service's: the brand after the activation.")

    def to_representation(self, activation: Activation) -> dict:
        body = super().to_representation(activation)
        if not activation.all_live:
            del body["baseSiteId"]
        return body


# --- The market journey around onboarding (SPEC §3.1) ------------------------------------------------------------

# A market's publish state as the original's `SerenityMarketStatus` names it.
MARKET_STATUSES: dict[str, str] = {
    Market.PublishState.PUBLISHED.value: "live",
    Market.PublishState.UNPUBLISHED.value: "draft",
    Market.PublishState.FAILED.value: "publish_failed",
}
MARKET_STATUS_CHOICES = sorted(set(MARKET_STATUSES.values()))


class MarketGenerationOutput(serializers.Serializer):
    """A market's latest prompt generation (an AsyncJob), token-safe as the poll shows it: the job to poll, its
    status and, when it failed, its public error."""

    jobId = serializers.UUIDField(source="id", help_text="Poll it at …/serenity/markets/generation/jobs/{jobId}.")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    error = serializers.SerializerMethodField()

    @extend_schema_field(GenerationJobErrorSerializer(allow_null=True))
    def get_error(self, job: AsyncJob) -> dict | None:
        return public_error(job)


class MarketOutput(serializers.Serializer):
    """A market of the brand (a MarketRead): the original's `SerenityMarket` as it answers in sub-workspace mode
    (what every brand here is in), then this service's fields. `promptsCount` and `modelsCount` are absent, as the
    original leaves them when it has no count: this service does not keep one."""

    brandId = serializers.UUIDField(source="market.brand_id")
    geoTargetId = serializers.IntegerField(
        source="market.geo_target_id", help_text="Google Ads country criterion id (2000 + ISO numeric)."
    )
    languageCode = serializers.CharField(source="market.language_code")
    createdAt = serializers.DateTimeField(source="market.created_at")
    updatedAt = serializers.DateTimeField(source="market.updated_at")
    status = serializers.SerializerMethodField()
    semrushProjectId = serializers.CharField(source="market.semrush_project_id", help_text="Its Semrush AI project.")
    domain = serializers.SerializerMethodField()
    primaryUrl = serializers.SerializerMethodField()
    siteId = serializers.UUIDField(source="market.site_id", allow_null=True, help_text="The site it tracks, if any.")
    id = serializers.UUIDField(source="market.id", help_text="This service's id of the market.")
    market = serializers.CharField(source="market.country", help_text="ISO 3166-1 alpha-2, in capitals.")
    name = serializers.CharField(source="market.name", help_text="Its Semrush project's name.")
    publishState = serializers.ChoiceField(source="market.publish_state", choices=Market.PublishState.choices)
    promptGeneration = MarketGenerationOutput(
        source="generation",
        allow_null=True,
        help_text="Added to the original's fields: the market's latest prompt generation job, null when it has "
        "none. A UI that lost the job id an entry point returned finds it here.",
    )

    @extend_schema_field(
        serializers.ChoiceField(
            choices=MARKET_STATUS_CHOICES,
            help_text="Its publish state when this service made it: `live` (published), `draft`, `publish_failed`.",
        )
    )
    def get_status(self, read: MarketRead) -> str:
        return MARKET_STATUSES[read.market.publish_state]

    @extend_schema_field(serializers.CharField(allow_null=True, help_text="The domain the market tracks."))
    def get_domain(self, read: MarketRead) -> str | None:
        return read.market.domain or None

    @extend_schema_field(
        serializers.CharField(
            allow_null=True,
            help_text="The URL the market tracks, host and path without the scheme (`shop.example.com/fr`): its "
            "site's URL when that site is on its domain, else its domain.",
        )
    )
    def get_primaryUrl(self, read: MarketRead) -> str | None:
        market, site = read.market, read.market.site
        url = site.base_url if site is not None and host_of(site.base_url) == market.domain else market.domain
        return url.split("://", 1)[-1].rstrip("/") or None


class MarketListOutput(serializers.Serializer):
    """listMarkets' answer: the original's `SerenityMarketListResponse`."""

    items = MarketOutput(many=True)


class MarketDetailOutput(MarketOutput):
    """getMarket's answer: the original's `SerenityMarketDetail`, the market with its `semrushProjectId` (always
    present: the id the embedded Semrush dashboard mounts), and this service's fields as in the list."""


class LanguageOutput(serializers.Serializer):
    """One language of Semrush's catalogue: the original's `SerenityLanguage`, then its code (ours)."""

    id = serializers.CharField(allow_null=True, help_text="Semrush's catalogue id, null when it has none.")
    name = serializers.CharField(help_text="The language's English name, as Semrush spells it.")
    code = serializers.CharField(
        allow_null=True, help_text="Added: the code createMarket takes for it (`languageCode`), null when none."
    )


class LanguageListOutput(serializers.Serializer):
    """listLanguages' answer: the original's `SerenityLanguageListResponse`, sorted by name."""

    items = LanguageOutput(many=True)


class ModelOutput(serializers.Serializer):
    """One AI model of Semrush's catalogue: the original's `SerenityModel`."""

    id = serializers.CharField(help_text="The model's catalogue id (what `semrushModelIds` and `modelIds` take).")
    key = serializers.CharField(help_text="The value Semrush's reporting API expects for it.")
    name = serializers.CharField(allow_null=True)
    icon = serializers.CharField(allow_null=True)


class ModelListOutput(serializers.Serializer):
    """listModels' answer: the original's `SerenityModelListResponse`."""

    items = ModelOutput(many=True)
