"""DeviceWorker's queue: jobs posted one by one and in groups (post_many) run in the order posted."""

import threading

from vmafxd.lanes.device import DeviceWorker, Job


class _Job(Job):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def run(self):
        self.log.append(("run", self.name))

    def drop(self):
        self.log.append(("drop", self.name))


class _Recording(DeviceWorker):
    def __init__(self):
        super().__init__(0, "test-worker")
        self.wakeups = []

    def run_batch(self, jobs):
        self.wakeups.append(len(jobs))
        super().run_batch(jobs)


def test_groups_run_in_order_with_single_jobs_and_a_stop_drops_what_comes_after():
    log = []
    w = _Recording()
    w.post(_Job("a", log))
    w.post_many([_Job("b", log), _Job("c", log)])
    w.post_many([])  # nothing posted
    w.post(_Job("d", log))
    w.stop()
    w.post_many([_Job("e", log), _Job("f", log)])  # after the stop: dropped, each once
    t = threading.Thread(target=w.run_forever)
    t.start()
    t.join(10)
    assert not t.is_alive()
    # everything before the stop was taken in one wake-up, and the stop drops what was taken with it
    assert log == [("drop", x) for x in "abcdef"]


def test_a_group_is_one_wake_up_of_the_worker():
    log = []
    w = _Recording()
    t = threading.Thread(target=w.run_forever)
    t.start()
    w.post_many([_Job(x, log) for x in "abc"])
    for _ in range(1000):
        if len(log) == 3:
            break
        threading.Event().wait(0.01)
    w.post(_Job("d", log))
    w.stop()
    t.join(10)
    assert [x for _, x in log] == list("abcd") and log[:3] == [("run", x) for x in "abc"]
    assert w.wakeups[0] == 3  # the group arrived whole
