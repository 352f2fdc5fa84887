"""Following every process of a run: the children a script starts get its specs and profiler.

- :mod:`~ncompass.capture.follow.tree` is the run's side: it puts a ``sitecustomize`` on the
  children's ``PYTHONPATH``, lists the processes that ran and merges their traces.
- :mod:`~ncompass.capture.follow.bootstrap` runs in each new interpreter (and after each fork):
  stdlib only until the process imports a target module or torch.
- :mod:`~ncompass.capture.follow.run_sitecustomize` is the ``sitecustomize.py`` that starts it.
- :mod:`~ncompass.capture.follow.windows` records the run's windows in every process;
  :mod:`~ncompass.capture.follow.window_account` says which process recorded which.
- :mod:`~ncompass.capture.follow.leftovers` removes the private folders of runs that died.
"""

import sys as _sys

# a followed process loads the bootstrap before this package (run_sitecustomize skips the
# package's __init__ on purpose): make it this package's attribute, as an import would
if __name__ + ".bootstrap" in _sys.modules:
    bootstrap = _sys.modules[__name__ + ".bootstrap"]

__all__: list[str] = []  # used by capture.runner through its modules; nothing public here
