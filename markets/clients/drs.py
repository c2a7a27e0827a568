"""DRS client: the only code that asks the generation service for prompts (SPEC §5.4, §5.10, §6).

One call, two transports chosen by `DRS_TRANSPORT`: `lambda` (production: boto3 `Invoke`, RequestResponse,
on a full function ARN) and `http` (local runs: a POST to the simulator at `DRS_HTTP_URL`, which carries the
same ARN in `X-Drs-Function`). Both send the same bytes and read the answer the same way, so everything
but the wire is shared.

`generate()` returns a `DrsShip` for verdict `ship` and raises `DrsError` otherwise; the caller decides
from `code` and `retryable`, never from `reason`. No token ever crosses this boundary: `build_request`
copies an allow-list of job parameters and nothing else.
"""

import json
import logging
import math
import re
import time
from dataclasses import dataclass
from functools import lru_cache

import boto3
import httpx
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError
from botocore.exceptions import ReadTimeoutError as BotoReadTimeoutError
from django.conf import settings

from serenity import metrics, tracing
from serenity.clients.guard import guard_boto3_client, outside_transaction
from serenity.clients.http import pooled_client

log = logging.getLogger(__name__)

# The generation job's error codes for what DRS answers (their public sentences: markets/generation/jobtype.py).
# Terminal:
PROMPT_GENERATION_HELD = "PROMPT_GENERATION_HELD"
PROMPT_GENERATION_GATE_ERROR = "PROMPT_GENERATION_GATE_ERROR"
DRS_GENERATION_TERMINAL = "DRS_GENERATION_TERMINAL"
DRS_INVALID_TARGET = "DRS_INVALID_TARGET"
# Retryable:
DRS_TRANSIENT = "DRS_TRANSIENT"
PROMPT_GENERATION_GATE_RETRYABLE = "PROMPT_GENERATION_GATE_RETRYABLE"
# Back-pressure:
DRS_THROTTLED = "DRS_THROTTLED"  # Lambda throttling (TooManyRequestsException)

# The job parameter names this client reads (the contract's "job" object). `audience` is optional.
JOB_PARAM_KEYS = (
    "siteId",
    "brand",
    "aliases",
    "baseUrl",
    "market",
    "languageCode",
    "count",
    "seeds",
    "imsOrgId",
    "audience",
)

# Models DRS is priced for; anything else would be refused by DRS as a terminal gate_error.
PRICED_MODELS = frozenset({"gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano", "gpt-5-nano"})
DEFAULT_MODEL = "gpt-5-nano"

# Answers that are DRS working as designed: they never count as a DRSInvokeFailure, so a normal held
# market pages nobody, and a retryable gate error is neither a transport error nor terminal (SPEC §5.10).
_NOT_A_FAILURE = frozenset({PROMPT_GENERATION_HELD, PROMPT_GENERATION_GATE_RETRYABLE})

FUNCTION_HEADER = "X-Drs-Function"

_FUNCTION_ARN = re.compile(
    r"^arn:aws(?:-[a-z]+)*:lambda:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d):\d{12}:function:[A-Za-z0-9_-]{1,64}"
    r"(?::(?:\$LATEST|[A-Za-z0-9_-]{1,128}))?$"
)
_REASON_MAX = 200


@dataclass(frozen=True)
class DrsShip:
    """A `ship` answer: prompts as returned (the caller trims and dedupes), evidence and summary."""

    prompts: list[dict]  # [{"prompt": str, "category": str}]
    language_evidence: list[dict]  # language_evidence[i] belongs to prompts[i]
    summary: dict  # ship_summary


class DrsError(Exception):
    """Any answer but `ship`. `code` names the outcome, `retryable` says whether a later call may succeed,
    `reason` is short and token-free (for logs and the admin)."""

    def __init__(self, code: str, reason: str, *, retryable: bool):
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.retryable = retryable


class DrsThrottled(DrsError):
    """Lambda throttling (`TooManyRequestsException`, HTTP 429): DRS ran nothing and asks us to slow down.
    Back-pressure, not a failure; `retry_after` is the seconds it asked us to wait, when it said."""

    def __init__(self, reason: str, *, retry_after: float | None = None):
        super().__init__(DRS_THROTTLED, reason, retryable=True)
        self.retry_after = retry_after


THROTTLING_ERROR = "TooManyRequestsException"


def _retry_after(value: object) -> float | None:
    try:
        return max(0.0, float(str(value)))
    except (TypeError, ValueError):
        return None


def _transient(reason: str) -> DrsError:
    return DrsError(DRS_TRANSIENT, reason, retryable=True)


