"""The generations driven over the API: planned from the seed, created, activated, regenerated, re-authorised."""

import json
import time
import urllib.error
import urllib.request
import uuid

from scripts.soak.config import DRS_FAULTS, FAULT_KINDS, MAX_REAUTHS, POLL_EVERY
from scripts.soak.invariants import Invariants
from scripts.soak.model import Generation


class Flows(Invariants):
    # --- generations ----------------------------------------------------------------------------------
    def plan(self) -> None:
        """The generations, their flows and their start times, all from the seed."""
        from markets import geo

        countries = [c for c in geo.COUNTRY_CODES if c not in ("US",)]
        window = self.config.minutes * 60 * 0.8
        drs_kinds = list(DRS_FAULTS)
        for i in range(self.config.jobs):
            roll, drs_fault = self.rng.random(), None
            edge = 0.0
            for kind, share in DRS_FAULTS.items():
                edge += share
                if roll < edge:
                    drs_fault = kind
                    break
            if i < len(drs_kinds):  # every DRS fault at least once, however short the run
                drs_fault = drs_kinds[i]
            if self.config.kinds != tuple(FAULT_KINDS):  # a narrowed run (SOAK_FAULTS) injects only those
                drs_fault = None
            self.generations.append(
                Generation(
                    index=i,
                    flow="activate" if self.rng.random() < 0.25 else "create",
                    drs_fault=drs_fault,
                    regenerate=self.rng.random() < 0.15,
                    start_at=window * i / max(1, self.config.jobs),
                    country=self.rng.choice(countries),
                )
            )

    def prepare(self, g: Generation) -> None:
        """An active brand with a Semrush workspace, its own organization and user, and that user's bearer."""
        from django.conf import settings

        from markets.models import Brand, Organization, Site
        from sandbox.ims.keys import issue_user_token
        from sandbox.semrush import services

        tag = f"{g.index:04d}{uuid.uuid4().hex[:6].upper()}"
        ims_org, g.user = f"SOAK{tag}{'0' * 14}@AdobeOrg", f"SOAK{tag}USER@AdobeID"
        g.brand_name, g.domain = f"Soak Brand {tag}", f"soak-{tag.lower()}.example"
        org = Organization.objects.create(ims_org_id=ims_org, name=f"Soak {tag}", is_serenity_active=True)
        brand = Brand.objects.create(
            organization=org,
            name=g.brand_name,
            display_name=g.brand_name,
            domain=g.domain,
            primary_url=f"https://{g.domain}/",
            status=Brand.Status.ACTIVE,
        )
        site = Site.objects.create(organization=org, brand=brand, base_url=f"https://{g.domain}/")
        workspace = services.workspace_create(name=brand.name, parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)
        Brand.objects.filter(id=brand.id).update(base_site=site, semrush_workspace_id=workspace.id)
        g.org, g.brand = str(org.id), str(brand.id)
        g.token = issue_user_token(user_id=g.user, org_ids=[ims_org], ttl=6 * 3600)

    def call(self, g: Generation, path: str, body: dict | None = None, *, attempts: int = 12) -> tuple[int, dict]:
        """POST to the API as the generation's user, as a UI would: a dropped connection (the API restarting)
        or a 5xx/503 is tried again after a pause. Returns the last status and body."""
        url = f"{self.stack.url('api')}/v2/orgs/{g.org}/brands/{g.brand}/serenity/{path}"
        status, doc = 0, {}
        for attempt in range(attempts):
            data = json.dumps(body).encode() if body is not None else b""
            request = urllib.request.Request(  # noqa: S310 (a local URL)
                url,
                data=data,
                method="POST",
                headers={
                    "Authorization": f"Bearer {g.token}",
                    "Content-Type": "application/json",
                    "x-promise-audience": "semrush",
                },
            )
            sent = time.time()
            try:
                with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (local URL)
                    status, raw = response.status, response.read()
            except urllib.error.HTTPError as error:
                status, raw = error.code, error.read()
            except (urllib.error.URLError, OSError) as error:
                status, raw = 0, json.dumps({"transport": str(error)}).encode()
                with self.lock:  # what it did, a promise token minted for it included, reached no one
                    self.unanswered.append((g.user, sent, time.time()))
            doc = self.answered(status, raw, path)
            if status and status < 500 and status != 429:
                return status, doc
            g.notes.append(f"{path.split('/')[-1]}: {status or 'no answer'} (try {attempt + 1})")
            time.sleep(min(0.5 * 2**attempt, 5))
        return status, doc

    def answered(self, status: int, raw: bytes, path: str) -> dict:
        """The answer's document; a 5xx is kept, with its problem code, for the API 5xx invariant."""
        try:
            doc = json.loads(raw or b"{}")
        except ValueError:
            doc = {"raw": raw[:200].decode("utf-8", "replace")}
        if status >= 500:
            code = str(doc.get("code", "")) if isinstance(doc, dict) else ""
            with self.lock:
                self.server_errors.append((time.time(), status, code, path.split("/")[-1]))
        return doc if isinstance(doc, dict) else {"raw": str(doc)[:200]}

    def poll(self, g: Generation) -> None:
        """GET the generation's job as the UI polls it; only the status matters here (a 5xx is kept)."""
        url = f"{self.stack.url('api')}/v2/orgs/{g.org}/brands/{g.brand}/serenity/markets/generation/jobs/{g.job}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {g.token}"})  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (local URL)
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        except (urllib.error.URLError, OSError):
            return  # the API restarting: no answer is not a 5xx
        self.answered(status, raw, "job")

    def begin(self, g: Generation) -> None:
        market = {"market": g.country, "languageCode": "en"}
        brand = {"brandDomain": g.domain, "brandNames": [g.brand_name]}
        if g.flow == "create":
            status, doc = self.call(g, "markets", {**brand, **market, "generatePrompts": True})
            handle = doc.get("promptGeneration") or {}
            g.market = doc.get("id") or doc.get("marketId")
        else:
            status, doc = self.call(g, "activate", {**brand, "generatePrompts": True, "markets": [market]})
            entry = (doc.get("markets") or [{}])[0]
            status = entry.get("status", status)
            body = entry.get("body") or {}
            handle = body.get("promptGeneration") or {}
            g.market = body.get("id") or body.get("marketId")
        if status in (201, 409) and not handle.get("jobId") and g.market:
            # The market exists without a job: the producer failed after the market was made (201 without a
            # handle, e.g. its database connection terminated), or an earlier attempt was cut off between the
            # two (409 without one). What the UI offers then: generate the market's prompts again (SPEC §12).
            g.recovered += 1
            status, doc = self.call(g, f"markets/{g.market}/generation")
            handle = doc if status == 202 else {}
        if status in (201, 202, 409) and handle.get("jobId"):
            g.job = handle["jobId"]
        else:
            g.outcome = f"not started (API answered {status})"
            g.notes.append(json.dumps(doc)[:300])

    def wait_terminal(self, g: Generation, deadline: float):
        from jobs.models import AsyncJob, JobStatus

        polled = 0.0
        while True:
            job = AsyncJob.objects.filter(id=g.job or "").values("status", "error_code").first()
            if job and job["status"] != JobStatus.IN_PROGRESS:
                return job
            if time.monotonic() > deadline:
                return job
            if time.monotonic() - polled >= POLL_EVERY:
                polled = time.monotonic()
                self.poll(g)
            time.sleep(1)

    def drive(self, g: Generation, deadline: float) -> None:
        from django.db import connection

        try:
            delay = g.start_at - self.now()
            if delay > 0:
                time.sleep(delay)
            if time.monotonic() > deadline:
                return
            self.prepare(g)
            self.arm_drs(g)
            g.began = time.monotonic()
            self.begin(g)
            while g.job:
                job = self.wait_terminal(g, deadline)
                if job is None or job["status"] == "IN_PROGRESS":
                    g.outcome = "IN_PROGRESS"
                    return
                if g.first_end is None:
                    g.first_end, g.first_status = time.monotonic(), job["status"]
                g.outcome = job["status"] if job["status"] == "COMPLETED" else f"FAILED {job['error_code']}"
                if job["error_code"] == "NEEDS_REAUTH" and g.reauths < MAX_REAUTHS:
                    g.reauths += 1
                    status, doc = self.call(g, f"markets/generation/jobs/{g.job}/reauth")
                    if status != 202:
                        g.notes.append(f"reauth: {status} {json.dumps(doc)[:200]}")
                    continue
                if g.regenerate and not g.regenerated and g.market:
                    g.regenerated += 1
                    status, doc = self.call(g, f"markets/{g.market}/generation")
                    if status != 202:
                        g.notes.append(f"regenerate: {status} {json.dumps(doc)[:200]}")
                    continue
                return
        except Exception as exc:  # a harness error is an outcome, not a crash of the soak
            g.outcome = f"harness error: {type(exc).__name__}"
            g.notes.append(repr(exc)[:300])
        finally:
            connection.close()
