"""Worker processes with a hard time limit per task: a task past its limit has its process
killed and replaced, and the run goes on.

`multiprocessing.Pool` cannot do this: a worker stuck in a long XLA compilation (which no
signal interrupts) holds its task forever, and the only remedy a Pool offers is to give up on
the whole run. Here each worker serves one task at a time over its own pipe, so the parent knows
which task each process holds and since when.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.connection
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

Task = tuple[Any, int]  # (options, program index)


def _serve(worker: Callable[[Task], Any], connection: multiprocessing.connection.Connection) -> None:
    """A worker process's loop: a task in, its result out, until the parent sends None."""
    while (task := connection.recv()) is not None:
        connection.send(worker(task))


@dataclasses.dataclass
class _Process:
    """One worker process, the task it holds (if any), when that task started, tasks served."""

    process: Any
    connection: multiprocessing.connection.Connection
    task: Task | None = None
    started: float = 0.0
    served: int = 0


def _start(context: Any, worker: Callable[[Task], Any]) -> _Process:
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(worker, child), daemon=True)
    process.start()
    child.close()
    return _Process(process, parent)


def _stop(worker: _Process, kill: bool) -> None:
    if kill:
        worker.process.kill()
    else:
        try:
            worker.connection.send(None)
        except OSError:
            worker.process.kill()
    worker.process.join(timeout=10)
    if worker.process.is_alive():
        worker.process.kill()
        worker.process.join()
    worker.connection.close()


def run_tasks(
    tasks: Sequence[Task], jobs: int, worker: Callable[[Task], Any], limit: float,
    lost: Callable[[Task, str], Any], tasks_per_worker: int,
) -> Iterator[Any]:
    """The results of `tasks`, as they finish, computed by `jobs` spawned processes.

    Args:
      tasks: `(options, index)` pairs.
      jobs: worker processes (at least 1).
      worker: computes one result from a task; a module-level function, so a spawned process can
        load it.
      limit: seconds one task may take; past them its process is killed and replaced.
      lost: the result standing for a task whose process was killed (past `limit`) or died (for
        example by the out-of-memory killer), given the task and a reason.
      tasks_per_worker: tasks a process serves before it is replaced (bounds slow memory growth).
    Returns:
      An iterator of one result per task, in the order they finish.
    """
    context = multiprocessing.get_context("spawn")
    queue = list(reversed(tasks))
    workers = [_start(context, worker) for _ in range(max(1, min(jobs, len(tasks))))]
    try:
        for process in workers:
            _give(process, queue)
        while any(process.task is not None for process in workers):
            busy = [process for process in workers if process.task is not None]
            deadline = min(process.started for process in busy) + limit
            ready = multiprocessing.connection.wait([p.connection for p in busy],
                                                    timeout=max(0.0, deadline - time.monotonic()))
            for index, process in enumerate(workers):
                if process.task is None:
                    continue
                result = _collect(process, ready, limit, lost)
                if result is None:
                    continue
                yield result
                if process.served >= tasks_per_worker or not process.process.is_alive():
                    _stop(process, kill=not process.process.is_alive())
                    workers[index] = process = _start(context, worker)
                _give(process, queue)
    finally:
        for process in workers:
            _stop(process, kill=process.task is not None)


def _kill(process: _Process) -> None:
    process.process.kill()
    process.process.join()


def _give(process: _Process, queue: list[Task]) -> None:
    """Hand `process` the next task of `queue`, if any."""
    if queue:
        process.task, process.started = queue.pop(), time.monotonic()
        process.connection.send(process.task)


def _collect(process: _Process, ready: list[Any], limit: float, lost: Callable[[Task, str], Any]) -> Any:
    """The result `process` has for its task, a `lost` one if it died or ran past `limit`, or None
    while it is still within its time."""
    task = process.task
    assert task is not None
    elapsed = time.monotonic() - process.started
    if process.connection in ready:
        try:
            result = process.connection.recv()
        except (EOFError, OSError):
            result = lost(task, f"its worker process died after {elapsed:.0f} s (out of memory?)")
            _kill(process)
    elif elapsed >= limit:
        result = lost(task, f"over {limit:g} s: its worker process was killed")
        _kill(process)
    else:
        return None
    process.task, process.served = None, process.served + 1
    return result