def _terminal(reason: str) -> DrsError:
    return DrsError(DRS_GENERATION_TERMINAL, reason, retryable=False)


def _model() -> str:
    model = (settings.DRS_PROMPT_GENERATION_MODEL or "").strip()
    if model in PRICED_MODELS:
        return model
    log.warning(
        "DRS model is not in the priced set; using the default",
        extra={"configured_model": model[:64], "model": DEFAULT_MODEL},
    )
    return DEFAULT_MODEL


def _seed(seed: dict) -> dict:
    return {
        "topic": seed.get("topic"),
        "volume": seed.get("volume"),
        "example_prompts": list(seed.get("examplePrompts") or []),
    }


def build_request(params: dict) -> dict:
    """Map job params (camelCase, as in the contract's `job`) to the wire request (snake_case).

    Reproduces the contract's `request` exactly: `brand_aliases` defaults to [], `num_prompts` to
    DRS_NUM_PROMPTS, `model` comes from settings clamped to the priced set, `catalogue_status` says whether
    there are seeds, `audience` appears only when set and `subpath` never. Keys outside JOB_PARAM_KEYS are
    ignored, so nothing else (a token above all) can reach DRS.
    """
    seeds = [_seed(s) for s in params.get("seeds") or []]
    count = params.get("count")
    request = {
        "site_id": params.get("siteId"),
        "brand": params.get("brand"),
        "brand_aliases": list(params.get("aliases") or []),
        "base_url": params.get("baseUrl"),
        "market_country": params.get("market"),
        "language_code": params.get("languageCode"),
        "num_prompts": settings.DRS_NUM_PROMPTS if count is None else count,
        "model": _model(),
        "catalogue_seeds": seeds,
        "catalogue_status": "populated" if seeds else "empty",
        "metadata": {"imsOrgId": params.get("imsOrgId")},
    }
    if params.get("audience"):
        request["audience"] = params["audience"]
    return request


def _target_shape(value: str) -> str:
    """What the configured target looks like, without saying what it is (it names an account)."""
    if not value:
        return "empty"
    if value.startswith("arn:"):
        return f"partial-arn, {value.count(':') + 1} segments, {len(value)} chars"
    if ":" not in value and "/" not in value:
        return f"name-only, {len(value)} chars"
    return f"unrecognised, {len(value)} chars"


def _target() -> str:
    """The function ARN to invoke. Raises terminal DrsError when it is unset or not a full ARN."""
    value = (settings.DRS_PROMPT_GENERATION_FUNCTION or "").strip()
    if not value:
        raise _terminal("DRS_PROMPT_GENERATION_FUNCTION is not set")
    if not _FUNCTION_ARN.match(value):
        raise DrsError(
            DRS_INVALID_TARGET,
            f"DRS_PROMPT_GENERATION_FUNCTION is not a full Lambda function ARN ({_target_shape(value)})",
            retryable=False,
        )
    return value


@lru_cache(maxsize=8)
def _lambda_client(region: str, endpoint: str, key: str, secret: str, read_timeout: float):
    kwargs = {
        "region_name": region,
        # One attempt only: a retry here would invoke DRS twice inside one job attempt, and the job runner
        # already retries with backoff. The read timeout is the whole DRS budget (SPEC §5.9).
        "config": Config(
            read_timeout=read_timeout,
            connect_timeout=10,
            retries={"mode": "standard", "total_max_attempts": 1},
            tcp_keepalive=True,
            # One connection per worker thread that may be waiting on DRS at once (botocore keeps 10).
            max_pool_connections=settings.HTTP_MAX_CONNECTIONS,
        ),
    }
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    if key:
        kwargs.update(aws_access_key_id=key, aws_secret_access_key=secret)
    return guard_boto3_client(boto3.client("lambda", **kwargs), "lambda")


def lambda_client(region: str | None = None, timeout: float | None = None):
    """The boto3 Lambda client used for the function's region (the ARN's region: a function may live in
    another region than the worker), reading for at most `timeout` seconds (DRS_TIMEOUT_SECONDS by
    default; a shorter one is rounded up to 10 s steps). Cached per configuration, so a test can stub the
    very client used."""
    full = float(settings.DRS_TIMEOUT_SECONDS)
    read_timeout = full if timeout is None or timeout >= full else float(max(10, math.ceil(timeout / 10) * 10))
    return _lambda_client(
        region or settings.AWS_REGION,
        settings.AWS_ENDPOINT_URL,
        settings.AWS_ACCESS_KEY_ID,
        settings.AWS_SECRET_ACCESS_KEY,
        min(read_timeout, full),
    )


