"""`make bench`: measure the product as production runs it and print one table of side-by-side ratios.

Brings up, on a fresh PostgreSQL database (BENCH_DATABASE_URL, default `serenity_bench` next to the test
database): the local SQS, the simulators in their own gunicorn server (their cost stays out of the API's and
the worker's figures), the API under gunicorn twice (prompt generation flag on, and off), and later one Celery
worker as production starts it (threads pool, 8 threads). Each scenario measures the product against a
baseline taken in the same run, because absolute times on a shared machine are noise:

1. poll vs a bare authenticated DRF view, in process (timeit over Django's test client) and over HTTP (wrk),
   200 and 304;
2. create market, async path (flag on, generatePrompts) vs the old path (flag off): latency and external calls;
3. activate with 50 markets: wall time and external calls;
4. worker: the queued jobs with DRS answering in 1 s, wall time vs the ideal N/C × L, and per delivery the
   worker's own CPU and SQL statements (benchmarks/worker_app.py meters them in the worker process).

The table is printed and written to docs/benchmarks.md with the machine's description. Every process this
script starts is stopped by its process group when it ends, however it ends.
"""
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
sys.path.insert(0, str(ROOT))  # benchmarks.settings and the product, imported below after django.setup()
BIN = Path(PYTHON).parent
_spec = importlib.util.spec_from_file_location("run_local", ROOT / "scripts" / "run_local.py")
assert _spec is not None and _spec.loader is not None, "scripts/run_local.py is missing"
run_local = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_local)
Failed, Runner, http_ok = run_local.Failed, run_local.Runner, run_local.http_ok

DATABASE_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/serenity_bench")
WORKER_THREADS = 8
DRS_LATENCY_MS = 1000
CREATE_SAMPLES = 14  # per path; with the 50 activated markets, 64 jobs wait for the worker
ACTIVATE_MARKETS = 50
WRK_SECONDS = 6
WRK_ROUNDS = 2
WRK_CONNECTIONS = 16
TARGETS = {"poll": 0.5, "worker_wall": 1.5, "worker_cpu_ms": 30, "worker_sql": 25, "create": 0.7}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recreate_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


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
        comm, fields = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick
        if comm == "postgres":
            used["PostgreSQL"] += seconds
        elif int(fields[2]) in by_group:
            used[by_group[int(fields[2])]] += seconds
    return used


