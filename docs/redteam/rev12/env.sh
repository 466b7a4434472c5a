# source me from the checkout root: private run slots, slot log
export PYTHON=.venv/bin/python
export PYTHONPATH=$PWD/docs/redteam/rev12/site:$PWD
export RT12_SLOTS='/tmp/rt12-slots-{uid}'
