"""DVC stage `aggregate`: DuckDB over every run's outputs -> the A1-A7 artifacts and plots."""
from vgrout import stage
from vgrout.analysis import aggregate

stage.main("aggregate", aggregate.aggregate_stage)
