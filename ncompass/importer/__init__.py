"""The import hook: a meta-path finder and loader that rewrite target modules, with a code cache."""