def _invoke_lambda(arn: str, payload: bytes, timeout: float) -> bytes:
    """Invoke the function once; return its payload bytes. Raises retryable DrsError for invoke failures."""
    arn_parts = _FUNCTION_ARN.match(arn)  # checked by _target: it matches
    client = lambda_client(arn_parts.group("region") if arn_parts else None, timeout)
    try:
        with tracing.untraced():  # the payload is DRS's input: no trace context written into it
            response = client.invoke(FunctionName=arn, InvocationType="RequestResponse", Payload=payload)
        body = response["Payload"].read() if response.get("Payload") is not None else b""
    except (BotoReadTimeoutError, ConnectTimeoutError) as exc:
        raise _transient(f"lambda invoke timed out ({type(exc).__name__})") from None
    except EndpointConnectionError:
        raise _transient("lambda endpoint unreachable") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if error.get("Code") == THROTTLING_ERROR:
            headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders") or {}
            wait = exc.response.get("retryAfterSeconds") or headers.get("retry-after")
            raise DrsThrottled(f"lambda throttled: {THROTTLING_ERROR}", retry_after=_retry_after(wait)) from None
        raise _transient(f"lambda invoke refused: {error.get('Code', 'unknown')} (HTTP {status})") from None
    except BotoCoreError as exc:
        raise _transient(f"lambda invoke failed ({type(exc).__name__})") from None
    if response.get("FunctionError"):
        raise _transient(f"function error ({str(response['FunctionError'])[:32]})")
    status = response.get("StatusCode")
    if isinstance(status, int) and status >= 300:
        raise _transient(f"lambda status {status}")
    return body


