#!/usr/bin/env bash
# On a GPU machine of the device pool: the Python packages bench/harness.py and bench/trl_grpo.py
# need beyond its image (pydantic, trl, datasets, dill, multiprocess), carried as a tar of wheels
# in pieces that earlier calls copied to $STASH (whpart.0 ...). Source it from the repository root:
#   STASH=/tmp/stash . bench/device_setup.sh
# The pieces were made on a machine with the package index (a tar of the wheels, split in pieces
# small enough to travel beside the working tree):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d W pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
#     trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
#   tar -C W -cf wheels.tar . && split -b 1300000 -d -a 1 wheels.tar whpart.
STASH=${STASH:-/tmp/stash}
WHEELS_MD5=d0218b2a0a10a5cfab87f75e5756a5b9  # of the pieces made on 2026-11-26; a rebuilt tar differs: set its md5 here
got=$(cat "$STASH"/whpart.* | md5sum | cut -d' ' -f1)
if [ "$got" != "$WHEELS_MD5" ]; then echo "FAILED: wheel pieces md5 $got, want $WHEELS_MD5"; return 1; fi
mkdir -p /tmp/wheels && cat "$STASH"/whpart.* | tar -C /tmp/wheels -xf -
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site /tmp/wheels/*.whl || return 1
export PYTHONPATH=/tmp/site:$(pwd) PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
