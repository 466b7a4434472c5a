"""DVC stage `teacher_pool`: the frozen, graded teacher pool for the training prompts."""
from vgrout import stage
from vgrout.pool import pool

stage.main("teacher_pool", pool.pool_stage)
