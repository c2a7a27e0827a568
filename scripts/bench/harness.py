"""The bench's harness: the stack it starts, the data it makes, the rows it measures, and helpers."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import time
import timeit
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

from scripts.bench import fit
from scripts.bench.config import API_APP_NAME, BIN, DATABASE_URL, SIZE, WORKER_APP_NAME
from scripts.stack import Failed, Stack, run_local

# Every wait of the bench prints where it is this often, and fails naming what is stuck when no job has ended
# for STALLED_AFTER_S: longer than a healthy run goes without an ending (a DRS call of 60 s, a throttled job's
# wait, the sweeper's minute and its grace for an unsent message) and far shorter than a wait's own bound.
PROGRESS_EVERY_S = 5.0
STALLED_AFTER_S = 300


def proc_status_field(status: str, field: str) -> str:
    """A number from /proc/PID/status (`VmHWM`, `Threads`)."""
    found = re.search(rf"{field}:\s+(\d+)", status)
    if found is None:
        raise Failed(f"/proc status has no {field}")
    return found.group(1)


def wrk_binary() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("--- installing wrk (Debian package)", flush=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "wrk"], check=False, stdout=subprocess.DEVNULL)
        found = shutil.which("wrk")
    if not found:
        raise Failed("wrk is needed for the HTTP figures: install it (Debian/Ubuntu: apt-get install wrk).")
    return found


def http_status(url: str, headers: dict[str, str]) -> int:
    """The status one GET answers (an HTTP error status included)."""
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (a local URL)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (a local URL)
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


class LogCounter:
    """Counts request lines in an access log between two marks, by the path prefix that names the service."""

    def __init__(self, path: Path, pattern: str, services: dict[str, str]):
        self.path, self.pattern, self.services = path, re.compile(pattern), services
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def since_mark(self) -> dict[str, int]:
        counts = dict.fromkeys(self.services, 0)
        with self.path.open("rb") as log:
            log.seek(self.offset)
            for raw in log:
                match = self.pattern.search(raw.decode("utf-8", "replace"))
                if not match:
                    continue
                for name, prefix in self.services.items():
                    if match.group("path").startswith(prefix):
                        counts[name] += 1
                        break
        return counts


def cpu_seconds(groups: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each named process group, and by PostgreSQL's processes."""
    tick = os.sysconf("SC_CLK_TCK")
    used = dict.fromkeys([*groups, "PostgreSQL"], 0.0)
    by_group = {pgid: name for name, pgid in groups.items()}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended meanwhile
        comm, fields = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick
        if comm == "postgres":
            used["PostgreSQL"] += seconds
        elif int(fields[2]) in by_group:
            used[by_group[int(fields[2])]] += seconds
    return used


