"""The checks: every invariant, the healing invariants and the local SQS ledger they read."""

import json
import re
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import Any

from scripts.soak.config import (
    DRS_TIMEOUT_MS,
    HAND_BACK_AFTER_DATABASE_FAULT,
    INVALIDATION_SECONDS,
    JWT,
    RECENT_RECEIVE_SECONDS,
    RESTART_MARGIN,
    RUN_STARTS,
    TIMEOUTS,
    UPSTREAM_CODES,
)
from scripts.soak.faults import Faults
from scripts.soak.model import Invariant


class Invariants(Faults):
    # --- invariants -----------------------------------------------------------------------------------
    def check(self) -> tuple[list[Invariant], list[str]]:
        from django.db import connection

        from jobs.models import AsyncJob, JobEvent, JobStatus
        from sandbox.drs.models import DrsCall
        from sandbox.ims import ledger
        from sandbox.semrush.models import Call, Project, Prompt
        from tokens.models import PromiseGrant

        out: list[Invariant] = []
        job_ids: list[Any] = [g.job for g in self.generations if g.job]
        jobs = {str(j.id): j for j in AsyncJob.objects.filter(id__in=job_ids)}

        stuck = [j for j in jobs.values() if j.status == JobStatus.IN_PROGRESS]
        out.append(
            Invariant(
                "jobs left IN_PROGRESS after the settle bound",
                len(stuck),
                "0",
                not stuck,
                ", ".join(str(j.id) for j in stuck[:10]),
            )
        )
        unexplained = [j for j in jobs.values() if j.status == JobStatus.FAILED and not j.error_code]
        out.append(Invariant("FAILED jobs without a stated reason", len(unexplained), "0", not unexplained))
        missing = [g for g in self.generations if g.job and g.job not in jobs]
        out.append(Invariant("generations whose job vanished", len(missing), "0", not missing))

        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT project_id, text, count(*) FROM {Prompt._meta.db_table} "  # noqa: S608
                "GROUP BY project_id, text HAVING count(*) > 1"
            )
            duplicates = cursor.fetchall()
        out.append(
            Invariant(
                "duplicate prompts in any Semrush project",
                sum(n - 1 for _, _, n in duplicates),
                "0",
                not duplicates,
                "; ".join(f"{p}: {t[:40]!r} x{n}" for p, t, n in duplicates[:5]),
            )
        )

        # Publishes: one by the market's creation, one per completed run; a failed run never publishes.
        events: defaultdict[str, list[Any]] = defaultdict(list)
        for e in (
            JobEvent.objects.filter(job_id__in=job_ids).order_by("at", "id").values("job_id", "kind", "detail", "at")
        ):
            events[str(e["job_id"])].append(e)
        published_by_failed = []
        for g in self.generations:
            job = jobs.get(g.job or "")
            if job is None or job.status != JobStatus.FAILED or not job.checkpoints.get("projectId", g.market):
                continue
            project = Project.objects.filter(
                workspace__id=job.params.get("workspaceId"), geo_target_id=job.params.get("geoTargetId")
            ).first()
            if project is None:
                continue
            publishes = Call.objects.filter(
                path=f"/sandbox/semrush/v1/ai-projects/{project.id}/publish", method="POST", status=200
            ).count()
            completed = sum(1 for e in events[g.job or ""] if e["kind"] == "completed")
            if publishes > 1 + completed:
                published_by_failed.append(f"{g.job}: {publishes} publishes, {completed} completed runs")
        out.append(
            Invariant(
                "markets published by a failed generation",
                len(published_by_failed),
                "0",
                not published_by_failed,
                "; ".join(published_by_failed[:5]),
            )
        )

        drs_extra, drs_after_batch, explained = self.drs_calls(jobs, events, DrsCall)
        out.append(
            Invariant(
                "DRS calls after the run's batch was persisted",
                len(drs_after_batch),
                "0",
                not drs_after_batch,
                "; ".join(drs_after_batch[:5]),
            )
        )
        out.append(
            Invariant(
                "DRS calls beyond one per run, not explained by a fault",
                len(drs_extra),
                "0",
                not drs_extra,
                "; ".join(drs_extra[:5]),
            )
        )

        calls, runs = self.drs_across_sigterm
        out.append(
            Invariant(
                "DRS calls beyond one per COMPLETED generation with a call in flight at a SIGTERM",
                calls - runs,
                "0",
                calls == runs,
                f"{calls / runs:.2f} DRS calls per generation ({calls}/{runs})" if runs else "no call in flight",
            )
        )

        live = ledger.live_tokens()
        running = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).values("id")
        # A token a grant holds has an owner: a running job, or an ended one retaining its credential
        # (RETRIES_EXHAUSTED, for a re-run; such a grant is counted by the next invariant).
        held = PromiseGrant.objects.count()
        orphans, lost = self.settled_unowned_tokens(held)
        explained += lost
        out.append(
            Invariant(
                "promise tokens live and unowned (IMS ledger)",
                len(orphans),
                "0",
                not orphans,
                f"{live} live: {held} held by grants, {len(lost)} never received by anyone"
                + (f"; {'; '.join(orphans[:5])}" if orphans else ""),
            )
        )
        grants = PromiseGrant.objects.exclude(job_id__in=running).count()
        out.append(Invariant("grants kept by ended jobs", grants, "0", grants == 0))

        spent, throttled, unchecked, codes = self.throttle_accounting(jobs, events)
        explained += throttled
        out.append(
            Invariant(
                "attempts spent on throttling",
                len(spent),
                "0",
                not spent,
                f"{sum(codes.values())} throttled deliveries"
                + (f" ({', '.join(f'{code} x{n}' for code, n in sorted(codes.items()))})" if codes else "")
                + f"; {unchecked} in earlier runs whose attempts the database no longer holds"
                + (f"; {'; '.join(spent[:5])}" if spent else ""),
            )
        )

        leaks = self.token_bytes()
        out.append(Invariant("token bytes in log lines or tables", len(leaks), "0", not leaks, "; ".join(leaks[:5])))

        with self.lock:
            windows = [(a - RESTART_MARGIN, b + RESTART_MARGIN) for a, b in self.api_down]
            outside = [why for t, why in self.readyz_failures if not any(a <= t <= b for a, b in windows)]
            inside = len(self.readyz_failures) - len(outside)
        reasons = ", ".join(f"{why} x{n}" for why, n in Counter(outside).items())
        out.append(
            Invariant(
                "/readyz failures outside the API's own restarts",
                len(outside),
                "0",
                not outside,
                f"{inside} during its restarts" + (f"; outside: {reasons}" if reasons else ""),
            )
        )
        healing, healed = self.healing(events)
        return out + healing, explained + healed

    # --- healing: what a fault cost in time ------------------------------------------------------------
    def healing(self, events: dict[str, list[Any]]) -> tuple[list[Invariant], list[str]]:
        """The invariants of healing: no API 5xx a dependency does not explain, and no receive of a job's message
        that waited out its visibility timeout or ran nothing, unless its worker was SIGKILLed holding it."""
        with self.lock:
            errors = list(self.server_errors)
        upstream = [e for e in errors if e[1] in (502, 503, 504) and e[2] in UPSTREAM_CODES]
        cut = [
            e
            for e in errors
            if e[1] == 503
            and e[2] == "database_unavailable"
            and any(d - 2 <= e[0] <= d + HAND_BACK_AFTER_DATABASE_FAULT for d in self.database_faults)
        ]
        ours = [e for e in errors if e not in upstream and e not in cut]
        out = [
            Invariant(
                "API 5xx answers (not an upstream service's)",
                len(ours),
                "0",
                not ours,
                "; ".join(
                    f"{p}: {status} {code or '-'} (faults near: {self.faults_near(t, 5)})"
                    for t, status, code, p in ours[:5]
                )
                + (f"; {len(upstream)} 502-504 naming an upstream service" if upstream else "")
                + (f"; {len(cut)} 503 database_unavailable (a request cut by terminated backends)" if cut else ""),
            )
        ]
        receipts = self.receipts()
        claims = defaultdict(list)
        for job_id, history in events.items():
            claims[job_id] = [e["at"].timestamp() for e in history if e["kind"] == "lease_claimed"]
        waited_before: list[str] = []
        waited_after: list[str] = []
        ran_nothing: list[str] = []
        explained: list[str] = []
        for r in receipts:
            if r["outcome"] == "deleted":
                continue
            claimed = any(r["t"] <= c <= r["t"] + self.config.visibility for c in claims.get(r["job"], []))
            what = f"job {r['job']} receive {r['count']} at {datetime.fromtimestamp(r['t'], UTC):%H:%M:%S}"
            if r["outcome"] == "handed back":
                if any(d - 2 <= r["t"] <= d + HAND_BACK_AFTER_DATABASE_FAULT for d in self.database_faults):
                    explained.append(
                        f"{what}: handed back at once, its delivery failed before its claim (database fault)"
                    )
                elif not claimed:
                    ran_nothing.append(f"{what}: handed back unrun; faults near: {self.faults_near(r['t'], 5)}")
            elif self.killed_holding(r["t"]):
                explained.append(f"{what}: waited its visibility timeout, its worker SIGKILLed holding it")
            else:
                (waited_after if claimed else waited_before).append(
                    f"{what}: waited its visibility timeout; faults near: {self.faults_near(r['t'], 5)}"
                )
        ran_nothing += waited_before
        delayed = sorted({line.split(" ")[1] for line in waited_before + waited_after})
        out += [
            Invariant(
                "deliveries that failed before their claim and waited a visibility timeout",
                len(waited_before),
                "0",
                not waited_before,
                "; ".join(waited_before[:5]),
            ),
            Invariant(
                "jobs delayed by a visibility timeout, not by a SIGKILL mid-delivery",
                len(delayed),
                "0",
                not delayed,
                "; ".join((waited_before + waited_after)[:5]),
            ),
            Invariant(
                "receives that ran nothing",
                len(ran_nothing),
                "0",
                not ran_nothing,
                f"{len(receipts)} receives of job messages"
                + (f"; {'; '.join(ran_nothing[:5])}" if ran_nothing else ""),
            ),
        ]
        return out, explained

    def killed_holding(self, received: float) -> bool:
        """A worker was SIGKILLed while a message received at `received` could still be held by it: from the
        receive to its visibility timeout, and also a receive just after the kill, by the long poll the killed
        worker left in flight (SQS answers it though nobody reads the answer)."""
        from django.conf import settings

        poll = float(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("wait_time_seconds", 0)) + 1
        return any(
            received - poll <= t <= received + self.config.visibility + 1
            for t, how in self.worker_stops
            if how == "SIGKILL"
        )

    def receipts(self) -> list[dict[str, Any]]:
        """Every receive of a job message by the product, from the local SQS's ledger, with what became of its
        receipt: `deleted` (a delivery ran it, held it back or dropped it), `handed back` (visibility 0) or
        `waited` (nothing: it came back, or would come back, when its visibility timeout ran out). The soak's own
        receives, and receives of the last seconds with nothing done yet (a delivery may be acting on them), are
        left out."""
        from django.conf import settings

        lines = [json.loads(line) for line in self.ledger_path.read_text().splitlines() if line.strip()]
        queue = settings.MARKET_JOBS_QUEUE
        bodies: dict[str, str] = {}
        ops: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        received = []
        for line in lines:
            if line.get("queue") != queue:
                continue
            if line["op"] == "receive":
                if line.get("body"):
                    bodies[line["id"]] = job_of(line["body"])
                received.append(line)
            else:
                ops[line["receipt"]].append(line)
        recent = time.time() - RECENT_RECEIVE_SECONDS
        with self.lock:
            ours = set(self.harness_receipts)
        out = []
        for r in received:
            done = ops.get(r["receipt"], [])
            if r["receipt"] in ours or (not done and r["t"] > recent):
                continue
            outcome = (
                "deleted"
                if any(o["op"] == "delete" or o.get("timeout", 0) > 0 for o in done)
                else "handed back"
                if done
                else "waited"
            )
            out.append({**r, "job": bodies.get(r["id"], "?"), "outcome": outcome})
        return out

    def settled_unowned_tokens(self, held: int) -> tuple[list[str], list[str]]:
        """`unowned_tokens`, read again while it finds orphans until the product's best-effort invalidation could
        have run its course (INVALIDATION_SECONDS): a job's end is committed before its token is invalidated, so a
        read just after a late end would count a token invalidated a moment later. A token still live after that is
        an orphan (an invalidation IMS did not confirm is logged by the product, and explained)."""
        deadline = time.monotonic() + INVALIDATION_SECONDS
        while True:
            orphans, explained = self.unowned_tokens(held)
            if not orphans or time.monotonic() >= deadline:
                return orphans, explained
            time.sleep(0.5)

    def unowned_tokens(self, held: int) -> tuple[list[str], list[str]]:
        """Live promise tokens no running job holds. Explained (listed, not counted): a token that reached no
        one who could invalidate it — IMS rotated it for an exchange whose answer it then lost, or whose answer the
        worker never had (`lost_rotation_reported`, and its holder presented the old token again), or minted it
        with its answer lost, or for a request of its user that got no answer (`minted_for_an_unanswered_request`:
        its API process killed with the mint sent) — and a token whose
        holder was cut off: its job lost a delivery to a SIGKILL, or ended just before a SIGKILL (the
        best-effort invalidation runs after the end is committed), or the product logged that IMS did not
        confirm its invalidation. It expires at IMS. Any other is an orphan."""
        from jobs.models import AsyncJob
        from sandbox.ims import ledger
        from sandbox.ims.models import LedgerEvent, PromiseRecord, PromiseState

        lost = set(LedgerEvent.objects.filter(kind=ledger.ANSWER_LOST).values_list("fingerprint", flat=True))
        # Tokens presented to an exchange after IMS had rotated them: their holder never learned what replaced them.
        presented_again = set(
            LedgerEvent.objects.filter(kind=ledger.REFUSED, operation="exchange", reason="token_exchanged").values_list(
                "fingerprint", flat=True
            )
        )
        kills = [t for t, how in self.worker_stops if how == "SIGKILL"]
        refused = self.invalidations_refused()
        users = {g.user: g for g in self.generations}
        orphans, explained = [], []
        for record in PromiseRecord.objects.filter(state=PromiseState.LIVE).order_by("created_at"):
            g = users.get(record.user_id)
            job = AsyncJob.objects.filter(id=g.job).first() if g and g.job else None
            who = f"generation {g.index} (job {g.job})" if g else record.user_id
            made = record.created_at.timestamp()
            ended = job.ended_at.timestamp() if job and job.ended_at else None
            if record.replaces and record.replaces[:16] in lost:
                why = "rotated by an exchange whose answer was lost"
            elif record.replaces and record.replaces[:16] in presented_again and job and lost_rotation_reported(job):
                why = "rotated by an exchange whose answer its worker never had (its own timeout): a lost rotation"
            elif not record.replaces and record.fingerprint in lost:
                why = "minted, and the mint's answer was lost"
            elif not record.replaces and self.minted_for_an_unanswered_request(record.user_id, made):
                why = "minted for a request that got no answer (its API process was killed)"
            elif job and job.lost_deliveries:
                why = f"its job lost {job.lost_deliveries} delivery(ies) to a killed worker"
            elif ended and any(ended <= k <= ended + 10 for k in kills):
                why = "its job ended just before a worker was SIGKILLed, before the best-effort invalidation"
            elif job and str(job.id) in refused:
                why = "IMS did not confirm its best-effort invalidation (logged by the product)"
            else:
                orphans.append(
                    f"token {record.fingerprint} of {who}, {'rotated' if record.replaces else 'minted'} "
                    f"at {record.created_at:%H:%M:%S}, job {job.status if job else '-'}; faults near: "
                    f"{self.faults_near(made)}"
                )
                continue
            explained.append(f"token {record.fingerprint} of {who}: a live promise token, {why}")
        return orphans[held:] if held else orphans, explained

    def minted_for_an_unanswered_request(self, user: str, made: float) -> bool:
        """Whether a promise token IMS minted for `user` at `made` (wall time) was minted for one of that user's
        requests that got no answer: its API process was killed with the mint sent, and the token's value died
        with the process. IMS may finish the mint after its caller is gone, up to the caller's own IMS timeout
        (a mint later than that would have been lost to that timeout anyway, and logged by the product)."""
        late = TIMEOUTS["IMS_TIMEOUT_SECONDS"]
        with self.lock:
            return any(u == user and sent <= made <= given_up + late for u, sent, given_up in self.unanswered)

    def invalidations_refused(self) -> set[str]:
        """Job ids for which the product logged a failed best-effort invalidation."""
        jobs = set()
        for path in self.stack.var.glob("*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if "promise token invalidation failed" in line:
                    try:
                        jobs.add(str(json.loads(line).get("job_id")))
                    except ValueError:
                        continue
        return jobs

    def drs_calls(self, jobs, events, DrsCall) -> tuple[list[str], list[str], list[str]]:
        """Each DRS call belongs to one run of one generation (its brand names it; a `replaced` event starts a
        new run). Per run: no call after the batch was persisted, and no more than one call that shipped,
        unless the earlier one was slowed past the client's timeout by the soak, or was in flight when its
        worker was SIGKILLed: explained, listed. A call made again after a SIGTERM is counted: a warm stop waits for
        a DRS call within its drain (WORKER_STOP_DRAIN_SECONDS), longer than any call here."""
        by_brand = defaultdict(list)
        for call in DrsCall.objects.order_by("id").values("brand", "outcome", "received_at"):
            by_brand[call["brand"]].append(call)
        timeout = TIMEOUTS["DRS_TIMEOUT_SECONDS"]
        stops = list(self.worker_stops)
        extra, after_batch, explained = [], [], []
        self.drs_across_sigterm = [0, 0]  # DRS calls, COMPLETED runs: runs with a call in flight at a SIGTERM
        sigterms = [d for d, how in stops if how == "SIGTERM"]
        for g in self.generations:
            job = jobs.get(g.job or "")
            if job is None:
                continue
            starts = [e["at"] for e in events[g.job] if e["kind"] == "replaced"]
            batches = [e["at"] for e in events[g.job] if e["kind"] == "checkpoint" and e["detail"] == "generated"]
            runs = defaultdict(list)
            for call in by_brand.get(g.brand_name, []):
                run = sum(1 for s in starts if s <= call["received_at"])
                runs[run].append(call)
            slow_first = g.drs_fault == "DRS timeout"
            for run, calls in runs.items():
                begin = starts[run - 1] if run else None
                end = starts[run] if run < len(starts) else None
                persisted = [b for b in batches if (begin is None or b >= begin) and (end is None or b < end)]
                if persisted:
                    late = [c for c in calls if c["received_at"] > persisted[0]]
                    after_batch += [f"{g.job} run {run}: call at {c['received_at']:%H:%M:%S}" for c in late]
                shipped = [c for c in calls if c["outcome"] == "ship"]
                window = timeout + DRS_TIMEOUT_MS / 1000
                if job.status == "COMPLETED" and any(
                    c["received_at"].timestamp() <= d <= c["received_at"].timestamp() + window
                    for c in shipped
                    for d in sigterms
                ):
                    self.drs_across_sigterm[0] += len(shipped)
                    self.drs_across_sigterm[1] += 1
                # The call the "DRS timeout" switch slowed: the first one admitted (a throttled one took no switch).
                admitted = [c for c in calls if c["outcome"] != "throttled"]
                for earlier in shipped[:-1]:
                    at = earlier["received_at"].timestamp()
                    if slow_first and run == 0 and earlier is admitted[0]:
                        explained.append(
                            f"{g.job}: a second DRS call, the first held past the client's {timeout} s timeout"
                        )
                    elif cut := [how for d, how in stops if at <= d <= at + timeout + DRS_TIMEOUT_MS / 1000]:
                        if "SIGKILL" in cut:
                            explained.append(
                                f"{g.job}: a second DRS call, the first in flight when its worker was SIGKILLed"
                            )
                        else:
                            extra.append(f"{g.job} run {run}: a second DRS call, the first in flight at a SIGTERM")
                    else:
                        times = ", ".join(f"{c['received_at']:%H:%M:%S.%f}"[:-3] for c in shipped)
                        extra.append(
                            f"{g.job} run {run}: {len(shipped)} calls shipped at {times}; faults near: "
                            f"{self.faults_near(at)}"
                        )
        return extra, after_batch, explained

    def throttle_accounting(self, jobs, events) -> tuple[list[str], list[str], int, Counter]:
        """A throttled delivery gives back the attempt its claim counted (`_throttled`, jobs/services/runner.py),
        so at the end of a run (from its `created`, `replaced`, `reauthorized` or `rerun` event) the job's
        attempts equal its claims (`lease_claimed` events) less its throttled deliveries (`throttled` events):
        every attempt more is one a throttle spent. A run's attempts at its end are known for the job's last run
        (the row's `attempts`) and for an earlier run that ended RETRIES_EXHAUSTED (JOB_MAX_ATTEMPTS, or one more
        when the claim found the budget already spent); the throttles of other earlier runs are counted apart.
        Returns (one line per attempt spent, one line per throttled delivery that spent none, how many throttled
        deliveries were not checked, and every throttled delivery by its code)."""
        from django.conf import settings

        spent: list[str] = []
        given_back: list[str] = []
        unchecked, all_codes = 0, Counter[str]()
        for job_id, history in events.items():
            job = jobs.get(job_id)
            runs: list[list[dict[str, Any]]] = []
            for e in history:
                if e["kind"] in RUN_STARTS or not runs:
                    runs.append([])
                runs[-1].append(e)
            for index, run in enumerate(runs):
                throttles = [e for e in run if e["kind"] == "throttled"]
                if not throttles:
                    continue
                codes = [e["detail"].split(":", 1)[0] for e in throttles]
                all_codes.update(codes)
                end = next((e for e in reversed(run) if e["kind"] == "failed"), None)
                if index == len(runs) - 1 and job is not None:
                    attempts = job.attempts
                elif end is not None and end["detail"].startswith("RETRIES_EXHAUSTED"):
                    earlier = "attempts exhausted by earlier deliveries" in end["detail"]
                    attempts = settings.JOB_MAX_ATTEMPTS + (1 if earlier else 0)
                else:
                    unchecked += len(throttles)
                    continue
                claims = sum(1 for e in run if e["kind"] == "lease_claimed")
                kept = min(len(throttles), max(0, attempts + len(throttles) - claims))
                ending = f", ended {end['detail'][:60]}" if end else ""
                spent += [
                    f"job {job_id} run {index}: {claims} claims, {len(throttles)} throttled, {attempts} attempts"
                    f"{ending}"
                ] * kept
                given_back += [
                    f"job {job_id}: a throttled delivery ({code}), its attempt given back"
                    for code in codes[: len(codes) - kept]
                ]
        return spent, given_back, unchecked, all_codes

    def token_bytes(self) -> list[str]:
        """Every JWT-shaped value (bearers, promise and access tokens are all JWTs) and every bearer the soak
        issued, in any log file of any process and in any row of any table of the soak's database."""
        from django.db import connection

        known = {g.token.encode() for g in self.generations if g.token}
        found = []
        for path in sorted(self.stack.var.glob("*.log")):
            data = path.read_bytes()
            hits = len(JWT.findall(data)) + sum(data.count(k) for k in known)
            if hits:
                found.append(f"{path.name}: {hits}")
        with connection.cursor() as cursor:
            cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            for (table,) in cursor.fetchall():
                cursor.execute(
                    f'SELECT count(*) FROM "{table}" t WHERE t::text ~ %s',  # noqa: S608
                    [r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]+"],
                )
                rows = cursor.fetchone()[0]
                if rows:
                    found.append(f"table {table}: {rows} rows")
        return found


def job_of(body: str) -> str:
    """The job id a job message carries (kombu's envelope: base64 JSON around a base64 Celery body)."""
    import base64

    try:
        envelope = json.loads(base64.b64decode(body))
        text = base64.b64decode(envelope["body"]).decode()
    except (ValueError, KeyError, TypeError):
        text = body
    found = re.search(r'"jobId":\s*"([0-9a-fA-F-]{36})"', text)
    return found.group(1) if found else "?"


def added_latency(calm: dict[int, float], faulted: dict[int, float]) -> dict[str, float] | None:
    """Per generation completed at its first end in both runs: the seconds the faults added to it."""
    added = sorted(faulted[i] - calm[i] for i in faulted.keys() & calm.keys())
    if not added:
        return None
    return {
        "generations": len(added),
        "median": added[len(added) // 2],
        "p95": added[min(len(added) - 1, int(len(added) * 0.95))],
        "baseline_median": sorted(calm.values())[len(calm) // 2],
    }


def lost_rotation_reported(job) -> bool:
    """Whether the product reported, for this job, an exchange IMS carried out while its answer never reached the
    worker: the worker's exchange got no answer (it checkpointed the token as in doubt), and IMS then refused that
    token as already exchanged, so the job ended NEEDS_REAUTH naming a lost rotation (markets/generation/handler.py).
    A job whose worker had the answer and then lost the token is not one of these: its ending names no lost
    rotation."""
    from jobs.models import JobEvent

    return JobEvent.objects.filter(job_id=job.id, kind="failed", detail__contains="lost rotation").exists()
