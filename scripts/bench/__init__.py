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
   worker's own CPU (vs the bare view's, in process) and SQL statements (benchmarks/worker_app.py meters
   them in the worker process);
5. scale: 512 queued jobs, DRS answering in 60 s, one worker process: wall time vs the 60 s ideal, the
   worker's peak memory and PostgreSQL connections, the CPU each process used, and the memory each
   generation in flight costs beside one Lambda per job;
6. fairness: a worker of 64 generations, DRS at 10 s; organization A queues 256 jobs, then B one: B's time
   vs the same job on an idle system; and A alone with the fairness rule vs without it.
7. wait: the waiting poll (`?wait=N`): a COMPLETED commit to a waiting client's answer over 200 jobs, the
   requests of a 10 s job waiting vs polling every 2 s, and 1,000 waits held while wrk measures an ordinary
   poll, with the API's PostgreSQL connections and memory.
8. budgets: 2,000 jobs on four worker processes of 256 threads, DRS at 10 s, the DRS simulator admitting 200
   invocations at once and DRS_MAX_IN_FLIGHT 200: DRS in flight at peak, throttling answers, attempts spent,
   wall time vs the ideal; then the same jobs with the Semrush simulator admitting R calls a second and the
   fleet's Semrush budget just under it: 429s and Semrush's throughput vs R.
9. scaleout: 512 jobs at DRS 60 s on one worker process of 512 threads vs two of 256 (wall, connections, RSS
   per process); and fairness across processes: A's 256 jobs and B's one on two processes of 32 threads.

`make bench SCENARIOS="scale fairness"` (or `python -m scripts.bench scale fairness`) runs only the scenarios named;
each scenario's table in docs/benchmarks.md is replaced by its own run and the others are kept. The table is
printed and written there with the machine's description. Every process this script starts is stopped by its
process group when it ends, however it ends.
"""

from scripts.bench.config import SCENARIOS
from scripts.bench.scenarios import Bench

__all__ = ["SCENARIOS", "Bench"]