class Bench:
    def __init__(self):
        self.var = Path(tempfile.mkdtemp(prefix="serenity-bench-"))
        self.ports = {name: free_port() for name in ("sqs", "sim", "api_on", "api_off")}
        env = dict(os.environ)
        env.update({
            "SERENITY_ENVIRONMENT": "local",
            "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
            "DATABASE_URL": DATABASE_URL,
            "SERENITY_VAR_DIR": str(self.var),
            "LOCAL_BASE_URL": f"http://127.0.0.1:{self.ports['sim']}",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.ports['sqs']}",
            "SERENITY_ASYNC_PROMPT_GEN": "true",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            # The figures are about cost, not abuse limits.
            "THROTTLE_ONBOARDING_RATE": "100000/min",
            "THROTTLE_ORG_MARKETS_RATE": "100000/hour",
        })
        self.env = env
        self.runner = Runner(env)
        self.rows: list[tuple[str, str, str, str]] = []
        self.sim_calls = LogCounter(self.var / "sim-access.log", r'"[A-Z]+ (?P<path>\S+) HTTP',
                                    {"IMS": "/sandbox/ims", "Semrush": "/sandbox/semrush", "DRS": "/sandbox/drs"})
        self.sqs_calls = LogCounter(self.var / "sqs.log", r'"(?P<path>POST \S*) HTTP', {"SQS": "POST"})

    # --- processes -------------------------------------------------------------------------------------
    def gunicorn(self, name: str, port: int, *, access_log: Path | None = None, **env) -> None:
        argv = [str(BIN / "gunicorn"), "-c", "python:serenity.gunicorn", "serenity.wsgi:application",
                "--bind", f"127.0.0.1:{port}", "--access-logfile", str(access_log or "/dev/null")]
        self.runner.start(name, argv, log_file=self.var / f"{name}.log", env=env)
        self.runner.wait_until(name, lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 60)

    def start(self) -> None:
        recreate_database(DATABASE_URL)
        manage = [PYTHON, "manage.py"]
        self.runner.start("sqs", [PYTHON, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.ports["sqs"])],
                          log_file=self.var / "sqs.log")
        self.runner.wait_until("the local SQS", lambda: run_local.port_open("127.0.0.1", self.ports["sqs"]), 30)
        self.runner.run_step("migrate", [*manage, "migrate", "--noinput", "-v", "0"])
        self.runner.run_step("bootstrap queues", [*manage, "bootstrap_queues", "--local"])
        self.gunicorn("simulators", self.ports["sim"], access_log=self.sim_calls.path, GUNICORN_THREADS="16")
        self.gunicorn("api (flag on)", self.ports["api_on"])
        self.gunicorn("api (flag off)", self.ports["api_off"], SERENITY_ASYNC_PROMPT_GEN="false")
        os.environ.update(self.env)
        import django

        django.setup()

    def start_worker(self, meter: Path) -> None:
        from django.conf import settings

        # As docker/Dockerfile's `worker` role starts it, on the job queue alone.
        argv = [str(BIN / "celery"), "-A", "benchmarks.worker_app", "worker", "-P", "threads",
                "-c", str(WORKER_THREADS), "-Q", settings.MARKET_JOBS_QUEUE,
                "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "WARNING"]
        self.runner.start("worker", argv, log_file=self.var / "worker.log", env={"BENCH_WORKER_METER": str(meter)})

    # --- data ------------------------------------------------------------------------------------------
    def brand(self, label: str) -> dict:
        """An active brand with a Semrush workspace and a bearer for its organization's user."""
        from django.conf import settings

        from markets.models import Brand, Organization, Site
        from serenity.sandbox.ims.keys import issue_user_token
        from serenity.sandbox.semrush import services

        ims_org = f"BENCH{uuid.uuid4().hex[:19].upper()}@AdobeOrg"
        user = f"BENCH{uuid.uuid4().hex[:19].upper()}@AdobeID"
        org = Organization.objects.create(ims_org_id=ims_org, name=f"Bench {label}", is_serenity_active=True)
        domain = f"bench-{label}-{uuid.uuid4().hex[:6]}.example"
        brand = Brand.objects.create(organization=org, name=f"Bench {label}", display_name=f"Bench {label}",
                                     domain=domain, primary_url=f"https://{domain}/", status=Brand.Status.ACTIVE)
        site = Site.objects.create(organization=org, brand=brand, base_url=f"https://{domain}/")
        workspace = services.workspace_create(name=brand.name, parent_id=settings.SEMRUSH_PARENT_WORKSPACE_ID)
        Brand.objects.filter(id=brand.id).update(base_site=site, semrush_workspace_id=workspace.id)
        return {"org": str(org.id), "brand": str(brand.id), "site": str(site.id), "user": user,
                "token": issue_user_token(user_id=user, org_ids=[ims_org], ttl=3600)}

    def markets_url(self, port: int, b: dict) -> str:
        return f"http://127.0.0.1:{port}/v2/orgs/{b['org']}/brands/{b['brand']}/serenity/markets"

    @staticmethod
    def post(url: str, token: str, body: dict, timeout: float = 60) -> tuple[int, dict, float]:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                   "x-promise-audience": "semrush"}
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",  # noqa: S310
                                         headers=headers)
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (local bench URL)
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        return status, json.loads(raw or b"{}"), time.perf_counter() - started

    # --- scenarios -------------------------------------------------------------------------------------
    def poll(self) -> None:
        """The poll vs the bare authenticated view: same server, same bearer, same tool."""
        from django.test import Client

        from jobs.models import AsyncJob, JobStatus
        from markets.constants import MARKET_GENERATION_JOB_TYPE

        b = self.brand("poll")
        batch = {"prompts": [{"prompt": f"best espresso machine for a small office, take {i}"} for i in range(50)]}
        job = AsyncJob.objects.create(
            id=uuid.uuid4(), job_type=MARKET_GENERATION_JOB_TYPE, status=JobStatus.COMPLETED,
            organization_id=b["org"], brand_id=b["brand"], site_id=b["site"], user_id=b["user"], phase="published",
            params={"seeds": [{"topic": f"topic {i}", "prompts": ["x" * 80] * 3} for i in range(20)]},
            checkpoints={"batch": batch, "written": 50, "projectId": "p", "published": True},
            result={"promptCount": 50, "projectId": "p", "published": True, "verdict": "ship"},
        )
        path = f"/v2/orgs/{b['org']}/brands/{b['brand']}/serenity/markets/generation/jobs/{job.id}"
        auth: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {b['token']}"}
        client = Client(HTTP_HOST="127.0.0.1")
        first = client.get(path, **auth)
        if first.status_code != 200 or client.get("/bench/bare", **auth).status_code != 200:
            raise Failed(f"poll answered {first.status_code}; the bench data is wrong")
        etag = first["ETag"]
        if client.get(path, HTTP_IF_NONE_MATCH=etag, **auth).status_code != 304:
            raise Failed("a poll with its own ETag did not answer 304")

        # Interleaved: each round times every endpoint once; the best round of each is kept.
        timers = {"bare": timeit.Timer(lambda: client.get("/bench/bare", **auth)),
                  "floor": timeit.Timer(lambda: client.get("/bench/bare-query", **auth)),
                  "poll": timeit.Timer(lambda: client.get(path, **auth)),
                  "poll304": timeit.Timer(lambda: client.get(path, HTTP_IF_NONE_MATCH=etag, **auth))}
        number, best_of = 200, {name: float("inf") for name in timers}
        for _round in range(7):
            for name, timer in timers.items():
                best_of[name] = min(best_of[name], timer.timeit(number) / number)
        bare, floor, poll, poll304 = best_of["bare"], best_of["floor"], best_of["poll"], best_of["poll304"]
        for label, value in (("200", poll), ("304", poll304)):
            self.row(f"poll {label}, in process (timeit, best of 7 interleaved rounds of 200), as throughput vs "
                     "the bare view",
                     f"{value * 1000:.2f} ms vs bare {bare * 1000:.2f} ms", bare / value, TARGETS["poll"], "≥")
        self.row("… the bare view with one `SELECT 1` (the floor of any endpoint that reads the database once)",
                 f"{floor * 1000:.2f} ms", bare / floor, None, "")

        wrk = wrk_binary()
        base = f"http://127.0.0.1:{self.ports['api_on']}"

        def rate(url: str, *headers: str) -> tuple[float, str]:
            argv = [wrk, "-t2", f"-c{WRK_CONNECTIONS}", f"-d{WRK_SECONDS}s", "--latency",
                    "-H", f"Authorization: Bearer {b['token']}"]
            for header in headers:
                argv += ["-H", header]
            out = subprocess.run([*argv, url], capture_output=True, text=True, check=True).stdout
            if "Non-2xx or 3xx" in out:
                raise Failed(f"wrk saw error answers from {url}:\n{out}")
            rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
            p50 = re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE)
            if rps is None or p50 is None:
                raise Failed(f"wrk's report from {url} was not understood:\n{out}")
            return float(rps.group(1)), p50.group(1)

        subprocess.run([wrk, "-t1", "-c4", "-d2s", "-H", f"Authorization: Bearer {b['token']}", base + path],
                       capture_output=True, check=True)  # warm every gunicorn worker's JWKS cache and imports
        # Interleaved rounds, best of each: a burst of noise from another tenant hits one figure, not the ratio.
        targets = {"bare": (base + "/bench/bare",), "floor": (base + "/bench/bare-query",), "poll": (base + path,),
                   "poll304": (base + path, f"If-None-Match: {etag}")}
        best: dict[str, tuple[float, str]] = {}
        for _round in range(WRK_ROUNDS):
            for name, (url, *headers) in targets.items():
                measured = rate(url, *headers)
                best[name] = max(best.get(name, measured), measured, key=lambda figure: figure[0])
        (bare_rps, bare_p50), (floor_rps, floor_p50) = best["bare"], best["floor"]
        (poll_rps, poll_p50), (poll304_rps, poll304_p50) = best["poll"], best["poll304"]
        for label, rps, p50 in (("200", poll_rps, poll_p50), ("304", poll304_rps, poll304_p50)):
            self.row(f"poll {label}, over HTTP (wrk, {WRK_CONNECTIONS} connections, gunicorn 2×8, best of "
                     f"{WRK_ROUNDS} interleaved rounds of {WRK_SECONDS} s)",
                     f"{rps:.0f} req/s (p50 {p50}) vs bare {bare_rps:.0f} req/s (p50 {bare_p50})",
                     rps / bare_rps, TARGETS["poll"], "≥")
        self.row("… the bare view with one `SELECT 1`, over HTTP", f"{floor_rps:.0f} req/s (p50 {floor_p50})",
                 floor_rps / bare_rps, None, "")

    def create_markets(self) -> None:
        """Sequential creates, alternating the async path (flag on) and the old path (flag off)."""
        from markets import geo

        on, off = self.brand("create-on"), self.brand("create-off")
        countries = [c for c in geo.COUNTRY_CODES if c not in ("US", "FR", "DE")]
        latencies: dict[str, list[float]] = {"on": [], "off": []}
        calls: dict[str, dict[str, int]] = {}
        for b, port, generate in ((on, self.ports["api_on"], True), (off, self.ports["api_off"], False)):
            self.post(self.markets_url(port, b), b["token"], {"market": "US", "languageCode": "en",
                                                              "generatePrompts": generate})  # warm-up
        for path, b, port, generate in (("on", on, self.ports["api_on"], True),
                                        ("off", off, self.ports["api_off"], False)):
            self.sim_calls.mark()
            self.sqs_calls.mark()
            for country in countries[:CREATE_SAMPLES] if path == "on" else countries[100:100 + CREATE_SAMPLES]:
                status, body, seconds = self.post(self.markets_url(port, b), b["token"],
                                                  {"market": country, "languageCode": "en",
                                                   "generatePrompts": generate})
                if status != 201:
                    raise Failed(f"create market ({path}) answered {status}: {body}")
                latencies[path].append(seconds)
            calls[path] = {**self.sim_calls.since_mark(), **self.sqs_calls.since_mark()}
        on_median, off_median = statistics.median(latencies["on"]), statistics.median(latencies["off"])
        self.row("create market: async path (flag on) vs old path (flag off), median of "
                 f"{CREATE_SAMPLES} sequential",
                 f"{on_median * 1000:.0f} ms vs {off_median * 1000:.0f} ms", on_median / off_median,
                 TARGETS["create"], "≤")
        for path in ("on", "off"):
            per_market = ", ".join(f"{name} {count / CREATE_SAMPLES:.1f}" for name, count in calls[path].items())
            self.row(f"create market, external calls per market ({'async' if path == 'on' else 'old'} path)",
                     per_market, None, None, "")

    def activate(self) -> None:
        from markets import geo

        b = self.brand("activate")
        countries = [c for c in geo.COUNTRY_CODES if c not in ("US", "FR", "DE")][-ACTIVATE_MARKETS:]
        url = self.markets_url(self.ports["api_on"], b).removesuffix("/markets") + "/activate"
        self.sim_calls.mark()
        self.sqs_calls.mark()
        status, body, seconds = self.post(url, b["token"], {
            "generatePrompts": True, "markets": [{"market": c, "languageCode": "en"} for c in countries]})
        created = sum(1 for m in body.get("markets", []) if m.get("status") == 201)
        if status not in (200, 207) or created != ACTIVATE_MARKETS:
            raise Failed(f"activate answered {status} with {created} of {ACTIVATE_MARKETS} created")
        calls = {**self.sim_calls.since_mark(), **self.sqs_calls.since_mark()}
        self.row(f"activate {ACTIVATE_MARKETS} markets with generation (one request)",
                 f"{seconds:.1f} s; " + ", ".join(f"{k} {v}" for k, v in calls.items()),
                 None, None, "")

    def worker(self) -> None:
        """Every queued job, DRS at 1 s, one worker with 8 threads: wall time vs the ideal."""
        from django.db.models import Max, Min

        from jobs.models import AsyncJob, JobStatus
        from serenity.sandbox.drs import controls

        queued = AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).count()
        if queued == 0:
            raise Failed("no job is queued for the worker scenario")
        controls.set_latency(DRS_LATENCY_MS)
        meter = self.var / "worker-meter.jsonl"
        self.sim_calls.mark()
        self.start_worker(meter)
        groups = {name: proc.pid for name, proc in self.runner.children if name in ("worker", "simulators", "sqs")}
        deadline = time.monotonic() + 300
        while not AsyncJob.objects.filter(started_at__isnull=False).exists():  # the worker's start-up excluded
            self.runner.check_children()
            if time.monotonic() > deadline:
                raise Failed("the worker claimed no job within 300 s")
            time.sleep(0.05)
        cpu_before = cpu_seconds(groups)
        while AsyncJob.objects.filter(status=JobStatus.IN_PROGRESS).exists():
            self.runner.check_children()
            if time.monotonic() > deadline:
                raise Failed("the worker did not finish the queued jobs within 300 s")
            time.sleep(0.5)
        cpu = {name: used - cpu_before[name] for name, used in cpu_seconds(groups).items()}
        failed = AsyncJob.objects.exclude(status=JobStatus.COMPLETED).values_list("error_code", flat=True)
        if failed:
            raise Failed(f"jobs did not complete: {sorted(set(failed), key=str)}")
        span = AsyncJob.objects.aggregate(first=Min("started_at"), last=Max("ended_at"))
        wall = (span["last"] - span["first"]).total_seconds()
        ideal = math.ceil(queued / WORKER_THREADS) * DRS_LATENCY_MS / 1000
        self.row(f"worker: {queued} queued jobs, DRS {DRS_LATENCY_MS} ms, {WORKER_THREADS} threads "
                 "(first claim to last completion)", f"{wall:.1f} s vs ideal {ideal:.0f} s", wall / ideal,
                 TARGETS["worker_wall"], "≤")
        self.row("… CPU used meanwhile, per process (2 cores give 2 s per second of wall time)",
                 ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items()) + f" in {wall:.1f} s", None,
                 None, "")
        deliveries = [json.loads(line) for line in meter.read_text().splitlines()]
        runs = [d for d in deliveries if d["task"] == "jobs.run"]
        self.row("… one delivery's wall time (median), DRS's 1 s included",
                 f"{statistics.median(d['wall_ms'] for d in runs):.0f} ms", None, None, "")
        cpu = statistics.median(d["cpu_ms"] for d in runs)
        sql = statistics.median(d["sql"] for d in runs)
        self.row(f"worker CPU per delivery, external calls excluded (median of {len(runs)})", f"{cpu:.1f} ms",
                 cpu / TARGETS["worker_cpu_ms"], 1.0, "≤", unit=f"of the {TARGETS['worker_cpu_ms']} ms target")
        self.row(f"worker SQL statements per delivery (median, max {max(d['sql'] for d in runs)})", f"{sql:.0f}",
                 sql / TARGETS["worker_sql"], 1.0, "≤", unit=f"of the {TARGETS['worker_sql']} target")
        calls = self.sim_calls.since_mark()
        self.row("worker: external calls per job", ", ".join(f"{k} {v / queued:.1f}" for k, v in calls.items()),
                 None, None, "")

    # --- output ----------------------------------------------------------------------------------------
    def row(self, what: str, measured: str, ratio: float | None, target: float | None, sense: str,
            unit: str = "") -> None:
        if ratio is None or target is None:
            self.rows.append((what, measured, "" if ratio is None else f"{ratio:.3g}×", ""))
            print(f"  {what}: {measured}", flush=True)
            return
        met = ratio >= target if sense == "≥" else ratio <= target
        goal = f"{sense} {target:g}× {unit}".strip() if not unit else f"{sense} {target:g}× ({unit})"
        self.rows.append((what, measured, f"{ratio:.3g}×", f"{goal} {'met' if met else 'NOT met'}"))
        print(f"  {what}: {measured} -> {ratio:.3g}× ({goal} {'met' if met else 'NOT met'})", flush=True)

    def table(self) -> str:
        lines = ["| scenario | measured (same run) | ratio | target |", "| --- | --- | --- | --- |"]
        lines += [f"| {what} | {measured} | {ratio} | {target} |" for what, measured, ratio, target in self.rows]
        return "\n".join(lines)


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown CPU")
    memory = next((int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), 0)
    import psycopg

    with psycopg.connect(DATABASE_URL) as conn:
        pg = (conn.execute("SHOW server_version").fetchone() or ("unknown",))[0]
    return (f"{os.cpu_count()} × {model}, {memory} GiB RAM, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}, PostgreSQL {pg}")


