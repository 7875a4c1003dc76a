"""The fuzz's worker processes: a task past its time limit, or whose process dies, is replaced
by a stand-in result and the run goes on."""

from __future__ import annotations

import os
import time

from compiler.fuzzing import workers


def _hang_on_one_die_on_two(task):
    """Program 1 runs far past any limit, program 2 kills its own process, the rest return."""
    _, index = task
    if index == 1:
        time.sleep(600)
    if index == 2:
        os._exit(3)
    return ("done", index)


def _lost(task, reason):
    return ("lost", task[1], reason)


def test_a_stuck_task_and_a_dead_worker_are_replaced_and_the_rest_still_run():
    tasks = [(None, i) for i in range(5)]
    started = time.monotonic()
    got = {r[1]: r for r in workers.run_tasks(tasks, 2, _hang_on_one_die_on_two, 4.0, _lost, 2)}
    assert sorted(got) == [0, 1, 2, 3, 4]
    assert [got[i][0] for i in range(5)] == ["done", "lost", "lost", "done", "done"]
    assert "over 4 s" in got[1][2] and "died" in got[2][2]
    assert time.monotonic() - started < 120  # the stuck task did not hold the run for its 600 s


def test_sigterm_interrupts_a_run_so_its_results_are_saved():
    """A background run ignores SIGINT; SIGTERM raises KeyboardInterrupt inside the block (so the
    run's `finally` saves), and the previous handler is back after it."""
    import signal

    import pytest

    from compiler.fuzzing import checkpoint

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), checkpoint.interrupt_on_terminate():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the signal arrives before this ends
    assert signal.getsignal(signal.SIGTERM) is before
