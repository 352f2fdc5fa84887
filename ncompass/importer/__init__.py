"""The import hook: a meta-path finder and loader that rewrites target modules, with a bytecode cache."""
