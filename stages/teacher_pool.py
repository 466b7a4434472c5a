"""DVC stage `teacher_pool`: the frozen, graded teacher pool for the training prompts."""
from vgrout import params, pool
from vgrout.substrate import load_problems

p = params.load()
c = params.get(p, "pool")
pool.build(load_problems("data/substrate/train.jsonl"), "data/pool/pool.jsonl", "metrics/pool.json",
           kind=c["kind"], per_problem=c["per_problem"], rates=c["rates"], seed=c["seed"],
           teacher=c["teacher"], adapter_dir=c["adapter_dir"], temperature=c["temperature"],
           max_new_tokens=c["max_new_tokens"])
