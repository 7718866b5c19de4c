"""Bench-only callback (not part of the collection): the control node's CPU seconds per play.

bench/fleet_timing.py enables it for its timed runs (ANSIBLE_CALLBACK_PLUGINS, ANSIBLE_CALLBACKS_ENABLED)
and names the JSON file it writes in INFERTUNE_BENCH_PLAY_CPU. At every play start and at the
playbook's end it reads the user + system seconds of ansible-playbook itself and of its reaped
children (the workers it forks per task and host), so a play costs the difference between its start
and the next mark. The file holds the marks in order: [{"play": name or null at the end, "cpu": s}].
"""
import json
import multiprocessing
import os
import resource

from ansible.plugins.callback import CallbackBase

OUTPUT_ENV = "INFERTUNE_BENCH_PLAY_CPU"
# Seconds to wait for a worker that has returned its result to exit (a guard, never reached).
WORKER_EXIT_TIMEOUT = 10


def cpu_seconds():
    """User + system seconds of this process and of the children it has waited for."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usages)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "play_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._marks = []

    def _mark(self, play):
        # At a play's start and at the end every task so far has returned its result, but the workers
        # that ran them may still be exiting, and a child's CPU counts only once it is reaped (else
        # when Ansible forks the next worker, in the next play): wait for them here.
        for worker in multiprocessing.active_children():
            worker.join(WORKER_EXIT_TIMEOUT)
        self._marks.append({"play": play, "cpu": cpu_seconds()})

    def v2_playbook_on_play_start(self, play):
        self._mark(play.get_name())

    def v2_playbook_on_stats(self, stats):
        self._mark(None)
        with open(os.environ[OUTPUT_ENV], "w", encoding="utf-8") as out:
            json.dump(self._marks, out)