def _invoke_http(arn: str, payload: bytes, timeout: float) -> bytes:
    """POST the request once (no automatic retries); return the body. Raises retryable DrsError."""
    outside_transaction("drs.invoke")
    try:
        # The process's shared client (its connections kept for the next jobs); the URL is absolute.
        response = pooled_client("", timeout=settings.DRS_TIMEOUT_SECONDS).post(
            settings.DRS_HTTP_URL,
            content=payload,
            headers={"Content-Type": "application/json", FUNCTION_HEADER: arn},
            timeout=timeout,
        )
    except httpx.TimeoutException as exc:
        raise _transient(f"http invoke timed out ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise _transient(f"http invoke failed ({type(exc).__name__})") from None
    if response.status_code == 429 or response.headers.get("x-amzn-ErrorType", "").startswith(THROTTLING_ERROR):
        # What Lambda answers over its own API for an invocation above the function's concurrency.
        raise DrsThrottled(
            f"http throttled: {THROTTLING_ERROR}", retry_after=_retry_after(response.headers.get("Retry-After"))
        )
    if response.status_code >= 300:
        raise _transient(f"http status {response.status_code}")
    return response.content


_TRANSPORTS = {"lambda": _invoke_lambda, "http": _invoke_http}


def _loads(raw: bytes | str, what: str):
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    if not raw.strip():
        raise _transient(f"{what} is empty")
    try:
        return json.loads(raw)
    except ValueError:
        raise _terminal(f"{what} is not JSON") from None


def _unwrap(doc):
    """Unwrap a Lambda proxy answer `{statusCode, body}`; `body` may be a JSON string or an object."""
    if not (isinstance(doc, dict) and "statusCode" in doc and "ship_summary" not in doc):
        return doc
    try:
        status = int(doc["statusCode"])
    except (TypeError, ValueError):
        raise _terminal("proxy statusCode is not a number") from None
    if status >= 300:
        raise _transient(f"proxy status {status}")
    body = doc.get("body")
    if isinstance(body, (str, bytes)):
        return _loads(body, "proxy body")
    if body is None:
        raise _transient("proxy body is empty")
    return body


def _short(value) -> str:
    return str(value)[:_REASON_MAX] if value not in (None, "") else "none given"


def _ship(doc: dict, summary: dict) -> DrsShip:
    prompts = doc.get("prompts")
    evidence = doc.get("language_evidence") or []
    if not isinstance(prompts, list) or not isinstance(evidence, list):
        raise _terminal("ship answer without a prompts list")
    if not all(isinstance(p, dict) and isinstance(p.get("prompt"), str) for p in prompts):
        raise _terminal("ship answer has malformed prompts")
    prompts = [{"prompt": p["prompt"], "category": p.get("category") or ""} for p in prompts]
    return DrsShip(prompts=prompts, language_evidence=evidence, summary=summary)


def parse_response(raw: bytes | str) -> DrsShip:
    """Apply SPEC §6's verdict table to a DRS payload. Returns DrsShip for `ship` (even with zero prompts);
    raises DrsError for every other answer."""
    doc = _unwrap(_loads(raw, "payload"))
    if not isinstance(doc, dict):
        raise _terminal("payload is not a JSON object")
    summary = doc.get("ship_summary")
    if not isinstance(summary, dict):
        summary = {}
    verdict = summary.get("verdict")
    if verdict == "ship":
        return _ship(doc, summary)
    if verdict == "held":
        raise DrsError(PROMPT_GENERATION_HELD, f"held: {_short(summary.get('reason'))}", retryable=False)
    if verdict == "gate_error":
        reason = f"gate_error ({_short(summary.get('error_category'))}): {_short(summary.get('reason'))}"
        if summary.get("error_category") == "retryable":
            raise DrsError(PROMPT_GENERATION_GATE_RETRYABLE, reason, retryable=True)
        raise DrsError(PROMPT_GENERATION_GATE_ERROR, reason, retryable=False)
    if verdict is None:
        raise _terminal("answer has no verdict")
    raise _terminal(f"unknown verdict {_short(verdict)[:32]!r}")


def _record(transport: str, duration_ms: float | None, *, error: DrsError | None, ship: DrsShip | None) -> None:
    """One EMF line per call (duration whenever DRS was invoked, failure only for a genuine failure) and
    one log line carrying the reason, which never becomes a metric dimension."""
    throttled = isinstance(error, DrsThrottled)
    failed = error is not None and error.code not in _NOT_A_FAILURE and not throttled
    emitted: dict[str, tuple[float, str]] = {}
    if duration_ms is not None:
        emitted["DRSInvokeDurationMs"] = (round(duration_ms, 1), metrics.MILLISECONDS)
    if failed:
        emitted["DRSInvokeFailure"] = (1, metrics.COUNT)
    if throttled:
        # Back-pressure, counted apart: a Lambda at its concurrency pages nobody by itself.
        emitted["DRSThrottled"] = (1, metrics.COUNT)
    if emitted:
        metrics.emit(breakdown=None, **emitted)
    fields = {"drs_transport": transport, "duration_ms": None if duration_ms is None else round(duration_ms, 1)}
    if ship is not None:
        log.info("DRS answered ship", extra={**fields, "drs_outcome": "ship", "prompt_count": len(ship.prompts)})
    elif error is not None and failed:
        log.warning(
            "DRS call failed",
            extra={**fields, "drs_outcome": error.code, "retryable": error.retryable, "reason": error.reason},
        )
    elif error is not None:
        log.info(
            "DRS declined to ship",
            extra={**fields, "drs_outcome": error.code, "retryable": error.retryable, "reason": error.reason},
        )


def generate(params: dict, *, timeout: float | None = None) -> DrsShip:
    """Invoke DRS once for these job params and apply SPEC §6's verdict table. The read waits about
    `timeout` seconds (the caller's remaining budget), never more than DRS_TIMEOUT_SECONDS: over Lambda it is
    rounded up to a 10 s step (at least 10 s), and the connect timeout comes on top; a `timeout` of None or 0
    means DRS_TIMEOUT_SECONDS.

    Returns DrsShip for verdict `ship`, even with zero prompts (the caller decides PROMPT_GENERATION_EMPTY
    after its own trimming and dedupe). Raises DrsThrottled for Lambda throttling, and DrsError otherwise:
    `retryable` for transport failures,
    timeouts, status >= 300, an empty payload and a retryable gate error; terminal for held, a terminal
    gate error, a bad target, a non-JSON payload and a missing or unknown verdict. Never retries itself:
    calling it again invokes DRS again.
    """
    transport = (settings.DRS_TRANSPORT or "").strip().lower()
    request = build_request(params)
    try:
        arn = _target()
        invoke = _TRANSPORTS.get(transport)
        if invoke is None:
            raise _terminal(f"unknown DRS_TRANSPORT {transport[:16]!r}")
    except DrsError as exc:
        # DRS was not invoked: no duration, but a misconfigured target fails every job, so it counts.
        _record(transport, None, error=exc, ship=None)
        raise
    payload = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    error, ship = None, None
    started = time.monotonic()
    try:
        raw = invoke(arn, payload, min(float(settings.DRS_TIMEOUT_SECONDS), timeout or float("inf")))
    except DrsError as exc:
        error = exc
    duration_ms = (time.monotonic() - started) * 1000
    if error is None:
        try:
            ship = parse_response(raw)
        except DrsError as exc:
            error = exc
    _record(transport, duration_ms, error=error, ship=ship)
    if error is not None:
        raise error
    assert ship is not None  # parse_response returned it
    return ship
