"""The libcst rewriter: locate targets, plan markers, transform, and map lines back to the original.

Pipeline: :mod:`source` (parse) → :mod:`statements` (index) → :mod:`locate` / :mod:`ranges`
(resolve markers) → :mod:`plan` (check the rules, name the sites) → :mod:`transform` (libcst
edit) → :mod:`linemap` (compile with original lines).
"""

from __future__ import annotations

from ncompass.rewrite.result import RewriteResult, rewrite_module, rewrite_path

__all__ = ["RewriteResult", "rewrite_module", "rewrite_path"]
