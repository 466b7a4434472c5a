import glob
from vgrout.substrate import problems, grader
from vgrout.substrate.modes import shown_tests_of
for f in sorted(glob.glob("tests/fixtures/**/*", recursive=True)):
    ps = None
    for loader in (problems.load_any, problems.load_leetcode):
        try: ps = loader(f); break
        except Exception: pass
    if ps is None: continue
    n = r = 0
    for p in ps:
        for t in p.tests + [t for t in shown_tests_of(p) if t not in p.tests]:
            n += 1
            w = grader._test_refusal(grader._entry_name(p), t)
            if w: r += 1; print("  REFUSED", f, p.id, repr(t[:100]), w[:60])
    print(f, len(ps), "problems", n, "tests", r, "refused")
