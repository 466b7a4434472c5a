"""DVC stage `aggregate`: DuckDB over every run's outputs -> the A1-A7 artifacts and plots."""
from vgrout import aggregate, params

aggregate.aggregate_stage(params.load())
