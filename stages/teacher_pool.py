"""DVC stage `teacher_pool`: the frozen, graded teacher pool for the training prompts."""
from vgrout import pool, stage

stage.main("teacher_pool", pool.pool_stage)
