"""Target specs: YAML/dict → validated models, versions and migration, merge, file:line errors."""
