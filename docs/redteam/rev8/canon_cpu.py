from vgrout.substrate import grader, problems
ps = problems.load_any("../shared/data/leetcode/leetcode_test_medhard.jsonl.gz")
out = grader.grade_batch(ps, ["```python\n" + p.canonical_solution + "\n```" for p in ps], workers=2, progress=False)
print("not passing alone:", [(g.problem_id, g.error) for g in out if not g.gt_pass])
print("heaviest:", sorted(((g.cpu_s or 0), g.problem_id) for g in out)[-8:])
