"""Where programs are compiled: local worker processes (default) or a Ray cluster.

Both engines yield `(index, rows)` in program order, whatever order the work finishes in, so
the shards they feed are the same bytes. A program never stops the run:

* `program_task` (run in the worker) bounds one program's time with `SIGALRM` (`timeout_s`)
  and its memory with `RLIMIT_AS` (what the worker uses plus `memory_mb`); exceeding either
  gives rows with status `timeout` or `memory`.
* A worker that dies anyway (killed by the system) is noticed by the engine: the local engine
  reruns each program it held alone in a fresh process and records the one that kills its
  worker again as `memory`; Ray reports the dead worker or its own out-of-memory kill for the
  task, recorded the same way. A program whose result does not arrive within `timeout_s`
  plus `GRACE_S` is recorded as `timeout` (its worker is killed).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import multiprocessing
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from compiler.lab.zoo.config import ZooConfig
from compiler.lab.zoo.records import MEMORY, TIMEOUT, failure_rows, program_records

ENGINES = ("local", "ray")
GRACE_S = 60.0  # beyond timeout_s, before the engine gives up on a worker
WORKER_TASKS = 200  # programs per local worker before it is replaced (bounds slow leaks)
AHEAD = 4  # programs in flight per worker

Rows = list[dict[str, Any]]
Task = Callable[[ZooConfig, int], Rows]


class ProgramTimeout(BaseException):
    """Raised inside a worker when one program exceeds its time.

    A `BaseException`, so that the per-variant `except Exception` of the record code lets it
    through to `program_task` (as an `Exception` it was recorded as an `error` of whichever
    variant was running, found by the 10,000-program run)."""


def _virtual_memory() -> int | None:
    """Bytes of address space this process uses now (Linux), None where unknown."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def _limits(timeout_s: float, memory_mb: int | None) -> Iterator[None]:
    """Time and address-space limits for one program (main thread only; restored after)."""
    main = threading.current_thread() is threading.main_thread()
    previous_handler = None
    if main:
        def expire(signum: int, frame: Any) -> None:
            raise ProgramTimeout(f"the program took longer than {timeout_s:g} s")

        previous_handler = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
    used = _virtual_memory() if memory_mb is not None else None
    previous_limit = resource.getrlimit(resource.RLIMIT_AS)
    if used is not None and memory_mb is not None:
        limit = used + memory_mb * 2**20
        hard = previous_limit[1]
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    try:
        yield
    finally:
        if used is not None:
            resource.setrlimit(resource.RLIMIT_AS, previous_limit)
        if main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_handler)


def program_task(config: ZooConfig, index: int) -> Rows:
    """The rows of program `index`, within the configured time and memory."""
    try:
        with _limits(config.timeout_s, config.memory_mb):
            return program_records(config, index)
    except ProgramTimeout as error:
        return failure_rows(config, index, TIMEOUT, str(error))
    except MemoryError as error:
        return failure_rows(config, index, MEMORY, f"MemoryError: {error} (limit {config.memory_mb} MB)")


# -- local processes ----------------------------------------------------------------------------


def _pool(jobs: int) -> concurrent.futures.ProcessPoolExecutor:
    context = multiprocessing.get_context("spawn")
    if sys.version_info >= (3, 11):
        return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, max_tasks_per_child=WORKER_TASKS)
    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context)


def _kill(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Kill the pool's workers (the executor has no public way before Python 3.14)."""
    for process in list(getattr(pool, "_processes", {}).values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def _alone(config: ZooConfig, index: int, task: Task) -> Rows:
    """Run one program in a fresh process; a dead worker or no answer is recorded."""
    pool = _pool(1)
    try:
        return pool.submit(task, config, index).result(timeout=config.timeout_s + GRACE_S)
    except BrokenProcessPool:
        return failure_rows(config, index, MEMORY, "the worker process died (killed, out of memory?)")
    except concurrent.futures.TimeoutError:
        return failure_rows(config, index, TIMEOUT, f"no result within {config.timeout_s + GRACE_S:g} s")
    finally:
        _kill(pool)


def local_results(config: ZooConfig, indices: Iterable[int], jobs: int,
                  task: Task = program_task) -> Iterator[tuple[int, Rows]]:
    """Rows of each program, in order, from `jobs` worker processes (in this process if 1).

    `task` computes one program's rows (a picklable, module-level function; tests swap it).
    """
    pending = collections.deque(indices)
    if jobs <= 1:
        while pending:
            index = pending.popleft()
            yield index, task(config, index)
        return
    while pending:
        pool = _pool(jobs)
        futures: dict[int, concurrent.futures.Future] = {}
        try:
            while pending or futures:
                while pending and len(futures) < jobs * AHEAD:
                    index = pending.popleft()
                    futures[index] = pool.submit(task, config, index)
                index = next(iter(futures))
                try:
                    rows = futures[index].result(timeout=config.timeout_s + GRACE_S)
                except concurrent.futures.TimeoutError:
                    rows = failure_rows(config, index, TIMEOUT, f"no result within {config.timeout_s + GRACE_S:g} s")
                    del futures[index]
                    pending.extendleft(reversed(list(futures)))  # the killed pool's work restarts
                    futures.clear()
                    yield index, rows
                    break
                del futures[index]
                yield index, rows
        except BrokenProcessPool:
            # A worker died: rerun what it may have held one at a time to find the culprit.
            lost = list(futures)
            futures.clear()
            for index in lost:
                yield index, _alone(config, index, task)
        finally:
            _kill(pool)


# -- Ray ----------------------------------------------------------------------------------------


def _ray_failure(config: ZooConfig, index: int, error: BaseException) -> Rows:
    import ray.exceptions

    if isinstance(error, (ray.exceptions.OutOfMemoryError, ray.exceptions.WorkerCrashedError)):
        return failure_rows(config, index, MEMORY, f"{type(error).__name__}: the worker died (out of memory?)")
    if isinstance(error, ray.exceptions.GetTimeoutError):
        return failure_rows(config, index, TIMEOUT, f"no result within {config.timeout_s + GRACE_S:g} s")
    return failure_rows(config, index, "error", f"{type(error).__name__}: {' '.join(str(error).split())[:2000]}")


def ray_results(config: ZooConfig, indices: Iterable[int], address: str | None, jobs: int) -> Iterator[tuple[int, Rows]]:
    """Rows of each program, in order, from Ray tasks.

    `address` is the cluster to join (`ray.init(address=...)`; "auto" finds a running one);
    None starts a local instance with `jobs` CPUs.
    """
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray engine needs Ray: pip install 'tracr-compile[ray]'") from None
    if not ray.is_initialized():
        # Workers of a local instance import this project from the same folder as the driver.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        runtime_env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}}
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "runtime_env": runtime_env}
        if address is None:
            options["num_cpus"] = jobs
        ray.init(address=address, **options)
    task = ray.remote(num_cpus=1, max_retries=0)(program_task)
    pending = collections.deque(indices)
    refs: dict[int, Any] = {}
    window = max(1, int(ray.available_resources().get("CPU", jobs))) * AHEAD
    while pending or refs:
        while pending and len(refs) < window:
            index = pending.popleft()
            refs[index] = task.remote(config, index)
        index = next(iter(refs))
        ref = refs.pop(index)
        try:
            rows = ray.get(ref, timeout=config.timeout_s + GRACE_S)
        except Exception as error:
            if isinstance(error, ray.exceptions.GetTimeoutError):
                ray.cancel(ref, force=True)
            rows = _ray_failure(config, index, error)
        yield index, rows
