# source me from a checkout of 4522fff: the probes' environment (private run slots, slot log, nice 19)
export PYTHON=.venv/bin/python
export PYTHONPATH=$PWD/docs/redteam/rev11/site:$PWD
export RT11_SLOTS='/tmp/rt11-slots-{uid}'
