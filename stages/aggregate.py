"""DVC stage `aggregate`: DuckDB over every run's outputs -> the A1-A7 artifacts and plots."""
from vgrout import aggregate, stage

stage.main("aggregate", aggregate.aggregate_stage)