def write_report(bench: Bench, started: datetime, seconds: float) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text() if doc.exists() else ""
    begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
    report = (f"{begin}\nLatest `make bench`: {started:%Y-%m-%d %H:%M} UTC, {seconds:.0f} s, on {machine()}.\n\n"
              f"{bench.table()}\n{end}")
    if begin in text and end in text:
        text = text[:text.index(begin)] + report + text[text.index(end) + len(end):]
    else:
        text = (text or "# Benchmarks\n") + "\n" + report + "\n"
    doc.write_text(text)


def main() -> int:
    started, t0 = datetime.now(UTC), time.monotonic()
    bench = Bench()
    try:
        wrk_binary()
        bench.start()
        print("--- poll", flush=True)
        bench.poll()
        print("--- create market", flush=True)
        bench.create_markets()
        print("--- activate", flush=True)
        bench.activate()
        print("--- worker", flush=True)
        bench.worker()
    except Failed as failure:
        print(f"\nmake bench: {failure}\n(logs in {bench.var})", flush=True)
        bench.runner.stop_all()
        return 1
    except BaseException:
        bench.runner.stop_all()
        raise
    bench.runner.stop_all()
    write_report(bench, started, time.monotonic() - t0)
    print("\n" + bench.table() + "\n\nWritten to docs/benchmarks.md", flush=True)
    shutil.rmtree(bench.var, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
