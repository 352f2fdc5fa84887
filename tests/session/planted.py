"""A small model with one deliberately slow statement, for the session tests.

The slow statement (``spin(SLOW)``) sits in a loop inside ``Pipeline.compute``; everything
else is cheap. Line numbers matter to the tests: they find lines by their text.
"""

import time

SLOW = 0.02  # 40x FAST: the ranking must survive a loaded 2-core machine
FAST = 0.0005


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
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
