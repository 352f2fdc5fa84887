"""A small model with one deliberately slow statement, for the session tests.

The slow statement (``spin(SLOW)``) sits in a loop inside ``Pipeline.compute``; everything
else is cheap. Line numbers matter to the tests: they find lines by their text.

``spin`` burns this thread's CPU time, not wall time: a profiler measures wall time, and on a
busy machine every CPU-bound part of the run (the import, ncompass's rewrite of this module,
the cheap statements) stretches by the share of the cores it gets. A statement that waited
for the wall clock would not stretch with them, and at a load average of 20 the whole run's
own ~20 ms of CPU (100-200 ms of wall time) outweighed the planted 60 ms. CPU time stretches
like the rest, so the planted statement's share of the run does not depend on the load.
"""

import time

SLOW = 0.02  # 40x FAST, in CPU seconds: the ranking must survive a loaded 2-core machine
FAST = 0.0005


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Pipeline:
    def prepare(self, x):
        spin(FAST)
        return x + 1

    def compute(self, x):
        total = x
        spin(FAST)
        for step in range(3):
            total += step
            spin(FAST)
            spin(SLOW)  # the planted slow statement
        return total

    def forward(self, x):
        y = self.prepare(x)
        return self.compute(y)


def run(steps=2):
    pipeline = Pipeline()
    for _ in range(steps):
        pipeline.forward(1)
