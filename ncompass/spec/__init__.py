"""Target specs: YAML/dict → validated pydantic models, versions and migration, merge, file:line errors."""