class Harness:
    def __init__(self):
        base = int(os.environ.get("BENCH_PORT_BASE", "0"))  # a fixed range when set, else free ports
        self.stack = Stack(
            database_url=DATABASE_URL,
            names=("sqs", "sim", "api_on", "api_off"),
            settings_module="benchmarks.settings",
            prefix="serenity-bench-",
            first_port=base or None,
            env={
                "SERENITY_ASYNC_PROMPT_GEN": "true",
                "LOG_LEVEL": "WARNING",
                # The figures are about cost, not abuse limits.
                "THROTTLE_ONBOARDING_RATE": "100000/min",
                "THROTTLE_ORG_MARKETS_RATE": "100000/hour",
                # The simulator is not Semrush: the fleet's Semrush budget stays on (each call takes its slot, a
                # statement counted apart) but out of the scenarios' reach.
                "SEMRUSH_MAX_CALLS_PER_SECOND": "100000",
                # The wait scenario's clients are one user of one organization (a brand's bearer): the per-caller
                # shares of waiting polls would answer all but 64 of its waits at once as plain polls (304). Each
                # share is the process's whole total here, so the scenario measures the wait itself; the shares
                # are tested on their own (tests/markets/generation/test_waiting.py).
                "POLL_WAIT_MAX_WAITERS_PER_USER": "640",
                "POLL_WAIT_MAX_WAITERS_PER_ORG": "640",
                # The APIs' pools (the simulators, beat, the harness and the workers set their own): what each
                # process holds is counted against PostgreSQL's max_connections (scripts/bench/fit.py).
                "DB_POOL_MAX_SIZE": str(SIZE.api_pool),
                **dict(SIZE.env),
            },
        )
        self.var, self.ports, self.env, self.runner = (
            self.stack.var,
            self.stack.ports,
            self.stack.env,
            self.stack.runner,
        )
        self.scenario = ""
        # Brands made from now on have their workspace's tags (`brand`): a scenario measuring the steady state.
        self.brands_tagged = False
        self.rows: list[tuple[str, str, str, str, str]] = []
        self.sim_calls = LogCounter(
            self.var / "sim-access.log",
            r'"[A-Z]+ (?P<path>\S+) HTTP',
            {"IMS": "/sandbox/ims", "Semrush": "/sandbox/semrush", "DRS": "/sandbox/drs"},
        )
        self.sqs_calls = LogCounter(self.var / "sqs.log", r'"(?P<path>POST \S*) HTTP', {"SQS": "POST"})

    # --- processes -------------------------------------------------------------------------------------
    def start(self) -> None:
        self.stack.start_infrastructure()
        # Enough threads to hold every DRS call of the scale scenario at once (a waiting call holds no
        # database connection: sandbox/drs/views.py).
        self.stack.gunicorn(
            "simulators",
            "sim",
            access_log=self.sim_calls.path,
            WEB_CONCURRENCY="2",
            GUNICORN_THREADS=str(SIZE.scale_concurrency // 2 + 64),
            GUNICORN_TIMEOUT="120",
            DB_POOL_MAX_SIZE=str(SIZE.sim_pool),
        )
        self.stack.gunicorn("api (flag on)", "api_on", PGAPPNAME=API_APP_NAME)
        self.stack.gunicorn("api (flag off)", "api_off", SERENITY_ASYNC_PROMPT_GEN="false")
        # Beat as production runs it: the sweeper re-sends a job whose message never went out (or was lost), the
        # probe reports stuck jobs and dead workers (its lines in beat.log).
        self.stack.beat(DB_POOL_MAX_SIZE=str(fit.BEAT_POOL), LOG_LEVEL="INFO")
        self.stack.setup_django(DB_POOL_MAX_SIZE=str(fit.HARNESS_POOL))

    def start_worker(
        self, meter: Path, *, threads: int = SIZE.worker_threads, name: str = "worker", **env
    ) -> subprocess.Popen:
        from django.conf import settings

        # Exactly as the image's `worker` role starts it (docker/serenity-entrypoint): both queues, its log level, the
        # thread count from WORKER_CONCURRENCY; only the app differs (the production app plus a per-delivery meter).
        argv = [
            str(BIN / "celery"),
            "-A",
            "benchmarks.worker_app",
            "worker",
            "-P",
            "threads",
            "-Q",
            f"{settings.MARKET_JOBS_QUEUE},{settings.MAINTENANCE_QUEUE}",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "INFO",
        ]
        return self.runner.start(
            name,
            argv,
            log_file=self.var / f"{name}.log",
            env={
                "BENCH_WORKER_METER": str(meter),
                "PGAPPNAME": WORKER_APP_NAME,
                "WORKER_CONCURRENCY": str(threads),
                "LOG_LEVEL": "INFO",
                "DB_POOL_MAX_SIZE": str(fit.pool_per_process(SIZE, 1)),
                **env,
            },
        )

    def start_workers(self, label: str, processes: int, threads: int, **env) -> dict[str, subprocess.Popen]:
        """`processes` workers of `threads` each, as `start_worker` starts one: `worker-0`, `worker-1`, …, each
        metering into `<label>-meter-<i>.jsonl` and naming its PostgreSQL connections `<WORKER_APP_NAME>-<i>`."""
        pool = str(fit.pool_per_process(SIZE, processes))
        return {
            f"worker-{index}": self.start_worker(
                self.var / f"{label}-meter-{index}.jsonl",
                threads=threads,
                name=f"worker-{index}",
                PGAPPNAME=f"{WORKER_APP_NAME}-{index}",
                **{"DB_POOL_MAX_SIZE": pool, **env},
            )
            for index in range(processes)
        }

    def meter_runs(self, label: str) -> list[dict]:
        """The `jobs.run` deliveries metered by the workers of `start_workers(label, …)` (or `start_worker`)."""
        runs = []
        for path in sorted(self.var.glob(f"{label}-meter*.jsonl")):
            runs += [json.loads(line) for line in path.read_text().splitlines()]
        return [run for run in runs if run["task"] == "jobs.run"]

    def worker_connections(self) -> dict[str, int]:
        """Every worker's PostgreSQL connections now, by application_name (`start_worker` sets it)."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity WHERE application_name LIKE %s "
                "GROUP BY application_name",
                [f"{WORKER_APP_NAME}%"],
            )
            return dict(cursor.fetchall())

    def stop(self, *names: str) -> None:
        """Stop the named children together (SIGTERM to each group, SIGKILL after 60 s) and forget them. After
        a worker, wait out the long poll it left pending: the local SQS would hand the next message to that dead
        poll, hidden for the whole visibility timeout."""
        from django.conf import settings

        stopping = [(child, proc) for child, proc in self.runner.children if child in names]
        for _child, proc in stopping:
            run_local._signal_group(proc, signal.SIGTERM)
        for child, proc in stopping:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                run_local._signal_group(proc, signal.SIGKILL)
                proc.wait()
            self.runner.children.remove((child, proc))
        if any(child.startswith("worker") for child, _proc in stopping):
            time.sleep(settings.CELERY_BROKER_TRANSPORT_OPTIONS["wait_time_seconds"] + 1)

    # --- data ------------------------------------------------------------------------------------------
    def brand(self, label: str, *, of: dict | None = None) -> dict:
        """An active brand with a Semrush workspace and a bearer for its organization's user; in the
        organization of the brand `of` when given (same user and bearer)."""
        from django.conf import settings

        from markets.models import Brand, Organization, Site
        from sandbox.ims.keys import issue_user_token
        from sandbox.semrush import services

        if of is not None:
            org = Organization.objects.get(id=of["org"])
            ims_org, user = org.ims_org_id, of["user"]
        else:
            ims_org = f"BENCH{uuid.uuid4().hex[:19].upper()}@AdobeOrg"
            user = f"BENCH{uuid.uuid4().hex[:19].upper()}@AdobeID"
            org = Organization.objects.create(ims_org_id=ims_org, name=f"Bench {label}", is_serenity_active=True)
        domain = f"bench-{label}-{uuid.uuid4().hex[:6]}.example"
        brand = Brand.objects.create(
            organization=org,
            name=f"Bench {label}",
            display_name=f"Bench {label}",
            domain=domain,
            primary_url=f"https://{domain}/",
            status=Brand.Status.ACTIVE,
        )
        site = Site.objects.create(organization=org, brand=brand, base_url=f"https://{domain}/")
        workspace = services.workspace_create(name=brand.name, parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)
        if self.brands_tagged:  # the tags a job writes its prompts with, as after a brand's first job
            services.tag_root_create(workspace_id=workspace.id, name="source", values=["semrush"])
            services.tag_root_create(workspace_id=workspace.id, name="origin", values=["ai"])
        Brand.objects.filter(id=brand.id).update(base_site=site, semrush_workspace_id=workspace.id)
        return {
            "org": str(org.id),
            "brand": str(brand.id),
            "site": str(site.id),
            "user": user,
            "brandFields": {"brandDomain": domain, "brandNames": [f"Bench {label}"]},
            "token": issue_user_token(user_id=user, org_ids=[ims_org], ttl=3600),
        }

    @staticmethod
    def bearer(b: dict) -> dict[str, str]:
        """The one way every scenario authenticates: HTTP headers, for Django's test client (`headers=`),
        urllib and wrk alike, so that a baseline and the endpoint it is measured against always carry the
        same credential."""
        return {"Authorization": f"Bearer {b['token']}"}

    @staticmethod
    def expect(what: str, response, status: int) -> None:
        """Stop the bench, naming the request, when a request it is about to time answers anything else."""
        if response.status_code != status:
            raise Failed(
                f"{what} answered {response.status_code}, not {status}: the bench's data or its request is wrong"
            )

    def markets_url(self, port: int, b: dict) -> str:
        return f"http://127.0.0.1:{port}/v2/orgs/{b['org']}/brands/{b['brand']}/serenity/markets"

    @staticmethod
    def post(url: str, token: str, body: dict, timeout: float = 60) -> tuple[int, dict, float]:
        headers = {
            **Harness.bearer({"token": token}),
            "Content-Type": "application/json",
            "x-promise-audience": "semrush",
        }
        request = urllib.request.Request(  # noqa: S310 (a local URL)
            url, data=json.dumps(body).encode(), method="POST", headers=headers
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (local bench URL)
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        return status, json.loads(raw or b"{}"), time.perf_counter() - started

    def bare_view_ms(self) -> float:
        """The bare authenticated view in process, best of 5 rounds of 100: this machine's speed at Django work."""
        from django.test import Client

        b = getattr(self, "_bare_brand", None) or self.brand("bare")
        self._bare_brand = b
        client, auth = Client(HTTP_HOST="127.0.0.1"), self.bearer(b)
        self.expect("the bare view (in process)", client.get("/bench/bare", headers=auth), 200)
        timer = timeit.Timer(lambda: client.get("/bench/bare", headers=auth))
        return min(timer.timeit(100) / 100 for _round in range(5)) * 1000

    def queue_jobs(self, b: dict, count: int, *, first_country: int = 0) -> int:
        """Queue `count` generation jobs for brand `b` through the API (activations of up to 50 markets)."""
        from markets import geo

        countries = list(geo.COUNTRY_CODES)[first_country : first_country + count]
        if len(countries) < count:
            raise Failed(f"only {len(countries)} countries left for {count} markets of one brand")
        url = self.markets_url(self.ports["api_on"], b).removesuffix("/markets") + "/activate"
        created = 0
        for start in range(0, count, SIZE.activate_markets):
            chunk = countries[start : start + SIZE.activate_markets]
            status, body, _seconds = self.post(
                url,
                b["token"],
                {
                    "generatePrompts": True,
                    **b["brandFields"],
                    "markets": [{"market": c, "languageCode": "en"} for c in chunk],
                },
                timeout=120,
            )
            made = sum(1 for m in body.get("markets", []) if m.get("status") == 201)
            if status not in (200, 207) or made != len(chunk):
                raise Failed(f"activate answered {status} with {made} of {len(chunk)} created: {str(body)[:300]}")
            created += made
        return created

    def queue_for_org(self, label: str, count: int, *, of: dict | None = None) -> dict:
        """`count` jobs for one organization, over as many of its brands as it takes (200 markets each)."""
        first: dict | None = None
        for index in range(math.ceil(count / 200)):
            b = self.brand(f"{label}{index}", of=of or first)
            first = first or b
            self.queue_jobs(b, min(200, count - index * 200))
        assert first is not None, "count must be positive"
        return first

    def one_job_seconds(self, b: dict, market: str, timeout: float = 600) -> float:
        """Create one market of brand `b` with generation and wait for its job: queued to completed, in s."""
        from jobs.models import AsyncJob, JobStatus

        status, body, _s = self.post(
            self.markets_url(self.ports["api_on"], b),
            b["token"],
            {"market": market, "languageCode": "en", "generatePrompts": True, **b["brandFields"]},
        )
        if status != 201:
            raise Failed(f"create market answered {status}: {body}")
        job_id = body["promptGeneration"]["jobId"]
        started = time.monotonic()
        next_line = started + PROGRESS_EVERY_S
        while (job := AsyncJob.objects.get(id=job_id)).status == JobStatus.IN_PROGRESS:
            self.runner.check_children()
            now = time.monotonic()
            if now >= next_line:
                next_line = now + PROGRESS_EVERY_S
                print(f"  … one job of {market}: phase {job.phase} ({now - started:.0f} s)", flush=True)
            if now - started > timeout:
                raise Failed(
                    f"a single job did not finish within {timeout:.0f} s: {self.stuck(AsyncJob.objects.all())}"
                )
            time.sleep(0.2)
        if job.status != JobStatus.COMPLETED:
            raise Failed(f"a single job ended {job.status} {job.error_code}")
        assert job.ended_at is not None
        return (job.ended_at - job.created_at).total_seconds()

    def burst(self, label: str, jobs: int, processes: int, threads: int, *, before_workers=None, **env) -> dict:
        """Queue `jobs` for one organization, run them on `processes` workers of `threads` (`env` their settings)
        until none is left, sampling the DRS simulator's invocations in flight and the workers' PostgreSQL
        connections twice a second. Returns the wall time (first claim to last completion), the peaks, CPU per
        process, each worker's peak RSS, attempts spent beyond each job's first, `throttled` events and the
        deliveries' outcomes. `before_workers()`, when given, is called once the jobs are queued."""
        from django.db.models import Max, Min
        from django.utils import timezone

        from jobs.models import AsyncJob, JobStatus
        from sandbox.drs import controls as drs

        since = timezone.now()  # the wait scenario's jobs, left IN_PROGRESS, are not this run's
        self.queue_for_org(label, jobs)
        queued = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS, created_at__gte=since).count()
        if before_workers is not None:  # a switch for the workers alone, not for the queueing's calls
            before_workers()
        workers_started = timezone.now()
        workers = self.start_workers(label, processes, threads, **env)
        groups = {name: proc.pid for name, proc in self.runner.children if name in (*workers, "simulators", "sqs")}
        self.wait_first_claim(since)
        cpu_before = cpu_seconds(groups)
        peak = {"drs": 0, "connections": 0}

        def sample() -> None:
            peak["drs"] = max(peak["drs"], drs.concurrency()["inFlight"])
            peak["connections"] = max(peak["connections"], sum(self.worker_connections().values()))

        self.wait_drained(label, 600 + jobs, sample, since=since)
        cpu = {name: used - cpu_before[name] for name, used in cpu_seconds(groups).items()}
        rss = {
            name: int(proc_status_field(Path(f"/proc/{proc.pid}/status").read_text(), "VmHWM")) / 1024
            for name, proc in workers.items()
        }
        self.stop(*workers)
        ran = AsyncJob.objects.filter(created_at__gte=since)
        span = ran.aggregate(first=Min("started_at"), last=Max("ended_at"))
        outcomes = Counter(str(run["outcome"]) for run in self.meter_runs(label))
        return {
            "since": since,
            "workers_started": workers_started,
            "queued": queued,
            "wall": (span["last"] - span["first"]).total_seconds(),
            "peak": peak,
            "cpu": cpu,
            "rss": rss,
            "attempts_spent": sum(max(0, attempts - 1) for attempts in ran.values_list("attempts", flat=True)),
            "throttled_events": ran.filter(events__kind="throttled").count(),
            "outcomes": outcomes,
        }

    def wait_drained(self, what: str, timeout: float, sample=None, *, since=None) -> None:
        """Until no job is IN_PROGRESS (of those created from `since` on, when given); `sample()` is called twice
        a second meanwhile. A progress line every PROGRESS_EVERY_S; Failed naming what is stuck after `timeout`,
        or as soon as no job has ended for STALLED_AFTER_S."""
        from django.db.models import Count

        from jobs.models import AsyncJob, JobStatus

        jobs = AsyncJob.objects.all() if since is None else AsyncJob.objects.filter(created_at__gte=since)
        started = last_change = time.monotonic()
        next_line, ended_before = started + PROGRESS_EVERY_S, -1
        while True:
            counts = dict(jobs.values_list("status").annotate(n=Count("id")).order_by())
            running = counts.get(JobStatus.IN_PROGRESS, 0)
            if not running:
                break
            self.runner.check_children()
            if sample:
                sample()
            now, ended = time.monotonic(), sum(counts.values()) - running
            if ended != ended_before:
                ended_before, last_change = ended, now
            if now >= next_line:
                next_line = now + PROGRESS_EVERY_S
                print(f"  … {what}: {self.jobs_now(jobs)} ({now - started:.0f} s)", flush=True)
            if now - started > timeout or now - last_change > STALLED_AFTER_S:
                why = f"after {timeout:.0f} s" if now - started > timeout else f"none ended for {STALLED_AFTER_S} s"
                raise Failed(f"{what}: jobs still IN_PROGRESS {why}: {self.stuck(jobs)}")
            time.sleep(0.5)
        failed = jobs.exclude(status=JobStatus.COMPLETED).values_list("error_code", flat=True)
        if failed:
            raise Failed(f"{what}: jobs did not complete: {sorted({str(code) for code in failed})}")

    @staticmethod
    def jobs_now(jobs) -> str:
        """`12 of 500 ended (0 failed); 488 IN_PROGRESS: 100 leased, 388 waiting for a delivery`."""
        from django.db.models import Count, Q

        from jobs.models import JobStatus

        n = jobs.aggregate(
            total=Count("id"),
            completed=Count("id", filter=Q(status=JobStatus.COMPLETED)),
            running=Count("id", filter=Q(status=JobStatus.IN_PROGRESS)),
            leased=Count("id", filter=Q(status=JobStatus.IN_PROGRESS, lease_token__isnull=False)),
        )
        ended = n["total"] - n["running"]
        return (
            f"{ended} of {n['total']} ended ({ended - n['completed']} not COMPLETED); {n['running']} IN_PROGRESS: "
            f"{n['leased']} leased, {n['running'] - n['leased']} waiting for a delivery"
        )

    def stuck(self, jobs) -> str:
        """What the jobs still IN_PROGRESS are doing: by phase, leased or not, messages never sent, the quietest
        one's last event, and which of the bench's processes are alive."""
        from django.db.models import Count
        from django.utils import timezone

        from jobs.models import JobEvent, JobStatus

        running = jobs.filter(status=JobStatus.IN_PROGRESS)
        phases = ", ".join(
            f"{phase} {n}" for phase, n in running.values_list("phase").annotate(n=Count("id")).order_by()
        )
        unsent = running.filter(message_sent_at__isnull=True).count()
        quietest = running.order_by("updated_at").first()
        last = ""
        if quietest is not None:
            event = JobEvent.objects.filter(job=quietest).order_by("-at").first()
            quiet = (timezone.now() - quietest.updated_at).total_seconds()
            last = (
                f"; the quietest, {quietest.id}, unchanged for {quiet:.0f} s (phase {quietest.phase}, "
                f"{'leased' if quietest.lease_token else 'no lease'}, attempts {quietest.attempts}, throttles "
                f"{quietest.throttles}" + (f", last event {event.kind} {event.detail[:80]!r}" if event else "") + ")"
            )
        alive = ", ".join(name for name, proc in self.runner.children if proc.poll() is None)
        return f"{self.jobs_now(jobs)}; by phase: {phases}; never sent: {unsent}{last}; processes alive: {alive}"

    def wait_first_claim(self, since, timeout: float = 300) -> None:
        """Until a job created from `since` on is claimed; a progress line every PROGRESS_EVERY_S."""
        from jobs.models import AsyncJob

        started = time.monotonic()
        next_line = started + PROGRESS_EVERY_S
        while not AsyncJob.objects.filter(started_at__gte=since).exists():
            self.runner.check_children()
            now = time.monotonic()
            if now >= next_line:
                next_line = now + PROGRESS_EVERY_S
                print(f"  … waiting for the first claim ({now - started:.0f} s)", flush=True)
            if now - started > timeout:
                jobs = AsyncJob.objects.filter(created_at__gte=since)
                raise Failed(f"no job claimed within {timeout:.0f} s: {self.stuck(jobs)}")
            time.sleep(0.05)

    # --- output ----------------------------------------------------------------------------------------
    def row(
        self, what: str, measured: str, ratio: float | None, target: float | None, sense: str, unit: str = ""
    ) -> None:
        if ratio is None or target is None:
            self.rows.append((self.scenario, what, measured, "" if ratio is None else f"{ratio:.3g}×", ""))
            print(f"  {what}: {measured}", flush=True)
            return
        met = ratio >= target if sense == "≥" else ratio <= target
        goal = f"{sense} {target:g}× {unit}".strip() if not unit else f"{sense} {target:g}× ({unit})"
        self.rows.append((self.scenario, what, measured, f"{ratio:.3g}×", f"{goal} {'met' if met else 'NOT met'}"))
        print(f"  {what}: {measured} -> {ratio:.3g}× ({goal} {'met' if met else 'NOT met'})", flush=True)

    def cpu_row(self, cpu: dict[str, float], wall: float, of: str = "") -> None:
        """The CPU each process used during a scenario's `wall` seconds (`cpu_seconds` differences)."""
        self.row(
            f"… CPU used meanwhile, per process{of} (2 cores give 2 s per second of wall time)",
            ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items()) + f" in {wall:.1f} s",
            None,
            None,
            "",
        )

    def table(self, scenario: str | None = None) -> str:
        lines = ["| scenario | measured (same run) | ratio | target |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {what} | {measured} | {ratio} | {target} |"
            for name, what, measured, ratio, target in self.rows
            if scenario in (None, name)
        ]
        return "\n".join(lines)
