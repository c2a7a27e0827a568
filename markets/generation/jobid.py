"""The deterministic generation-job id of a market slice (SPEC §4.3): the reservation key."""

import hashlib
import uuid


def generation_job_id(brand_id, geo_target_id: int, language_code: str) -> uuid.UUID:
    """UUID (version-4 layout) from SHA-256 of `serenity-generate-semrush-market:<brand>:<geo>:<lang>`.

    Test vector: ("brand-1", 2840, "en") -> fb4b4490-6cba-43ac-87bb-42249acaac23.
    """
    key = f"serenity-generate-semrush-market:{brand_id}:{geo_target_id}:{language_code}"
    digits = list(hashlib.sha256(key.encode()).hexdigest()[:32])
    digits[12] = "4"
    digits[16] = format(8 + int(digits[16], 16) % 4, "x")
    return uuid.UUID("".join(digits))
